"""The web sandbox's origin boundary holds where Playwright's route handler is never asked:
a redirect's next hop (route is not called for redirects), a WebSocket, a preconnect.

Two loopback servers: the allowed one redirects `/redir?<case>` (302; `/redir307`, 307)
to the other, which counts every connection it accepts and every request it reads. The
other server must see nothing, whatever the page does."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from worldtrace.collectors.actions import tool
from worldtrace.sandboxes.base import SandboxError, TaskSpec
from worldtrace.sandboxes.web import WebConfig, WebSandbox, WebTask
from worldtrace.sandboxes.web_browser import refused
from worldtrace.sandboxes.web_explorer import parse_tree
from worldtrace.sandboxes.web_spec import proxy_bypass
from worldtrace.schemas.parsing import parse

from ..conftest import serving, wait_until

pytestmark = pytest.mark.browser


class Counted(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, handler):
        super().__init__(("127.0.0.1", 0), handler)
        self.connections = 0
        self.paths: list[str] = []

    def process_request(self, request, client_address):
        self.connections += 1
        super().process_request(request, client_address)


def pages(other: str) -> dict[str, str]:
    port = other.rsplit(":", 1)[1]
    return {
        "/link": '<title>Link</title><a href="/redir?link">away</a>',
        "/js": """<title>Script</title><button onclick="location.href='/redir?js'">go</button>""",
        "/form": '<title>Form</title><form method="post" action="/redir307?form"><button>send</button></form>',
        "/sub": """<title>Sub</title><img src="/redir?img" alt="pixel"><script src="/redir?script"></script>
<p id="f">fetching</p><script>fetch("/redir?fetch").then(() => "answered", () => "failed")
.then((t) => { document.getElementById("f").textContent = t; });</script>""",
        "/iframe": '<title>Frame</title><iframe src="/redir?iframe"></iframe>',
        "/popup": """<title>Popup</title><button onclick="window.open('/redir?popup')">pop</button>""",
        "/ws": f"""<title>Sockets</title><script>
new WebSocket("ws://127.0.0.1:{port}/outside");
new WebSocket("ws://" + location.host + "/inside");</script>""",
        "/preconnect": f'<title>Pre</title><link rel="preconnect" href="{other}"><p>hi</p>',
    }  # fmt: skip


@pytest.fixture(scope="module")
def sites():
    """(allowed URL, allowed server, other URL, other server)."""

    class Other(BaseHTTPRequestHandler):
        def do_GET(self):
            self.server.paths.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<title>Outside</title><p>outside</p>")

        do_POST = do_GET

        def log_message(self, *args):
            pass

    other = Counted(Other)

    class Allowed(BaseHTTPRequestHandler):
        def do_GET(self):
            self.server.paths.append(self.path)
            path, _, query = self.path.partition("?")
            if path in ("/redir", "/redir307"):
                self.send_response(302 if path == "/redir" else 307)
                self.send_header("Location", f"{other_url}/x?{query}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = pages(other_url).get(path, "<title>Home</title><p>home</p>").encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.do_GET()

        def log_message(self, *args):
            pass

    allowed = Counted(Allowed)
    with serving(other) as other_url, serving(allowed) as allowed_url:
        yield allowed_url, allowed, other_url, other


@pytest.fixture
def sb():
    sandbox = WebSandbox(parse(WebConfig, {}))
    yield sandbox
    sandbox.close()


def start(sb: WebSandbox, url: str):
    return sb.reset(TaskSpec("t", params=WebTask(url=url)))


def state(obs) -> dict:
    return json.loads(obs.state_json)


def bid(obs, role: str, name: str) -> str:
    [e] = [e for e in parse_tree(obs.text) if e.role == role and e.name == name]
    return e.bid


@pytest.fixture
def untouched(sites):
    """The other server's counts, checked to be unchanged when the test ends."""
    other = sites[3]
    before = (other.connections, len(other.paths))
    yield
    threading.Event().wait(0.2)  # a request the browser would still send: let it arrive
    assert (other.connections, other.paths[before[1] :]) == (before[0], [])


def test_a_start_page_redirecting_outside_fails_the_attempt(sb, sites, untouched):
    allowed, _, other, _ = sites
    with pytest.raises(SandboxError, match="redirected outside the allowed origins"):
        start(sb, allowed + "/redir?reset")
    assert sb.blocked == [other + "/x?reset"]


@pytest.mark.parametrize(
    ("page", "role", "name", "case"),
    [
        ("/link", "link", "away", "link"),
        ("/js", "button", "go", "js"),
        ("/form", "button", "send", "form"),  # a 307 keeps the POST and its body
        ("/popup", "button", "pop", "popup"),
    ],
)
def test_a_navigation_redirected_outside_is_blocked_and_the_tab_stays(
    sb, sites, untouched, page, role, name, case
):
    allowed, _, other, _ = sites
    obs = start(sb, allowed + page)
    away = sb.step(tool("click", bid=bid(obs, role, name)))
    st = state(away)
    assert st["blocked"] == [f"{other}/x?{case}"]
    assert away.is_error and f"navigation to {other}/x?{case} was blocked" in away.text
    assert st["url"] == allowed + page and len(st["tabs"]) == 1  # as a direct one: stays
    assert away.env_failure is None


def test_a_new_tab_sent_outside_by_a_redirect_stays_blank(sb, sites, untouched):
    allowed, _, other, _ = sites
    start(sb, allowed + "/link")
    sb.step(tool("new_tab"))
    away = sb.step(tool("goto", url=allowed + "/redir?tab"))
    st = state(away)
    assert st["blocked"] == [other + "/x?tab"] and "was blocked" in away.text
    assert st["url"] == "about:blank" and st["active_tab"] == 1


def test_subresources_and_frames_redirected_outside_are_blocked(sb, sites, untouched):
    allowed, _, other, _ = sites
    sub = start(sb, allowed + "/sub")
    assert sorted(state(sub)["blocked"]) == [other + "/x?" + c for c in ("fetch", "img", "script")]
    assert "StaticText 'failed'" in sub.text and not sub.is_error
    framed = start(sb, allowed + "/iframe")
    assert state(framed)["blocked"] == [other + "/x?iframe"]
    assert state(framed)["url"] == allowed + "/iframe" and not framed.is_error


def test_a_websocket_reaches_only_the_allowed_origin(sb, sites, untouched):
    allowed, allowed_server, other, _ = sites
    obs = start(sb, allowed + "/ws")
    # the upgrade request gets there (and fails); the page does not wait for it, so under
    # load it may arrive after the observation
    wait_until(lambda: "/inside" in allowed_server.paths, what="the WebSocket inside")
    # through the proxy a WebSocket is a CONNECT: its host and port are all it shows
    assert state(obs)["blocked"] == [other.replace("http://", "https://")]


def test_a_preconnect_outside_opens_no_connection(sb, sites, untouched):
    allowed, *_ = sites
    obs = start(sb, allowed + "/preconnect")
    assert "hi" in obs.text


def test_the_bypass_list_names_each_allowed_origin_with_its_port():
    got = proxy_bypass(("http://127.0.0.1:8000", "https://example.com", "http://[::1]:81"))
    assert got.split(",") == [
        "<-loopback>",
        "http://127.0.0.1:8000",
        "ws://127.0.0.1:8000",
        "https://example.com:443",
        "wss://example.com:443",
        "http://[::1]:81",
        "ws://[::1]:81",
    ]


def test_what_the_proxy_refused_is_read_from_the_request_head():
    def head(*lines: str) -> bytes:
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    nav = head("GET http://127.0.0.1:9/x?a HTTP/1.1", "Sec-Fetch-Dest: document")
    assert refused(nav) == ("http://127.0.0.1:9/x?a", True)
    img = head("GET http://127.0.0.1:9/p.png HTTP/1.1", "Sec-Fetch-Dest: image")
    assert refused(img) == ("http://127.0.0.1:9/p.png", False)
    plain = head("GET http://example.com/ HTTP/1.1", "Upgrade-Insecure-Requests: 1")
    assert refused(plain) == ("http://example.com/", True)
    ws = head("GET http://127.0.0.1:9/s HTTP/1.1", "Upgrade: websocket", "Connection: Upgrade")
    assert refused(ws) == ("ws://127.0.0.1:9/s", False)
    assert refused(head("CONNECT example.com:443 HTTP/1.1")) == ("https://example.com:443", False)
