"""Found (an ML engineer's query session, 2026-12-04 evening): `query --shell` fed from
a pipe dropped a last statement without `;`, printed errors on stdout and exited 0, and
ended a statement at a `;` inside a string or a `--` comment; `query "A; B"` ran both
and showed B's rows only, saying nothing of A's. Real parts: the installed CLI."""

from __future__ import annotations

import json

from .test_query import full_store, wt  # noqa: F401  (the fixture)


def shell(full_store, wt_env, text):  # noqa: F811
    return wt(dict(wt_env, WORLDTRACE_STORE=str(full_store.root)), "query", "--shell", input=text)


def test_a_piped_shell_runs_the_last_statement_and_fails_on_errors(full_store, wt_env):  # noqa: F811
    r = shell(full_store, wt_env, "SELECT 40 + 2 AS answer")  # no `;`: the input's end ends it
    assert r.returncode == 0, r.stderr
    assert "answer" in r.stdout and "42" in r.stdout
    r = shell(full_store, wt_env, "SELEC 1;\nSELECT 7 AS after;\n")
    assert r.returncode == 1
    assert "error: Parser Error" in r.stderr and "error" not in r.stdout
    assert "after" in r.stdout  # the shell went on


def test_a_semicolon_in_a_string_or_a_comment_ends_no_statement(full_store, wt_env):  # noqa: F811
    text = "SELECT 'a;\nb' AS s;\nSELECT 1 AS one -- c;\n, 2 AS two;\nSELECT 3 AS three; SELECT 4 AS four;\n"
    r = shell(full_store, wt_env, text)
    assert r.returncode == 0, r.stderr
    assert "a;" in r.stdout and "one" in r.stdout and "two" in r.stdout
    assert "three" in r.stdout and "four" in r.stdout  # two on one line: each shown


def test_a_query_of_several_statements_says_which_rows_it_does_not_show(full_store, wt_env):  # noqa: F811
    env = dict(wt_env, WORLDTRACE_STORE=str(full_store.root))
    r = wt(env, "query", "SELECT 1 AS a; SELECT 2 AS b", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [{"b": 2}]
    assert "warning: statement 1 of 2 returns rows that are not shown" in r.stderr
    r = wt(env, "query", "DESCRIBE clusters; SELECT 2 AS b", "--format", "json")
    assert json.loads(r.stdout) == [{"b": 2}] and "statement 1 of 2" in r.stderr
    r = wt(env, "query", "SELECT 2 AS b;", "--format", "json")  # one statement: nothing said
    assert json.loads(r.stdout) == [{"b": 2}] and "warning" not in r.stderr
