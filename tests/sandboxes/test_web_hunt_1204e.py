"""Web defects a user hit (hunt 1204e): a page holding a lone UTF-16 surrogate (a JS
string cut inside an emoji) crashed the whole `collect` run; configuration mistakes no
retry can mend (no Chromium at `browser.executable`, a start page outside
`allowed_origins`, none at all, a host name with `resolve_hosts` off, an unsafe port,
an unreadable storage-state file) were retried as if the site were down; a page title
or a dialog's message made an observation far longer than `max_chars`; a navigation a
page's `beforeunload` kept from happening was classed a failed navigation
(`navigation_failed`: the trajectory dropped as an environment failure).

One loopback server of small pages (`PAGES`)."""

from __future__ import annotations

import socket

import pytest
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.schemas.actions import tool
from worldtrace.schemas.parsing import ConfigError

from ..conftest import serving_pages
from .test_web_origins import start, state

pytestmark = pytest.mark.browser
EMOJI_CUT = "'ok \\ud83d\\ude00'.slice(0, 4)"  # JS: "ok " and the emoji's first half
PAGES = {
    "/home": "<html><head><title>Home</title></head><body><p>home</p></body></html>",
    "/surrogate": f"""<html><head><title>Cut</title></head><body><p id="p">x</p>
<input aria-label="q"><script>
document.getElementById("p").textContent = {EMOJI_CUT} + " and \\udc00 alone";
document.title = "T " + {EMOJI_CUT};
</script></body></html>""",
    "/bigtitle": """<html><head><title>Big</title></head><body><p>small page</p><script>
document.title = "t".repeat(300000);
</script></body></html>""",
    "/bigalert": """<html><head><title>Alert</title></head><body><p>small page</p><script>
alert("m".repeat(300000));
</script></body></html>""",
    "/stay": """<html><head><title>Stay</title></head><body><a href="/home">leave</a><script>
window.addEventListener("beforeunload", (e) => { e.preventDefault(); e.returnValue = ""; });
</script></body></html>""",
}  # fmt: skip


@pytest.fixture(scope="module")
def site():
    with serving_pages(PAGES) as url:
        yield url


def job(sandbox: dict, actions: list[dict], retries: int = 2, **task) -> dict:
    return {
        "name": "hunt", "sandbox": {"kind": "web", **sandbox}, "policy": "scripted",
        "retries": retries,
        "tasks": [{"id": "t", "instruction": "x", "actions": actions, **task}],
    }  # fmt: skip


def test_a_lone_surrogate_on_the_page_is_recorded_as_the_browser_shows_it(make, site, store):
    """Chromium draws a lone surrogate as U+FFFD; the sandbox handed a title's on as is,
    and the recorder's hashing (UTF-8) raised: `collect` died with a traceback
    (JournalError). The tree prints names with repr(), as BrowserGym: escaped there."""
    sb = make()
    start(sb, f"{site}/home")
    obs = sb.step(tool("goto", url=f"{site}/surrogate"))
    obs.text.encode("utf-8")  # raised UnicodeEncodeError before
    obs.state_json.encode("utf-8")
    assert "StaticText 'ok \\ud83d and \\udc00 alone'" in obs.text  # the tree: BrowserGym's repr
    assert state(obs)["title"] == "T ok \ufffd"
    fill = {"tool": "fill", "arguments": {"bid": "5", "text": "q"}}
    result = run_job(JobSpec.from_dict(job({"start_url": f"{site}/surrogate"}, [fill])), store.raw)
    (t,) = result.trajectories
    assert (t.outcome.status, result.failed_attempts, len(t.turns)) == ("success", 0, 1)
    assert "Title: T ok \ufffd" in t.system.initial_state
    assert "Title: T ok \ufffd" in t.turns[0].observation.text


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    ("sandbox", "task", "reason"),
    [
        (
            {"browser": {"executable": "/nonexistent/chromium"}},
            {},
            "no Chromium at /nonexistent/chromium (browser.executable)",
        ),
        (
            {"allowed_origins": ["http://127.0.0.1:9"]},
            {},
            "start page {site}/home is outside the allowed origins (http://127.0.0.1:9)",
        ),
        (
            {"start_url": ""},
            {},
            "no start page: set the sandbox's start_url or the task's url",
        ),
        (
            {},
            {"url": "http://docs.internal.test:8000/index.html"},
            "start page http://docs.internal.test:8000/index.html cannot load: "
            "this browser resolves no host name (browser.resolve_hosts is off)",
        ),
        (
            {},
            {"url": "http://127.0.0.1:6000/index.html"},
            "start page http://127.0.0.1:6000/index.html cannot load: "
            "net::ERR_UNSAFE_PORT (Chromium never loads this port)",
        ),
    ],
    ids=["executable", "outside", "no-start-page", "host-name", "unsafe-port"],
)
def test_a_configuration_mistake_fails_once_and_is_not_retried(site, store, sandbox, task, reason):
    """Each of these failed every attempt alike (retried `retries` times, as if the site
    were down): SandboxConfigError says no retry mends it."""
    config = {"start_url": f"{site}/home", **sandbox}
    result = run_job(JobSpec.from_dict(job(config, [{"tool": "noop"}], **task)), store.raw)
    assert [t.outcome.error for t in result.trajectories] == ["SandboxConfigError: " + reason.format(site=site)]  # fmt: skip
    (t,) = result.trajectories
    assert result.failed_attempts == 1  # was 3: retries 2
    assert t.outcome.status == "error" and len(t.turns) == 0
    assert t.outcome.error == "SandboxConfigError: " + reason.format(site=site)


def test_a_site_that_is_down_is_still_retried(store):
    url = f"http://127.0.0.1:{_closed_port()}/index.html"
    result = run_job(JobSpec.from_dict(job({"start_url": url}, [{"tool": "noop"}], retries=1)), store.raw)  # fmt: skip
    assert result.failed_attempts == 2
    assert all(t.outcome.error.startswith("SandboxError: ") for t in result.trajectories)


def test_an_unreadable_storage_state_is_a_clear_error_of_the_job_file(tmp_path, site):
    bad = tmp_path / "state.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match=r"storage_state: .*state\.json is not a Playwright storage-state file"):  # fmt: skip
        JobSpec.from_dict(
            job({"start_url": f"{site}/home", "storage_state": str(bad)}, [{"tool": "noop"}])
        )
    bad.write_text('{"cookies": {"name": "a"}}')
    with pytest.raises(ConfigError, match=r"storage_state: .*'cookies' is not a list"):
        JobSpec.from_dict(
            job({"start_url": f"{site}/home", "storage_state": str(bad)}, [{"tool": "noop"}])
        )


def test_a_huge_title_or_dialog_keeps_the_observation_within_max_chars(make, site):
    """A 300,000-character title showed whole in the tab list and the state (twice), with
    `max_chars: 5000`; an alert's message too."""
    sb = make(max_chars=5000)
    obs = start(sb, f"{site}/bigtitle")
    assert len(obs.text) < 5000 + 2 * 2100 and obs.truncated
    assert len(obs.state_json) < 5000 + 3 * 2100
    assert state(obs)["title"].startswith("tttt") and state(obs)["title"].endswith("…")
    obs = sb.step(tool("goto", url=f"{site}/bigalert"))
    assert len(obs.text) < 5000 + 3 * 2100 and obs.truncated
    (dialog,) = state(obs)["dialogs"]
    assert dialog["type"] == "alert" and dialog["message"].startswith("mmm") and len(dialog["message"]) <= 2000  # fmt: skip


def test_a_navigation_beforeunload_kept_is_no_failed_navigation(make, site):
    """The page asked to stay and the dialog was dismissed (the page stays, as for a user
    who answers "Stay"): the page's answer, with Playwright's `net::ERR_ABORTED`, not
    `navigation_failed` (which drops the trajectory as an environment failure)."""
    sb = make()
    start(sb, f"{site}/stay")
    sb.step(tool("click", bid="4"))  # the click that gives the page its user activation
    obs = sb.step(tool("goto", url=f"{site}/home"))
    got = state(obs)
    assert got["url"] == f"{site}/stay" and [d["type"] for d in got["dialogs"]] == ["beforeunload"]
    assert obs.env_failure is None  # was navigation_failed
    assert obs.is_error and "net::ERR_ABORTED" in got["last_action_error"]  # Playwright's words
    assert "refused" not in got  # the page's answer, not our limit
