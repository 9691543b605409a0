from __future__ import annotations

import json

from worldtrace.collectors.synthetic import build, tool
from worldtrace.pipelines.filters import FilterConfig, apply_filters
from worldtrace.schemas import Action, Observation

CFG = FilterConfig()


def run(t, cfg=CFG):
    return apply_filters(t.to_dict(), cfg)


def gui(text, url="http://127.0.0.1/a", status=200):
    return Observation(text, state_json=json.dumps({"url": url, "title": "t", "status": status}))


def test_min_turns():
    out, _, reason = run(build("terminal", [("ls\n", "a")]))
    assert out is None and reason == "min_turns"
    out, _, reason = run(build("terminal", [("ls\n", "a")]), FilterConfig(min_turns=1))
    assert out is not None and reason is None


def test_undeclared_tool_in_tool_domains_only():
    pairs = [(tool("read", path="a"), "x"), (tool("rm_rf", path="/"), "y")]
    _, _, reason = run(build("swe", pairs, action_space=["read", "edit"]))
    assert reason == "undeclared_tool:rm_rf"
    out, _, _ = run(build("swe", pairs, action_space=["read", "rm_rf"]))
    assert out is not None
    out, _, _ = run(build("swe", pairs))  # no declared space: nothing to check
    assert out is not None
    _, _, reason = run(
        build("swe", pairs, action_space=["read"]), FilterConfig(undeclared_tools=False)
    )
    assert reason is None


def test_openai_style_action_space_is_understood():
    t = build("mcp", [(tool("get_time"), "1"), (tool("get_time"), "2")])
    t.system.action_space = json.dumps([{"type": "function", "function": {"name": "get_time"}}])
    assert run(t)[2] is None


def test_gui_env_failures():
    a = Action("gui", "click [1]")
    ok = [(a, gui("page one")), (Action("gui", "click [2]"), gui("page two"))]
    assert run(build("web", ok))[2] is None
    missing = [(a, Observation("page")), ok[1]]
    assert run(build("web", missing))[2] == "gui_env_failure:missing_state"
    captcha = [(a, gui("Please verify you are human")), ok[1]]
    assert run(build("web", captcha))[2] == "gui_env_failure:captcha"
    http = [(a, gui("nginx", status=503)), ok[1]]
    assert run(build("web", http))[2] == "gui_env_failure:http_error"
    http_text = [(a, gui("HTTP ERROR 404")), ok[1]]
    assert run(build("web", http_text))[2] == "gui_env_failure:http_error"
    # a terminal is not a GUI: no state needed
    assert run(build("terminal", [("a\n", "b"), ("c\n", "d")]))[2] is None


def test_empty_actions_are_stripped_and_reindexed():
    t = build("terminal", [("ls\n", "a"), ("  \n", "prompt"), ("pwd\n", "/")])
    out, removed, _ = run(t)
    assert [x["action"]["text"] for x in out["turns"]] == ["ls\n", "pwd\n"]
    assert [x["index"] for x in out["turns"]] == [0, 1]
    assert [(r[0]["index"], r[1]) for r in removed] == [(1, "empty_action")]


def test_retry_cycle_skips_failed_pair_keeps_chain():
    err = Observation("bash: pyhton: command not found", exit_code=127)
    t = build(
        "terminal",
        [("cd repo\n", ""), ("pyhton run.py\n", err), ("python run.py\n", "ok"), ("ls\n", "a b")],
    )
    out, removed, _ = run(t)
    assert [x["action"]["text"] for x in out["turns"]] == ["cd repo\n", "python run.py\n", "ls\n"]
    assert [r[1] for r in removed] == ["retry_cycle"]


def test_error_not_retried_is_kept():
    err = Observation("No such file", exit_code=1)
    t = build("terminal", [("cat missing.txt\n", err), ("ls -la /tmp\n", "x")])
    out, removed, _ = run(t)
    assert len(out["turns"]) == 2 and removed == []


def test_retry_of_same_tool():
    bad = Observation("error: invalid arguments", is_error=True)
    t = build(
        "swe",
        [
            (tool("edit", path="a", old=1), bad),
            (tool("edit", path="a", old="x"), "diff"),
            (tool("read", path="a"), "1"),
        ],
    )
    out, removed, _ = run(t)
    assert [x["action"]["name"] for x in out["turns"]] == ["edit", "read"]
    assert removed[0][1] == "retry_cycle"
    out, removed, _ = run(t, FilterConfig(retry_cycles=False))
    assert len(out["turns"]) == 3


def test_gui_no_change():
    a = Action("gui", "scroll")
    t = build(
        "web",
        [
            (Action("gui", "open"), gui("tree")),
            (a, gui("tree")),
            (Action("gui", "click"), gui("tree2")),
        ],
    )
    out, removed, _ = run(t)
    assert [x["action"]["text"] for x in out["turns"]] == ["open", "click"]
    assert removed[0][1] == "gui_no_change"
    out, _, _ = run(t, FilterConfig(gui_no_change=False))
    assert len(out["turns"]) == 3


def test_a_different_command_after_a_failed_bash_is_not_a_retry():
    """Found: any failed `bash` followed by any `bash` was dropped as a retry."""
    missing = Observation("cat: missing.txt: No such file or directory", exit_code=1)
    t = build(
        "swe",
        [
            (tool("bash", command="cat missing.txt"), missing),
            (tool("bash", command="ls -la /tmp"), "a b"),
            (tool("bash", command="pyhton run.py"), Observation("not found", exit_code=127)),
            (tool("bash", command="python run.py"), "ok"),
        ],
    )
    out, removed, _ = run(t)
    commands = [json.loads(x["action"]["arguments_json"])["command"] for x in out["turns"]]
    assert commands == ["cat missing.txt", "ls -la /tmp", "python run.py"]
    assert [(r[0]["index"], r[1]) for r in removed] == [(2, "retry_cycle")]


def test_identical_repeated_error_without_flags_is_a_retry_cycle():
    """Imported logs carry no error flags: the same answer to a repeated action is found
    by content; different answers to different actions stay."""
    err = "bash: pyhton: command not found"
    t = build(
        "terminal",
        [("pyhton run.py\n", err), ("pyhton run.py\n", err), ("python run.py\n", "ok")],
    )
    t.source.kind = "import"
    out, removed, _ = run(t)
    assert [x["action"]["text"] for x in out["turns"]] == ["pyhton run.py\n", "python run.py\n"]
    assert [r[1] for r in removed] == ["retry_cycle"]
    moved_on = build("terminal", [("ls\n", "a b"), ("cat a\n", "x"), ("cat b\n", "y")])
    assert run(moved_on)[1] == []


def test_error_page_checks_answer_as_their_regexes_do():
    """The literals looked for first never turn away a text the regex would match."""
    from worldtrace.pipelines.filters import HTTP_ERROR_RE, shows_http_error
    from worldtrace.schemas.pages import CAPTCHA_RE, shows_captcha

    texts = [
        "Please complete the reCAPTCHA", "VERIFY YOU ARE HUMAN", "Are you a ROBOT?",
        "hcaptcha-box", "captchas", "a CAPTCHA ıs here", "İ: captcha", "verify you are humans",
        "İ: solve the CAPTCHA", "ı’m not a robot", "I’m not a robot",
        "HTTP 404", "HTTP ERROR 503", "error 500 Internal Server Error", "503 Service Unavailable",
        "ERR_NAME_NOT_RESOLVED", "net::ERR_", "HTTP 200", "404 not found", "4040 Not Found",
        "status 502 Bad Gateway!", "a docs page about HTTP", "", "plain text, nothing here",
    ]  # fmt: skip
    captcha = [shows_captcha(t) for t in texts]
    assert captcha == [CAPTCHA_RE.search(t) is not None for t in texts]
    http = [shows_http_error(t) for t in texts]
    assert http == [HTTP_ERROR_RE.search(t) is not None for t in texts]
    assert sum(captcha) == 6 and sum(http) == 6  # a mention is no wall (pages.CAPTCHA_RE)


def test_a_collected_success_repeated_is_no_retry_cycle():
    """Found: collected MCP/web turns carry `is_error` but no exit code, and were taken for
    an unflagged log: a search repeated with the same answer, or a scroll and a scroll
    back, was dropped as `retry_cycle` though every turn succeeded."""
    page = "Results 1-10 of 16 for 'rebase'"
    t = build("search", [(tool("search", q="rebase"), page), (tool("search", q="rebase"), page),
                         (tool("fetch", url="http://127.0.0.1/a"), "text")])  # fmt: skip
    out, removed, _ = run(t)
    assert removed == [] and len(out["turns"]) == 3
    scroll = gui("same view")
    w = build("web", [(Action("gui", "scroll dy=600"), scroll),
                      (Action("gui", "scroll dy=-300"), scroll), (Action("gui", "click [3]"), gui("b"))])  # fmt: skip
    _, removed, _ = run(w, FilterConfig(gui_no_change=False))
    assert removed == []


def test_an_unflagged_log_still_has_its_repeated_error_recognised_by_content():
    """An imported log without any flag: the same answer to a retried call is a failure
    recognised by its text; once the log carries a flag anywhere, only flags count."""
    err = "Error: file not found"
    pairs = [(tool("read", path="a.txt"), err), (tool("read", path="a.txt"), err),
             (tool("read", path="b.txt"), "contents")]  # fmt: skip
    t = build("mcp", pairs)
    t.source.kind = "import"
    out, removed, _ = run(t)
    assert [r[1] for r in removed] == ["retry_cycle"] and len(out["turns"]) == 2
    t.turns[2].observation.exit_code = 0  # the format has flags: the first two succeeded
    _, removed, _ = run(t)
    assert removed == []
