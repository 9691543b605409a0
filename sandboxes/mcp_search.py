"""A search MCP server over an offline HTML corpus: the search domain's environment.

    python -m worldtrace.sandboxes.mcp_search --corpus /usr/share/doc/git-doc
    python -m worldtrace.sandboxes.mcp_search --corpus DIR --transport http --port 8123

Tools (both read-only): `search(query, page=1)` answers ten ranked results per page, each
with its title, URL and a snippet with the matched words in [brackets]; `fetch(url,
start=0)` answers a page's text, 8000 characters at a time. Ranking is SQLite FTS5's
bm25 (title weighted over body, porter stemming): the engine's own scoring, not ours.
A query is its words, all required; when no page has them all, any of them.

The corpus is real documentation nobody here wrote (set-up installs Debian's `git-doc`:
the HTML manual pages of git). The index is built once per corpus content (the sha256
of every file's path and bytes) into the cache folder and reused by every later start;
it is written to a temp file and renamed, so concurrent starts never see half an index.
"""

import argparse
import hashlib
import html
import os
import re
import sqlite3
import tempfile
from html.parser import HTMLParser
from pathlib import Path

PAGE_SIZE = 10
FETCH_CHARS = 8000
SNIPPET_TOKENS = 24
TITLE_WEIGHT = 10.0
URL_SCHEME = "doc://"
BLOCK_TAGS = frozenset({
    "p", "div", "br", "li", "ul", "ol", "tr", "table", "h1", "h2", "h3", "h4", "h5", "h6",
    "pre", "dt", "dd", "dl", "section", "blockquote", "hr",
})  # fmt: skip
SKIP_TAGS = frozenset({"script", "style", "head"})


class _Text(HTMLParser):
    """Title and visible text of an HTML page (block elements become line breaks).

    The standard library's parser suffices here: the index needs only words and line
    structure, and the search server must not depend on the `mcp-servers` extra."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title, self.parts, self._skip, self._in_title = "", [], 0, False

    def handle_starttag(self, tag, attrs):
        if tag == "title":
            self._in_title = True
        elif tag in SKIP_TAGS:
            self._skip += 1
        elif tag in BLOCK_TAGS:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag == "title":
            self._in_title = False
        elif tag in SKIP_TAGS:
            self._skip = max(0, self._skip - 1)
        elif tag in BLOCK_TAGS:
            self.parts.append("\n")

    def handle_data(self, data):
        if self._in_title:
            self.title += data
        elif not self._skip:
            self.parts.append(data)

    def text(self) -> str:
        lines = (
            re.sub(r"[ \t\r\f\v\xa0]+", " ", x).strip() for x in "".join(self.parts).split("\n")
        )
        return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def page_text(raw: str) -> tuple[str, str]:
    """(title, text) of an HTML document."""
    p = _Text()
    p.feed(raw)
    p.close()
    return html.unescape(p.title).strip(), p.text()


def corpus_files(corpus: Path) -> list[Path]:
    return sorted(p for p in corpus.rglob("*") if p.suffix in (".html", ".htm") and p.is_file())


def corpus_hash(corpus: Path, files: list[Path]) -> str:
    h = hashlib.sha256()
    for p in files:
        h.update(str(p.relative_to(corpus)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "worldtrace" / "search"


def build_index(corpus: Path, cache: Path | None = None) -> Path:
    """The index of `corpus`, built unless the cache already holds this content's."""
    corpus = corpus.resolve()
    files = corpus_files(corpus)
    if not files:
        raise SystemExit(f"{corpus}: no .html files to index")
    cache = cache or default_cache()
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"{corpus.name}-{corpus_hash(corpus, files)[:16]}.sqlite"
    if path.exists():
        return path
    fd, tmp = tempfile.mkstemp(dir=cache, suffix=".tmp")
    os.close(fd)
    db = sqlite3.connect(tmp)
    db.execute(
        "CREATE VIRTUAL TABLE pages USING fts5(url UNINDEXED, title, body, tokenize='porter unicode61')"
    )
    rows = []
    for p in files:
        title, text = page_text(p.read_text(encoding="utf-8", errors="replace"))
        rel = p.relative_to(corpus).as_posix()
        rows.append((f"{URL_SCHEME}{corpus.name}/{rel}", title or rel, text))
    db.executemany("INSERT INTO pages (url, title, body) VALUES (?, ?, ?)", rows)
    db.commit()
    db.close()
    os.replace(tmp, path)
    return path


class Index:
    """Queries over a built index (read-only)."""

    def __init__(self, path: Path):
        self.db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)

    def search(self, query: str, page: int = 1) -> tuple[str, int]:
        """The result page's text and the number of matching pages."""
        words = re.findall(r"\w+", query.lower())
        if not words:
            raise ValueError("the query has no words to search for")
        for joiner in (" AND ", " OR "):
            match = joiner.join(f'"{w}"' for w in words)
            (total,) = self.db.execute(
                "SELECT count(*) FROM pages WHERE pages MATCH ?", (match,)
            ).fetchone()
            if total:
                break
        if not total:
            return f'No results for "{query}".', 0
        pages = -(-total // PAGE_SIZE)
        if page > pages:
            return (
                f'No results on page {page}: "{query}" has {total} results ({pages} pages).',
                total,
            )
        rows = self.db.execute(
            "SELECT url, title, snippet(pages, 2, '[', ']', ' ... ', ?) FROM pages "
            "WHERE pages MATCH ? ORDER BY bm25(pages, 0.0, ?, 1.0) LIMIT ? OFFSET ?",
            (SNIPPET_TOKENS, match, TITLE_WEIGHT, PAGE_SIZE, (page - 1) * PAGE_SIZE),
        ).fetchall()
        first = (page - 1) * PAGE_SIZE + 1
        out = [
            f'Results {first}-{first + len(rows) - 1} of {total} for "{query}" (page {page} of {pages}):'
        ]
        for i, (url, title, snippet) in enumerate(rows, first):
            out.append(f"\n{i}. {title}\n   {url}\n   {' '.join(snippet.split())}")
        return "\n".join(out), total

    def fetch(self, url: str, start: int = 0) -> str:
        row = self.db.execute("SELECT title, body FROM pages WHERE url = ?", (url,)).fetchone()
        if row is None:
            raise ValueError(f"no page at {url} (fetch takes a URL from the search results)")
        title, body = row
        part = body[start : start + FETCH_CHARS]
        out = f"{title}\n{url}\n\n{part}"
        if start + FETCH_CHARS < len(body):
            out += f"\n\n[{len(body) - start - FETCH_CHARS} more characters: fetch with start={start + FETCH_CHARS}]"
        return out


def build_server(index: Index, name: str):
    """The MCP server (the SDK's MCPServer) exposing `search` and `fetch`; each search is
    also logged to the client (a log notification), as a production server would."""
    # No `from __future__ import annotations` in this module: the SDK reads the tools'
    # signatures, and these names are local to this function.
    from typing import Annotated

    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations
    from pydantic import Field

    server = MCPServer(
        "worldtrace-search",
        version="1",
        instructions=f"Full-text search over the {name} documentation. "
        "Search, then fetch a result's URL to read it.",
    )
    read_only = ToolAnnotations(
        readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False
    )

    @server.tool(annotations=read_only, structured_output=False)
    async def search(
        query: Annotated[
            str, Field(description="Words to search for, e.g. 'amend commit message'")
        ],
        ctx: Context,
        page: Annotated[int, Field(ge=1, description="Result page, 10 results each")] = 1,
    ) -> str:
        """Search the documentation; results are ranked by relevance (bm25)."""
        try:
            text, total = index.search(query, page)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        await ctx.info(f"search {query!r} page {page}: {total} results", logger_name="search")
        return text

    @server.tool(annotations=read_only, structured_output=False)
    def fetch(
        url: Annotated[str, Field(description="A result URL, e.g. doc://git-doc/git-commit.html")],
        start: Annotated[int, Field(ge=0, description="Character offset to read from")] = 0,
    ) -> str:
        """Read a documentation page as text, 8000 characters at a time."""
        try:
            return index.fetch(url, start)
        except ValueError as exc:
            raise ToolError(str(exc)) from None

    return server


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m worldtrace.sandboxes.mcp_search", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--corpus", required=True, type=Path, help="folder of HTML pages")
    ap.add_argument(
        "--cache", type=Path, default=None, help=f"index cache (default {default_cache()})"
    )
    ap.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    ap.add_argument("--port", type=int, default=8000, help="loopback port for --transport http")
    args = ap.parse_args(argv)
    index = Index(build_index(args.corpus, args.cache))
    server = build_server(index, args.corpus.resolve().name)
    if args.transport == "http":
        server.run("streamable-http", host="127.0.0.1", port=args.port)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
