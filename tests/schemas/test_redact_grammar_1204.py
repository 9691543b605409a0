"""Passwords with no name before them, where a command's grammar says what they are
(2026-12-04): curl's `-u user:X`, a registry login's `-p X`, openssl's `pass:X`, SQL's
`IDENTIFIED BY 'X'` and PostgreSQL's `PASSWORD 'X'`. docs/security.md listed them under
"What is not caught"; each is redacted now (only the value), and what is not a password
there (a variable, a prompt, `--password-stdin`, `env:NAME`, `PASSWORD NULL`) stays."""

from __future__ import annotations

import json

import pytest
from worldtrace.schemas.redact import Redactor

from .test_redact_review_1203c import assert_pass1_redacts_as_whole
from .test_redact_review_1203d import assert_screen_flags, redacted

PW = "Hunter2pass"
GRAMMAR = [
    (f"curl -u alice:{PW} https://api.example.com/v1/items", PW),
    (f"curl -s --user alice:{PW} http://127.0.0.1:8080/", PW),
    (f"curl --user=ci@example.com:{PW} https://x.example/", PW),
    (f"curl -x http://proxy:3128 -U me:{PW} https://x.example/", PW),
    (f"curl --proxy-user me:{PW} https://x.example/", PW),
    ("curl -u 'deploy:Xk9#mm2' http://h/", "Xk9#mm2"),
    ("curl -fsSL -u admin:letmein http://127.0.0.1:9200/_cat/indices", "letmein"),
    (json.dumps({"cmd": f'curl -u "alice:{PW}" http://h/'}), PW),  # inside a JSON string
    (f"docker login -u bob -p {PW} registry.example.com", PW),
    ("docker login registry.example.com -u bob -p hunter", "hunter"),
    (f"podman login -p {PW} -u bob quay.io", PW),
    (f"helm registry login -u bob --password {PW} ghcr.io", PW),
    (f"openssl rsa -in key.pem -passin pass:{PW} -out plain.pem", PW),
    ("openssl enc -aes-256-cbc -pass pass:abcdef -in f -out f.enc", "abcdef"),
    (f"openssl pkcs12 -export -passout 'pass:{PW}' -out x.p12", PW),
    ("CREATE USER 'app'@'%' IDENTIFIED BY 'Str0ngPass!';", "Str0ngPass!"),
    ("ALTER USER root@localhost identified by 'rootpw';", "rootpw"),
    ("create user bob@localhost identified by 'lower9';", "lower9"),
    ("alter user bob identified by 'lower8';", "lower8"),
    ("CREATE USER u IDENTIFIED WITH mysql_native_password BY 'native9';", "native9"),
    ('SET PASSWORD FOR u = PASSWORD("x"); CREATE USER v IDENTIFIED BY "dqpass";', "dqpass"),
    ("CREATE ROLE app WITH LOGIN PASSWORD 'apppass';", "apppass"),
    ("ALTER USER postgres WITH ENCRYPTED PASSWORD 'pgsecret';", "pgsecret"),
    ("psql -c \"ALTER USER postgres PASSWORD 'pgpass';\"", "pgpass"),
]


@pytest.mark.parametrize(("text", "secret"), GRAMMAR)
def test_passwords_a_command_s_grammar_names_are_redacted(text, secret):
    """Found: each was kept as the agent typed it (docs/security.md listed them)."""
    redacted(text, secret, "password")


KEPT = [
    'curl -u "$USER:$PASS" http://h/', "curl -u alice: http://h/", "curl -u alice http://h/",
    'curl -u "${GH_USER}:${GH_TOKEN}" https://api.github.com/user',
    "curl --user-agent 'Mozilla/5.0 (X11; Linux x86_64)' http://h/",
    "curl -X POST http://127.0.0.1:8000/login -d user=alice",
    "curl -u user:password http://h/",
    "echo \"$PW\" | docker login -u bob --password-stdin ghcr.io",
    "docker run -p 8080:80 nginx", "docker login ghcr.io", "docker login -p \"$(cat pw)\" r",
    "openssl rsa -passin env:KEYPASS -in k", "openssl rsa -passin file:/run/pw -in k",
    "openssl enc -pass stdin -in f", "openssl req -passout pass:$KEYPASS -new",
    "ALTER USER postgres PASSWORD NULL;", "SELECT usename, passwd FROM pg_shadow;",
    'cur.execute("ALTER USER %s PASSWORD %s", (user, pw))',
    "CREATE USER 'app'@'%' IDENTIFIED BY '{}'", "ALTER USER app IDENTIFIED BY '$APP_PW'",
    "  -u, --user <user:password>  Server user and password",
    'messages of commits identified by "fixup" commands, unless "fixup -c"',
    "Load and return a dynamic library identified by 'name'.",
]  # fmt: skip


@pytest.mark.parametrize("text", KEPT)
def test_what_is_no_password_in_those_commands_stays(text):
    assert Redactor().text(text) == (text, 0)


def test_the_screen_flags_every_grammar_shape_among_random_neighbours():
    assert_screen_flags([t for t, _ in GRAMMAR], KEPT, seed=7)


def test_pass1_redacts_the_grammar_shapes_as_redacting_every_record_whole(tmp_path):
    assert_pass1_redacts_as_whole(tmp_path, [t for t, _ in GRAMMAR], {s for _, s in GRAMMAR})
