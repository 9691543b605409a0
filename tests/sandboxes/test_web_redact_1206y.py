"""A key a web page splits over inline elements reached the store in pieces (a hunt,
2026-12-06, y): Chromium's accessibility tree gives every text node its own `StaticText`
line, so `<span>ghp_Zx8K…</span><span>Rt1V…</span>` (syntax highlighting),
`<mark>sk-ant-</mark>api03-…` (a search hit), `<b>sk-proj-…</b><i>…</i>` and
`<span>AKIA</span><span>QWERTY…</span>` were in the raw shard piece by piece and no rule
matched a piece. Redaction now reads each run of inline text joined (`redact._InlineText`)
and replaces every piece of a secret found there. Real Chromium, the hunt's page, a real
job."""

from __future__ import annotations

import pytest
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.schemas import read_records

from ..conftest import serving_pages

pytestmark = pytest.mark.browser

PAGE = """<!doctype html><html><head><title>Setup</title></head><body>
<h1>Configure</h1><p>Search results: <mark>sk-ant-</mark>api03-Rz5Xq9vLm2pRt9sKw4zB7Ab3dE9xYfGh1jKlMn0pQ</p>
<pre><code><span class="k">export</span> <span class="n">GITHUB_TOKEN</span>=<span class="s">ghp_Zx8Kq2Lm5Np7</span><span class="s">Rt1Vw3Yb6Cd9Fg4Hj0Ks2Mn5</span></code></pre>
<p>Key: <b>sk-proj-Ab12Cd34Ef56Gh78</b><i>Ij90Kl12Mn34Op56Qr78St90Uv12Wx34</i></p>
<p>AWS: <span>AKIA</span><span>QWERTYUIOPASDFGH</span></p>
<p>Password: <code>Hn4$kQ9!wLp2</code></p>
<p>Run <code>pip install</code> and <em>restart</em> the <strong>server</strong>: it prints
<code>sha256:</code><code>3f1c9e5a7b2d4f6e8a0c1b3d5f7e9a1c3b5d7f9e1a3c5b7d9f1e3a5c7b9d1f3e</code>.</p>
</body></html>"""
PIECES = (
    "api03-Rz5Xq9", "ghp_Zx8Kq2Lm5Np7", "Rt1Vw3Yb6Cd9", "sk-proj-Ab12Cd34", "Ij90Kl12Mn34",
    "QWERTYUIOPASDFGH", "Hn4$kQ9!wLp2",
)  # fmt: skip


def test_a_key_split_over_inline_elements_reaches_no_shard(store):
    with serving_pages({"/index.html": PAGE}) as url:
        job = {
            "name": "webleak", "retries": 0, "policy": "scripted",
            "sandbox": {"kind": "web", "start_url": f"{url}/index.html"},
            "tasks": [{"id": "look", "instruction": "Read the setup page.",
                       "actions": [{"tool": "noop", "arguments": {"ms": 0}}]}],
        }  # fmt: skip
        [t] = run_job(JobSpec.from_dict(job), store.raw).trajectories
    shown = [t.system.initial_state, *(x.observation.text for x in t.turns)]
    assert all("StaticText 'Search results:'" in s for s in shown), shown[0]
    [stored] = list(read_records(store.raw))
    for piece in PIECES:
        assert piece not in repr(t.to_dict()) and piece not in repr(stored.to_dict()), piece
    tree = shown[-1]
    for kept in ("'Configure'", "'export'", "'GITHUB_TOKEN'", "'Key:'", "'AWS:'", "'Password:'",
                 "'pip install'", "'restart'", "'server'", "'sha256:'", "'3f1c9e5a7b2d4f6e"):  # fmt: skip
        assert kept in tree, (kept, tree)
    for kind, n in (("anthropic_key", 2), ("github_token", 2), ("openai_key", 2),
                    ("aws_access_key", 2), ("password", 1)):  # fmt: skip
        assert tree.count(f"StaticText '<secret:{kind}>'") == n, (kind, tree)
