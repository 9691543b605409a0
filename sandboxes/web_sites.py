"""Real web sites on loopback for tests, the demo and the benchmark.

- `start_docs_site()`: the Python documentation from Debian's `python3-doc` package (a
  real static site: 500+ pages, a search page, cross links) served by `http.server`.
- `start_datasette(workdir)`: datasette (PyPI), a real web application over a SQLite
  database: tables with sort, facet and filter forms, a SQL form, and a canned write
  query `add_note` (a form that inserts a row) that only the signed-in root user may
  run. `Site.storage_state` is a Playwright storage-state file signed in as root, made
  by following datasette's one-time `--root` login link.

Each site runs as a child process on a free port of 127.0.0.1, found by the server
itself (port 0) and read back from its start-up line; `stop()` ends that process by
its pid. `url, stop = start_docs_site()` unpacks like a pair.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

DOCS_ROOTS = ("/usr/share/doc/python3-doc/html", "/usr/share/doc/python3/html")
"""Where Debian's python3-doc puts the HTML documentation."""
LIBRARY_SQL = """
create table authors (id integer primary key, name text not null, country text);
create table books (id integer primary key, title text not null,
                    author_id integer references authors(id), year integer, genre text);
create table notes (id integer primary key, title text not null, body text,
                    created text default current_timestamp);
insert into authors values (1, 'Ursula K. Le Guin', 'US'), (2, 'Italo Calvino', 'IT'),
  (3, 'Chinua Achebe', 'NG'), (4, 'Wisława Szymborska', 'PL'), (5, 'Jorge Luis Borges', 'AR');
insert into books values
  (1, 'A Wizard of Earthsea', 1, 1968, 'fantasy'), (2, 'The Dispossessed', 1, 1974, 'science fiction'),
  (3, 'The Left Hand of Darkness', 1, 1969, 'science fiction'), (4, 'Invisible Cities', 2, 1972, 'fiction'),
  (5, 'If on a winter''s night a traveler', 2, 1979, 'fiction'), (6, 'Things Fall Apart', 3, 1958, 'fiction'),
  (7, 'Arrow of God', 3, 1964, 'fiction'), (8, 'View with a Grain of Sand', 4, 1995, 'poetry'),
  (9, 'Ficciones', 5, 1944, 'fiction'), (10, 'The Aleph', 5, 1949, 'fiction');
insert into notes (title, body) values ('Reading list', 'Start with Earthsea.');
"""
LIBRARY_METADATA = {
    "title": "Library",
    "description": "Books, authors and reading notes",
    "databases": {
        "library": {
            "queries": {
                "add_note": {
                    "title": "Add a note",
                    "sql": "insert into notes (title, body) values (:title, :body)",
                    "write": True,
                    "allow": {"id": "root"},
                    "on_success_message": "Note saved",
                }
            }
        }
    },
}
_STOPS: list[Callable[[], None]] = []


@dataclass
class Site:
    """A site running on loopback; unpacks as `(url, stop)`."""

    url: str
    """Base URL, ending in `/`."""
    stop: Callable[[], None]
    """Ends the server (by its pid) and removes what it wrote; idempotent."""
    storage_state: str | None = None
    """Playwright storage-state file of a signed-in session (datasette: root)."""
    log: Path | None = None
    """The server's request log."""

    def __iter__(self) -> Iterator:
        return iter((self.url, self.stop))


def docs_root() -> Path:
    for root in DOCS_ROOTS:
        if (Path(root) / "index.html").exists():
            return Path(root)
    raise FileNotFoundError(
        "the Python documentation is not installed: apt-get install python3-doc "
        "(infra/setup.sh installs it)"
    )


def _wait_for(path: Path, pattern: re.Pattern, proc: subprocess.Popen, timeout: float):
    """The first match of `pattern` in the file a child writes, within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        m = pattern.search(path.read_text(errors="replace")) if path.exists() else None
        if m:
            return m
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[:4]} exited ({proc.returncode}): {path.read_text()[-800:]}")  # fmt: skip
        if time.monotonic() > deadline:
            raise TimeoutError(f"{proc.args[:4]} printed no {pattern.pattern!r} in {timeout:g} s")
        time.sleep(0.05)  # polling the child's output file for a condition, with a deadline


def _spawn(cmd: list[str], workdir: Path, owned: bool) -> tuple[subprocess.Popen, Callable[[], None]]:  # fmt: skip
    out, err = open(workdir / "stdout.log", "wb"), open(workdir / "stderr.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=workdir)
    done = []

    def stop() -> None:
        if done:
            return
        done.append(True)
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        out.close()
        err.close()
        if owned:
            shutil.rmtree(workdir, ignore_errors=True)

    _STOPS.append(stop)
    return proc, stop


def _workdir(workdir: str | Path | None, prefix: str) -> tuple[Path, bool]:
    if workdir is None:
        return Path(tempfile.mkdtemp(prefix=prefix)), True
    Path(workdir).mkdir(parents=True, exist_ok=True)
    return Path(workdir), False


def start_docs_site(
    root: str | Path | None = None, workdir: str | Path | None = None, timeout: float = 20.0
) -> Site:
    """Serve a static site (default: the Python docs) with `http.server` on 127.0.0.1."""
    root = Path(root) if root else docs_root()
    wd, owned = _workdir(workdir, "wt-docs-")
    cmd = [sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", str(root)]  # fmt: skip
    proc, stop = _spawn(cmd, wd, owned)
    try:
        m = _wait_for(wd / "stdout.log", re.compile(r"port (\d+)"), proc, timeout)
    except Exception:
        stop()
        raise
    return Site(f"http://127.0.0.1:{m.group(1)}/", stop, log=wd / "stderr.log")


def make_library_db(path: Path) -> None:
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.executescript(LIBRARY_SQL)
        db.commit()


def start_datasette(workdir: str | Path | None = None, timeout: float = 30.0) -> Site:
    """datasette over a fresh library database, with a root session in `storage_state`."""
    wd, owned = _workdir(workdir, "wt-datasette-")
    db = wd / "library.db"
    if not db.exists():
        make_library_db(db)
    (wd / "metadata.json").write_text(json.dumps(LIBRARY_METADATA))
    cmd = [sys.executable, "-m", "datasette", "serve", str(db), "--host", "127.0.0.1", "-p", "0",
           "--root", "--metadata", str(wd / "metadata.json"), "--setting", "default_page_size", "20"]  # fmt: skip
    proc, stop = _spawn(cmd, wd, owned)
    try:
        port = _wait_for(wd / "stderr.log", re.compile(r"running on http://127\.0\.0\.1:(\d+)"), proc, timeout)  # fmt: skip
        token = _wait_for(wd / "stdout.log", re.compile(r"/-/auth-token\?token=(\w+)"), proc, 5)
        url = f"http://127.0.0.1:{port.group(1)}/"
        state = wd / "root-storage-state.json"
        state.write_text(json.dumps(_login(url, token.group(1))))
    except Exception:
        stop()
        raise
    return Site(url, stop, storage_state=str(state), log=wd / "stderr.log")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def _login(url: str, token: str) -> dict:
    """Follow the one-time root link; the `ds_actor` cookie it sets as a storage state."""
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        resp = opener.open(f"{url}-/auth-token?token={token}", timeout=10)
    except urllib.error.HTTPError as exc:  # the 302 to the home page carries the cookie
        resp = exc
    cookies = []
    for header in resp.headers.get_all("Set-Cookie") or []:
        name, _, rest = header.partition("=")
        value = rest.split(";", 1)[0]
        cookies.append({"name": name, "value": value, "domain": "127.0.0.1", "path": "/",
                        "expires": -1, "httpOnly": False, "secure": False, "sameSite": "Lax"})  # fmt: skip
    if not any(c["name"] == "ds_actor" for c in cookies):
        raise RuntimeError(f"datasette's root login set no ds_actor cookie ({resp.status})")
    return {"cookies": cookies, "origins": []}


@atexit.register
def stop_all() -> None:
    """Stop every site this process started (tests stop theirs earlier)."""
    while _STOPS:
        _STOPS.pop()()


def demo_jobs(docs: Site, library: Site, episodes: int = 2, max_turns: int = 10) -> list[dict]:
    """Job dicts collecting explorer episodes from both sites (`JobSpec.from_dict`)."""
    return [
        {
            "name": "web-docs",
            "sandbox": {"kind": "web", "start_url": docs.url + "index.html"},
            "policy": {"kind": "explorer", "max_depth": 3},
            "episodes": episodes,
            "max_turns": max_turns,
            "seed": 11,
            "tasks": [
                {"id": "docs-home", "instruction": "Browse the Python documentation."},
                {"id": "docs-json", "instruction": "Find how to pretty-print JSON.",
                 "url": docs.url + "library/json.html"},
            ],
        },
        {
            "name": "web-datasette",
            "sandbox": {"kind": "web", "start_url": library.url,
                        "storage_state": library.storage_state},
            "policy": {"kind": "explorer", "max_depth": 2, "form_probability": 0.5},
            "episodes": episodes,
            "max_turns": max_turns,
            "seed": 3,
            "tasks": [
                {"id": "library-browse", "instruction": "Explore the library database."},
                {"id": "library-note", "instruction": "Add a reading note.",
                 "url": library.url + "library/add_note"},
            ],
        },
    ]  # fmt: skip
