"""Secrets the 2026-12-03 security review found surviving import -> process -> export
(/tmp/rev-sec/REPORT.md S1-S5): each shape is redacted (only the secret's span), the
ordinary text beside it is kept, and the batch screen flags every such string."""

from __future__ import annotations

import json
import random
import re
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from worldtrace.collectors.synthetic import build, tool
from worldtrace.pipelines.filters import FilterConfig
from worldtrace.pipelines.units import filter_records, read_valid
from worldtrace.schemas.arrow import to_table
from worldtrace.schemas.redact import Redactor
from worldtrace.schemas.redact_rules import DEFAULT_ALLOW, RedactConfig, example_secrets

B62 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def _b62(n: int, offset: int = 0) -> str:
    return "".join(B62[(i * 7 + offset) % 62] for i in range(n))


def redacted(text: str, secret: str, kind: str) -> None:
    """`secret` in `text` becomes one placeholder of `kind`, and nothing else changes."""
    out, n = Redactor().text(text)
    assert out == text.replace(secret, f"<secret:{kind}>"), out
    assert n == text.count(secret)


# -- S1: url_password ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("REDIS_URL=redis://:Rd9hunter2CacheQz@cache.internal:6379/0", "Rd9hunter2CacheQz"),
        ("ftp://ops@corp.example:FtPassw0rd9x@ftp.corp.example/pub", "FtPassw0rd9x"),
        ("mysql://root:Sl8ab/cd99xz@127.0.0.1:3306/app", "Sl8ab/cd99xz"),
        ('{"url": "redis://:Rd9hunter2CacheQz@cache.internal:6379/0"}', "Rd9hunter2CacheQz"),
        ("amqp://guest:gu3st/Pw@rabbit:5672/%2F and more", "gu3st/Pw"),
    ],
)
def test_url_passwords_with_an_empty_user_an_at_in_the_user_or_a_slash_are_redacted(text, secret):
    """Found: `redis://:PW@h` (the standard Redis form), `ftp://me@corp:PW@h` and
    `mysql://root:a/b@h` kept their passwords: the rule wanted a user of one or more
    characters without `@`, and a password without `/`."""
    redacted(text, secret, "url_password")


def test_a_url_password_holding_a_slash_and_an_at_loses_what_precedes_its_first_at():
    """Documented limit: with both, the host is taken to start after the first `@`."""
    out, n = Redactor().text("redis-cli -u rediss://:p/w@ss9Zz@cache:6380")
    assert (out, n) == ("redis-cli -u rediss://:<secret:url_password>@ss9Zz@cache:6380", 1)


URLS = [
    "https://host/path@v2 and https://example.com/users/@alice",
    "git@github.com:org/repo.git and user@host:path/to/file and scp a@b:/tmp/x .",
    "curl http://[::1]:8080/ then http://[::1]:8080/a@b and http://[fe80::1%eth0]:80/x@y",
    "npm i https://registry.example.com:8443/@babel/core and http://localhost:3000/users/@bob",
    "pip install git+ssh://git@github.com:org/repo.git@v1.2 git+https://github.com/o/r@main",
    "docker pull docker://registry.example.com:5000/org/image@sha256:0123456789abcdef",
    "ssh://git@github.com:22/org/repo.git and https://user@host:8080/path@v2",
    "mail alice@example.com, bob.smith+tag@mail.example.org:25 or file://C:/Users/me@corp/x",
    "sqlite://:memory: and mailto:someone@example.com",
    "https://user:${PASSWORD}@host/ https://user:$PASSWORD@h https://user:****@host/",
]


@pytest.mark.parametrize("text", URLS)
def test_ordinary_urls_addresses_and_scp_forms_are_kept(text):
    assert Redactor().text(text) == (text, 0)


# -- S2: the allow-list ------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "DATABASE_URL=postgres://app:$Tr0ub4dor_x9Qz@db.internal:5432/prod",
        "git remote add o https://deploy:$ghTokenPw2024Zz@git.example.com/r.git",
        "https://alice:${Sup3rSecretPw}@host/",
    ],
)
def test_a_secret_that_starts_with_a_dollar_is_not_taken_for_a_placeholder(text):
    """Found: the default allow-list kept every captured value that looked like `$WORD`."""
    out, n = Redactor().text(text)
    assert n == 1 and "<secret:url_password>@" in out, out


@pytest.mark.parametrize(
    "value",
    ["$PASSWORD", "${DB_PASS}", "$db_password", "$pass", "$TOKEN", "${TOKEN}", "$DB2_PASS",
     "$pass1", "$Password", "${dbPassword}", "$_secret"],
)  # fmt: skip
def test_placeholders_people_write_stay(value):
    text = f"postgres://app:{value}@db.internal:5432/prod"
    assert Redactor().text(text) == (text, 0)
    assert any(re.fullmatch(a, value) for a in DEFAULT_ALLOW)


# -- S3, S4: AWS secret keys ---------------------------------------------------------------
AWS_KEY = "wJalrXUtnFEMIK7MDENGbPxRfiCYzEXAMPLEKEY1"
AWS_SLASHED = "93wcmiKr8AgzNZ85IU/sQHmd5aOZliyZMV2xuHrb"
AWS_ESCAPED = AWS_SLASHED.replace("/", "\\/")  # as PHP's json_encode writes it


@pytest.mark.parametrize(
    "text",
    [
        f"$ aws configure set aws_secret_access_key {AWS_KEY}",
        f"aws configure set default.aws_secret_access_key {AWS_KEY} --profile x",
        f"$ aws configure get aws_secret_access_key\r\n{AWS_KEY}\r\n$ ",
        f"AWS_SECRET_ACCESS_KEY\t{AWS_KEY}",
    ],
)
def test_an_aws_secret_key_after_its_name_and_whitespace_is_redacted(text):
    """Found: the rule wanted `=`, `:` or `=>` after the name."""
    redacted(text, AWS_KEY, "aws_secret_key")


def test_an_aws_secret_key_with_escaped_slashes_is_redacted():
    """Found: JSON with `/` written `\\/` (PHP's `json_encode` default) kept the key: its
    characters stopped at the backslash. The same holds for session tokens."""
    text = f'{{"SecretAccessKey": "{AWS_ESCAPED}"}}'
    redacted(text, AWS_ESCAPED, "aws_secret_key")
    out, n = Redactor().text(json.dumps({"cmd": text}))  # and that JSON inside a JSON string
    assert n == 1 and "93wcmiKr8A" not in out and "<secret:aws_secret_key>" in out, out
    token = "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQD" + _b62(300, 6) + "=="
    escaped = token.replace("/", "\\/")
    redacted(f'{{"SessionToken": "{escaped}"}}', escaped, "aws_session_token")


def test_text_near_an_aws_secret_name_is_kept():
    for text in (
        "aws configure get aws_secret_access_key",
        "Set aws_secret_access_key to the value you copied, then run aws sts get-caller-identity",
        "aws_secret_access_key = ${AWS_SECRET_ACCESS_KEY}",
        "SecretAccessKey is forty characters long: see the AWS documentation for details",
    ):
        assert Redactor().text(text) == (text, 0)


# -- S5: token shapes ----------------------------------------------------------------------
HEX40 = "9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b"
SAS_SIG = "Xh3oN9cW8%2BvQ5kL1mZ7yR2tJ4pF6dS0aE9uG3iH%2Fb8%3D"
TOKENS = [
    ("xapp-1-A0ABCDEF123-1234567890123-" + "0123456789abcdef" * 4, "slack_token"),
    ("xoxe-1-My0xLTExMjM0NTY3ODktMTIzNDU2Nzg5MDEyLTEyMzQ1Njc4OTAxMjM0", "slack_token"),
    ("ya29.a0AfH6SMBx3gT0kQ2abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV0123456789",
     "google_oauth_token"),
    ("dckr_pat_" + _b62(27, 3), "docker_token"),
    ("dckr_oat_" + _b62(32, 4), "docker_token"),
    ("shpat_" + "0123456789abcdef" * 2, "shopify_token"),
    ("shpca_" + "fedcba9876543210" * 2, "shopify_token"),
    ("shppa_" + "00112233445566778899aabbccddeeff", "shopify_token"),
    ("shpss_" + "ABCDEF0123456789abcdef0123456789", "shopify_token"),
]  # fmt: skip


@pytest.mark.parametrize(("token", "kind"), TOKENS)
def test_prefixed_tokens_are_redacted(token, kind):
    for text in (f"TOKEN={token}\n", f'{{"token": "{token}"}}', f"use {token}, then"):
        redacted(text, token, kind)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Authorization: Bearer dXBCljsXmOAzhmywBdgbsAIUGpQKLvuGnsFRwhBv",
         "dXBCljsXmOAzhmywBdgbsAIUGpQKLvuGnsFRwhBv"),
        ("curl -H 'authorization: bearer dXBCljsXmOAzhmywBdgbsAIUGpQKLvuGnsFRwhBv' http://x/",
         "dXBCljsXmOAzhmywBdgbsAIUGpQKLvuGnsFRwhBv"),
        ('headers = {"Authorization": "Bearer dXBCljsXmOAzhmywBdgbsAIUGpQKLvuGnsFRwhBv"}',
         "dXBCljsXmOAzhmywBdgbsAIUGpQKLvuGnsFRwhBv"),
        (f"Authorization: Token {HEX40}", HEX40),
        (f'curl -H "Authorization: token {HEX40}" https://api.github.com/user', HEX40),
    ],
)  # fmt: skip
def test_authorization_headers_without_a_digit_or_with_the_token_scheme_are_redacted(text, secret):
    redacted(text, secret, "bearer_token")


def test_an_azure_sas_signature_is_redacted():
    url = (
        "https://acct.blob.core.windows.net/c/b.txt?sv=2022-11-02&ss=b&srt=o&sp=r"
        f"&se=2026-12-31T00:00:00Z&sig={SAS_SIG}"
    )
    for text in (url, f"curl '{url}' -o b.txt", json.dumps({"u": url}),
                 url.replace("&", "\\u0026"), url.replace("&", "&amp;"),
                 url.replace(f"&sig={SAS_SIG}", f"&sig={SAS_SIG}&spr=https")):  # fmt: skip
        redacted(text, SAS_SIG, "azure_sas_token")


def test_a_jwt_whose_header_has_a_space_after_the_brace_is_redacted():
    import base64

    def b64(s: str) -> str:
        return base64.urlsafe_b64encode(s.encode()).decode().rstrip("=")

    sig = _b62(43, 5)
    for header, payload in (
        ('{ "alg": "HS256", "typ": "JWT" }', '{ "sub": "1234567890" }'),
        ('{ "alg": "RS256" }', '{"sub": "alice", "exp": 1}'),
        ('{"alg": "HS256"}', '{ "sub": "bob" }'),
    ):
        jwt = f"{b64(header)}.{b64(payload)}.{sig}"
        redacted(f"Cookie: session={jwt}; Path=/", jwt, "jwt")


ORDINARY = [
    "Bearer authentication is described in RFC 6750",
    "Authorization: Bearer <token> and Authorization: Bearer $ACCESS_TOKEN",
    "Authorization: Bearer YOUR_ACCESS_TOKEN_HERE or Authorization: Token ${API_TOKEN}",
    "Authorization: Bearer authenticationrequired and the Token authentication scheme",
    "the Authorization header carries a Bearer token: see TokenAuthenticationMiddleware",
    "a ya29 token starts ya29. and sig=abc is short; xapp-1 and xoxe- alone",
    "shpat_ is Shopify's prefix, dckr_pat_ Docker's; dckr_pat_short",
    "https://example.com/search?q=sig=true&sig=ok&design=sig",
    "eyAic29tZSI6ICJ0ZXh0IiB9 is base64 of a JSON text",
    "xoxe is not a word; shppa_config_value_for_the_app_and_more",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_near_the_new_shapes_is_kept(text):
    assert Redactor().text(text) == (text, 0)


# -- the screen flags every new shape --------------------------------------------------------
def review_lines() -> list[str]:
    lines = [
        "REDIS_URL=redis://:Rd9hunter2CacheQz@cache.internal:6379/0",
        "ftp://ops@corp.example:FtPassw0rd9x@ftp.corp.example/pub",
        "mysql://root:Sl8ab/cd99xz@127.0.0.1:3306/app",
        "DATABASE_URL=postgres://app:$Tr0ub4dor_x9Qz@db.internal:5432/prod",
        f"$ aws configure set aws_secret_access_key {AWS_KEY}",
        f"$ aws configure get aws_secret_access_key\r\n{AWS_KEY}",
        f'{{"SecretAccessKey": "{AWS_ESCAPED}"}}',
        "Authorization: Bearer dXBCljsXmOAzhmywBdgbsAIUGpQKLvuGnsFRwhBv",
        f"Authorization: Token {HEX40}",
        f"https://a.blob.core.windows.net/c?sv=2022-11-02&sig={SAS_SIG}",
        "eyAiYWxnIjogIkhTMjU2IiB9.eyAic3ViIjogIjEyMyIgfQ." + _b62(43),
    ]
    return lines + [f"export T={t}" for t, _ in TOKENS]


def test_the_screen_flags_every_new_shape_among_random_neighbours():
    """The screen may flag more than the detectors find, never less: every review shape,
    whole and with random text around it and its neighbours."""
    red = Redactor()
    assert red.screen is not None and red.screen.utf8
    rng = random.Random(5)
    lines = review_lines()
    for line in lines:
        assert red.text(line)[1] >= 1, line
        assert red.screen.text(line), line
    bits = ["", "x", "a1", " ", "\n", "=", ":", "'", '"', "_", "-", "/", ".", "é", "—"]

    def noise() -> str:
        return "".join(rng.choice(bits) for _ in range(rng.randint(0, 3)))

    texts = [noise() + rng.choice(lines) + noise() for _ in range(1500)]
    texts += [noise() + rng.choice(URLS + ORDINARY) + noise() for _ in range(500)]
    batch = pa.RecordBatch.from_pylist([{"s": t, "l": [noise(), t]} for t in texts])
    flags = red.screen.rows(batch).tolist()
    missed = [t for t, f in zip(texts, flags, strict=True) if red.text(t)[1] and not f]
    assert missed == []


def assert_pass1_redacts_as_whole(tmp_path, lines: list[str], secrets) -> None:
    """`process` redacts whole only the records its screen flags: with `lines` in
    observations, actions and tool arguments, that equals redacting every record whole,
    and none of `secrets` is left."""
    # the clean record first: a hit at the end of a column's string may flag the next row
    records = [build("mcp", [("ls", "a b c"), ("cat x", "d e f")], episode="clean")]
    for i, line in enumerate(lines):
        place = i % 3
        obs = line if place == 0 else "ok"
        act = tool("run", cmd=line) if place == 1 else f"echo {i}\r\n{line}"
        records.append(build("mcp", [("pwd", "/"), (act, obs)], episode=f"r{i}"))
    raw = tmp_path / "raw.parquet"
    pq.write_table(to_table([t.with_id() for t in records]), raw)
    items = read_valid(str(raw), 0, Counter(), [])
    assert [flagged for *_, flagged in items] == [False] + [True] * len(lines)
    screened = filter_records(items, FilterConfig(), Counter(), [])
    whole = filter_records([(u, d, True) for u, d, _ in items], FilterConfig(), Counter(), [])
    assert screened == whole
    for secret in secrets:
        assert secret not in repr(screened), secret


def test_pass1_redacts_the_review_shapes_as_redacting_every_record_whole(tmp_path):
    assert_pass1_redacts_as_whole(
        tmp_path,
        review_lines(),
        ("Rd9hunter2CacheQz", "FtPassw0rd9x", "Sl8ab/cd99xz", "Tr0ub4dor_x9Qz",
         AWS_KEY, "93wcmiKr8AgzNZ85IU", "dXBCljsXmOAzhmywBdgbsAIUGpQKLvuGnsFRwhBv",
         HEX40, SAS_SIG, *(t for t, _ in TOKENS)),
    )  # fmt: skip


def test_example_secrets_hold_the_new_kinds():
    """`example_secrets` (planted by the end-to-end, screen and recall checks) holds one
    of each new kind, and each is redacted in its line."""
    ex = example_secrets(3)
    for kind in ("google_oauth_token", "docker_token", "shopify_token"):
        value, line = ex[kind]
        out, n = Redactor().text(line)
        assert n == 1 and value not in out and f"<secret:{kind}>" in out, (kind, out)


def test_the_repro_record_keeps_no_survivor():
    """/tmp/rev-sec/repro: 10 survivors in one record; 9 were of a known shape here, and
    `curl -u user:password` is read by curl's grammar since 2026-12-04
    (test_redact_grammar_1204.py)."""
    outs = [
        "REDIS_URL=redis://:Rd9hunter2CacheQz@cache.internal:6379/0",
        f"$ aws configure set aws_secret_access_key {AWS_KEY}",
        "DATABASE_URL=postgres://app:$Tr0ub4dor_x9Qz@db.internal:5432/prod",
        "ftp://ops@corp.example:FtPassw0rd9x@ftp.corp.example/pub",
        "mysql://root:Sl8ab/cd99xz@127.0.0.1:3306/app",
        "SLACK_APP_TOKEN=xapp-1-A0ABCDEF123-1234567890123-" + "0123456789abcdef" * 4,
        "Authorization: Bearer dXBCljsXmOAzhmywBdgbsAIUGpQKLvuGnsFRwhBv",
        '{"SecretAccessKey": "93wcmiKr8AgzNZ85IU\\/sQHmd5aOZliyZMV2xuHrb"}',
        "curl -u admin:CuS3cretAdm1n99 https://api.internal/v1/items",
        "access_token=ya29.a0AfH6SMBx3gT0kQ2abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV0123456789",
    ]
    found = [Redactor().text(o)[1] for o in outs]
    assert found == [1] * 10


def test_a_config_without_the_builtin_rules_is_unchanged_by_the_review():
    """The new shapes are built-in rules: `builtin: false` leaves detect-secrets alone."""
    red = Redactor(RedactConfig(builtin=False))
    assert red.text("redis://:Rd9hunter2CacheQz@cache.internal:6379/0")[1] == 0
