"""Secrets a review left in the text (2026-12-03, second pass): API keys in HTTP headers
(`X-Api-Key`, `Api-Key`, `X-Auth-Token`, `Ocp-Apim-Subscription-Key`, Datadog's
`dd-api-key`), keys, tokens and secrets in environment and config assignments
(`DD_API_KEY=`, `*_API_KEY=`, `*_TOKEN=`, `*_SECRET=`), and passwords without a shape
in a clear key/value context (`password: X`, `--password X`, `mysql -pX`, `PGPASSWORD=X`,
`"password": "X"`, `passwd=X`). Each is redacted (only the value), placeholders and
variable references stay, and the code, prompts and tool output around such names
(`password = get_password()`, `Enter password:`, `/etc/passwd:root:x:0:0:...`) are kept."""

from __future__ import annotations

import json
import random

import pyarrow as pa
import pytest
from worldtrace.schemas.redact import Redactor
from worldtrace.schemas.redact_rules import RedactConfig

from .test_redact_review_1203c import assert_pass1_redacts_as_whole

B62 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def _b62(n: int, offset: int = 0) -> str:
    return "".join(B62[(i * 7 + offset) % 62] for i in range(n))


HEX32 = "3f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
HEX40 = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567"
KEY = _b62(24, 1)  # no known prefix: found only by its name
PW = "hunter2word"


def redacted(text: str, secret: str, kind: str) -> None:
    """`secret` in `text` becomes one placeholder of `kind`, and nothing else changes."""
    out, n = Redactor().text(text)
    assert out == text.replace(secret, f"<secret:{kind}>"), out
    assert n == text.count(secret)


# -- API keys in HTTP headers ----------------------------------------------------------------
HEADERS = [
    (f"curl -H 'X-Api-Key: {HEX32}' https://api.example.com/v1/items", HEX32, "api_key"),
    (f"x-api-key: {KEY}\r\ncontent-type: application/json", KEY, "api_key"),
    (f"X-API-KEY: {KEY}", KEY, "api_key"),
    (f"Api-Key: {KEY}", KEY, "api_key"),
    (f'curl -s -H "X-API-KEY={KEY}" https://api.example.com/', KEY, "api_key"),
    (f"Ocp-Apim-Subscription-Key: {HEX32}", HEX32, "api_key"),
    (f"ocp-apim-subscription-key:{HEX32}", HEX32, "api_key"),
    (f"X-Auth-Token: {KEY}", KEY, "token"),
    (f"x-auth-token: {KEY}", KEY, "token"),
    (f'headers = {{"X-Api-Key": "{KEY}", "Accept": "application/json"}}', KEY, "api_key"),
    (f"requests.get(url, headers={{'x-api-key': '{KEY}'}})", KEY, "api_key"),
    (json.dumps({"cmd": f'curl -H "X-Api-Key: {HEX32}" https://x.example/'}), HEX32, "api_key"),
    (f"dd-api-key: {HEX32}", HEX32, "api_key"),
    (f"DD-APPLICATION-KEY: {HEX40}", HEX40, "api_key"),
]


@pytest.mark.parametrize(("text", "secret", "kind"), HEADERS)
def test_api_keys_in_http_headers_are_redacted(text, secret, kind):
    """Found: `X-Api-Key: <hex>` and its kin kept their keys: no rule read the header's
    name, and a hex or base62 key has no prefix of its own."""
    redacted(text, secret, kind)


# -- Datadog keys and generic environment assignments -----------------------------------------
ASSIGNMENTS = [
    (f"DD_API_KEY={HEX32}", HEX32, "api_key"),
    (f"export DD_APP_KEY={HEX40}", HEX40, "api_key"),
    (f"DATADOG_API_KEY={HEX32} DD_SITE=datadoghq.eu", HEX32, "api_key"),
    (f"api_key: {HEX32}\nsite: datadoghq.com", HEX32, "api_key"),  # datadog.yaml
    (f"docker run -e OPENWEATHER_API_KEY={KEY} img", KEY, "api_key"),
    (f'MY_SERVICE_API_KEY="{KEY}"', KEY, "api_key"),
    (f"apiKey: '{KEY}',", KEY, "api_key"),
    (f"--api-key {KEY} --model x", KEY, "api_key"),
    (f"CI_JOB_TOKEN={KEY}", KEY, "token"),
    ("VAULT_TOKEN=hvs.CAESIJlU9JMYEhOPYv4igdhm9PnZDrabYTobQ4Ymnlq1qY",
     "hvs.CAESIJlU9JMYEhOPYv4igdhm9PnZDrabYTobQ4Ymnlq1qY", "token"),
    (f"TOKEN={KEY}", KEY, "token"),
    (f'"refresh_token": "{KEY}",', KEY, "token"),
    (f"accessToken={KEY}&x=1", KEY, "token"),
    (f"JWT_SECRET={KEY}", KEY, "secret_key"),
    (f"SLACK_SIGNING_SECRET={HEX32}", HEX32, "secret_key"),
    (f"client_secret: {KEY}", KEY, "secret_key"),
    ("SECRET_KEY = 'django-insecure-k#8v$x@0p!z^(3m)q%w&e*r-t+y=u'",
     "django-insecure-k#8v$x@0p!z^(3m)q%w&e*r-t+y=u", "secret_key"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "secret", "kind"), ASSIGNMENTS)
def test_keys_tokens_and_secrets_assigned_to_their_names_are_redacted(text, secret, kind):
    """Found: `DD_API_KEY=<32 hex>`, `DD_APP_KEY=<40 hex>` and any `*_API_KEY=`,
    `*_TOKEN=`, `*_SECRET=` of no known shape were kept: the keyword plugin is off (it
    flags `password = get_password()`) and no rule read the name."""
    redacted(text, secret, kind)


# -- passwords in a clear key/value context ---------------------------------------------------
PASSWORDS = [
    (f"password: {PW}", PW),
    (f"  password: {PW}  # the staging database", PW),
    (f"Password={PW}", PW),
    (f"--password {PW}", PW),
    (f"mysqladmin --user=root --password={PW} status", PW),
    ("pg_dump --db-password 'S3cr3t!x' app", "S3cr3t!x"),
    ("mysql -u root -p'S3cr3t!' app", "S3cr3t!"),
    ("mysql -uroot -pS3cr3tPw app < dump.sql", "S3cr3tPw"),
    ("mysqldump -h db -P 3306 -u app -pS3cr3t app > app.sql", "S3cr3t"),
    ("docker exec db mysql -uroot -p\"S3cr3t!\" -e 'show databases'", "S3cr3t!"),
    (f"PGPASSWORD={PW} psql -h db -U app", PW),
    (f"export PGPASSWORD='{PW}'", PW),
    (f"MYSQL_PWD={PW} mysql -u root", PW),
    (f'{{"username": "alice", "password": "{PW}"}}', PW),
    (json.dumps({"cmd": json.dumps({"password": PW})}), PW),  # JSON inside a JSON string
    (f"passwd={PW}", PW),
    (f"DB_PASSWORD={PW}", PW),
    (f"SMTP_PASS={PW}", PW),
    (f"spring.datasource.password={PW}", PW),
    (f"Server=db;Database=app;User Id=sa;Password={PW};", PW),
    (f"POST /login user=admin&password={PW}&remember=1", PW),
    (f"'password' => '{PW}',", PW),
    (f"client.login(username='admin', password='{PW}')", PW),
    (f"sshpass -p '{PW}' ssh deploy@10.0.0.5", PW),
    (f"machine api.example.com login alice password {PW}", PW),
    (f"machine api.example.com\n  login alice\n  password {PW}\n", PW),
]


@pytest.mark.parametrize(("text", "secret"), PASSWORDS)
def test_passwords_in_a_key_value_context_are_redacted(text, secret):
    """Found: a password without a shape (`hunter2word`) was kept wherever it stood, even
    right after `password:`, `--password`, `mysql -p` or `PGPASSWORD=`."""
    redacted(text, secret, "password")


# -- placeholders and variable references stay -------------------------------------------------
PLACEHOLDERS = [
    "password: $PASSWORD", "password: ${DB_PASS}", "password: <password>", "password: ***",
    "password: ********", "password: changeme", 'password: ""', "password:", "password: ''",
    'password: "changeme123"', "--password $PW", 'PGPASSWORD="${PGPASSWORD:-postgres}" psql',
    'mysql -u root -p"$MYSQL_ROOT_PASSWORD" app', "mysql -u root -p$MYSQL_PWD app",
    "mysql -u root -p app", "X-Api-Key: <your-key>", "X-Api-Key: $API_KEY",
    "X-Api-Key: YOUR_API_KEY", '"X-Api-Key": "your-api-key-1234"', "API_KEY=xxxx",
    "DD_API_KEY=<DATADOG_API_KEY>", 'password: "{{ vault_db_password }}"',
    'password: "${DB_PASSWORD}"', "GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}",
    "export API_KEY=$(cat /run/secrets/api_key)", "password: [FILTERED]",
    "password=%(db_password)s", "DB_PASSWORD=${DB_PASSWORD:?required}", "API_KEY=",
    "sshpass -p \"$SSHPASS\" ssh host", "OPENAI_API_KEY=sk-xxxxxxxxxxxx",
]  # fmt: skip


@pytest.mark.parametrize("text", PLACEHOLDERS)
def test_placeholders_and_variable_references_stay(text):
    assert Redactor().text(text) == (text, 0)


# -- ordinary text near these names ------------------------------------------------------------
ORDINARY = [
    "password prompt:", "Enter password:", "Enter password: ", "[sudo] password for alice:",
    "Password for 'https://alice@github.com':", "--password-file /run/secrets/db_password",
    'api_key = os.environ["API_KEY"]', "x-api-key header missing",
    "error: missing required header x-api-key", "password = get_password()",
    "password = os.environ['DB_PASSWORD']", "conn = connect(host=h, user=u, password=pw2)",
    "self.password = password", "password: str", "password: Optional[str] = None",
    "  password: string;", "api_key: str = Field(default=None)",
    "/etc/passwd:root:x:0:0:root:/root:/bin/bash",
    "passwd: password updated successfully", "passwd:         files systemd",
    "Enter password: mysqldump: Got error: 1045: Access denied for user 'root'",
    "mysql: [Warning] Using a password on the command line interface can be insecure.",
    "docker run --name mysql -p3306:3306 -d mysql:8", "mkdir -p /tmp/x && tar -pczf a.tgz x",
    "ssh -p 2222 alice@host", "echo $TOKEN | docker login -u alice --password-stdin",
    "MAX_TOKENS=4096", "MAX_TOKEN=4096", 'EOS_TOKEN = "</s>"', 'MASK_TOKEN = "[MASK]"',
    "tokenizer.pad_token = tokenizer.eos_token",
    '"usage": {"prompt_tokens": 1234, "completion_tokens": 56}',
    '{"token": "Ġthe2", "id": 262, "logprob": -0.0123}',
    '"nextPageToken": "CiAKGjBpNDd2Nmp2Zml2cXRwYjBpOXA"',
    '"NextToken": "eyJ2IjoxLCJjIjoiQUJDIn0AbCd9"',
    "GPG_KEY=A035C8C19219BA821ECEA86B64E628F8D684696D",
    "PYTHON_SHA256=07a4356e912900e61a15cb0949a06c4a05012e213ecd6b4e84d0f67aabbee372",
    "headers['X-Api-Key'] = api_key", "apiKey: process.env.OPENAI_API_KEY!,",
    'SECRET_KEY = env("DJANGO_SECRET_KEY")', "token_secret = settings.S3_SECRET",
    "if password == 'x9':", "password_hash: $2b$12$abcdefghijklmnopqrstuv",
    "ALLOW_EMPTY_PASSWORD=yes", "MYSQL_RANDOM_ROOT_PASSWORD=yes",
    "private_key: ~/.ssh/id_ed25519", "  --password TEXT   The password to log in with.",
    "  -p, --password PASSWORD", "password (str): the user's password",
    "The password: at least 12 characters, one digit.", "Password: Sorry, try again.",
    "sha256:" + "ab" * 32, "commit 9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b",
    "Api-Key authentication is described in the API reference",
]  # fmt: skip


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_near_secret_names_is_kept(text):
    assert Redactor().text(text) == (text, 0)


def test_shapeless_values_the_rules_leave_are_documented_limits():
    """docs/security.md, "What is not caught": a value of letters alone (`password:
    secretpass`, `POSTGRES_PASSWORD=postgres`) reads like a type, a word or a variable
    (`password: SecretStr`), so a value must hold a digit or a symbol."""
    for text in ("password: secretpass", "POSTGRES_PASSWORD=postgres"):
        assert Redactor().text(text)[1] == 0, text


def test_a_key_of_known_shape_keeps_its_own_kind_after_a_name():
    """A value both a named-key rule and a shape rule find is one placeholder, of the
    shape's kind (the shape rules come first)."""
    ghp = "ghp_" + _b62(36, 2)
    out, n = Redactor().text(f"GITHUB_TOKEN={ghp}\nX-Api-Key: {ghp}")
    assert (out, n) == ("GITHUB_TOKEN=<secret:github_token>\nX-Api-Key: <secret:github_token>", 2)


# -- the screen flags every new shape ------------------------------------------------------------
def review_lines() -> list[str]:
    return [t for t, *_ in HEADERS + ASSIGNMENTS + PASSWORDS]


def test_the_screen_flags_every_new_shape_among_random_neighbours():
    assert_screen_flags(review_lines(), ORDINARY + PLACEHOLDERS, seed=6)


def assert_screen_flags(lines: list[str], kept: list[str], seed: int) -> None:
    """The screen may flag more than the detectors find, never less: every line, whole
    and with random text (beyond ASCII too) around it and its neighbours, among `kept`
    lines."""
    red = Redactor()
    assert red.screen is not None and red.screen.utf8
    rng = random.Random(seed)
    for line in lines:
        assert red.text(line)[1] >= 1, line
        assert red.screen.text(line), line
    bits = ["", "x", "a1", " ", "\n", "=", ":", "'", '"', "_", "-", "/", ".", "é", "—", "ſ"]

    def noise() -> str:
        return "".join(rng.choice(bits) for _ in range(rng.randint(0, 3)))

    def mutated(line: str) -> str:  # a character beyond ASCII put in or put over
        at = rng.randrange(len(line) + 1)
        return line[:at] + rng.choice(["é", "\u212a", "ſ", "\u00a0", "中"]) + line[at + 1 :]

    texts = [noise() + rng.choice(lines) + noise() for _ in range(1500)]
    texts += [mutated(rng.choice(lines)) for _ in range(1500)]
    texts += [noise() + rng.choice(kept) + noise() for _ in range(500)]
    batch = pa.RecordBatch.from_pylist([{"s": t, "l": [noise(), t]} for t in texts])
    flags = red.screen.rows(batch).tolist()
    missed = [t for t, f in zip(texts, flags, strict=True) if red.text(t)[1] and not f]
    assert missed == []
    assert all(red.screen.text(t) for t in texts if red.text(t)[1])


def test_pass1_redacts_the_new_shapes_as_redacting_every_record_whole(tmp_path):
    secrets = {s for _, s, *_ in HEADERS + ASSIGNMENTS + PASSWORDS}
    assert_pass1_redacts_as_whole(tmp_path, review_lines(), secrets)


def test_a_config_without_the_builtin_rules_is_unchanged():
    """The new rules are built-in: `builtin: false` leaves detect-secrets alone."""
    red = Redactor(RedactConfig(builtin=False))
    assert red.text(f"password: {PW}\nX-Api-Key: {HEX32}")[1] == 0


# -- recall on random keys, and no run-away search ------------------------------------------------
def test_random_keys_and_passwords_after_their_names_are_redacted():
    """Keys as services issue them (letters and digits, hex) and passwords with a digit
    or a symbol, under each kind of name: every one is found, whole."""
    rng = random.Random(12)
    b62 = B62
    contexts = ["X-Api-Key: {}", "DD_API_KEY={}", "export CI_JOB_TOKEN={}", "JWT_SECRET='{}'",
                "password: {}", "--password {}", "mysql -uroot -p{} app", '{{"password": "{}"}}',
                "PGPASSWORD={} psql", "Ocp-Apim-Subscription-Key: {}"]  # fmt: skip
    missed = []
    for i in range(2000):
        if i % 3 == 0:
            value = "".join(rng.choice(b62) for _ in range(rng.randint(20, 40))) + "7"
        elif i % 3 == 1:
            value = "".join(rng.choice("0123456789abcdef") for _ in range(32))
        else:
            value = rng.choice(b62) + "".join(rng.choice(b62 + "!@#%^*+=") for _ in range(11))
            value += rng.choice("!@#%^*+=")
        text = rng.choice(contexts).format(value)
        out, n = Redactor().text(text)
        if n != 1 or value in out:
            missed.append(text)
    assert missed == []


def test_long_runs_of_names_are_searched_in_bounded_time():
    """Every repeat over a value is bounded: a run holding many names was read again to
    its end from each one (`password=password=...(`, 180 KB in minutes)."""
    import time

    red = Redactor()
    for text in ("password=" * 4000 + "(", "ACCESS_TOKEN=" * 3000 + "(", "x-api-key:" * 4000,
                 "password: " + "AbcDef1" * 6000 + "(", "mysql " * 6000 + "-p",
                 '"password":"' * 4000, "--password " * 4000):  # fmt: skip
        start = time.perf_counter()
        red.text(text)
        assert time.perf_counter() - start < 5, text[:40]


@pytest.mark.parametrize(
    "text",
    [
        "private_key\t= $dir/private/cakey.pem\t# The private key",  # /etc/ssl/openssl.cnf
        'backend: "Backend", private_key: "_EllipticCurvePrivateKey", data: bytes',
        "echo machine git-config-gpg login username password password",  # git's netrc tests
        '__mvncomp "username= message= passphrase= password= scmVersion= $(__mvnlist)"',
        "PASSWORD= ./run.sh && TOKEN= python3 -m app",
    ],
)
def test_what_a_system_s_own_files_hold_near_these_names_is_kept(text):
    """Found scanning /etc, /usr/share/doc and dist-packages (266 MB): a path under a
    variable, a quoted annotation, a placeholder word in a netrc line, `password=` with
    nothing after it in bash completion."""
    assert Redactor().text(text) == (text, 0)


def test_a_format_string_after_a_name_is_kept():
    """`example_secrets`' own contexts (`"aws_secret_key": "AWS_SECRET_ACCESS_KEY={}"`)."""
    for text in ('"aws_session_token": "AWS_SESSION_TOKEN={}",', "API_KEY = 'key-{0}-{name}'"):
        assert Redactor().text(text) == (text, 0)
