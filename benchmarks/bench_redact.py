"""Redaction on the demo corpus: false positives, recall and speed (docs/security.md).

    python -m benchmarks.bench_redact [--synthetic N] [--episodes N] [--process]

The corpus holds no secrets: generated trajectories (every domain) plus real terminal
and SWE episodes on the local docker images whose observations are full of what a
world model must learn and a careless detector flags: git SHAs, sha256/md5 sums, UUIDs,
base64 of random bytes, hex dumps. Every redaction on it is a false positive. Recall is
measured on `example_secrets` planted into the same observations. Speed compares the
compiled detectors with detect-secrets' own per-line `analyze_line` on the same texts.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter
from pathlib import Path

TERMINAL_ACTIONS = [
    "cd /tmp && git init -q r && cd r && for i in 1 2 3 4 5 6; do echo $i > f$i; git add f$i; "
    'git -c user.email=a@b.c -c user.name=a commit -q -m "change $i"; done; git log --stat\n',
    "git log --format='%H %h %T %P %s'\n",
    "sha256sum /etc/passwd /etc/group /etc/hostname /bin/ls /bin/sh; md5sum /etc/*.conf\n",
    "for i in $(seq 30); do cat /proc/sys/kernel/random/uuid; done\n",
    "head -c 4096 /dev/urandom | base64\n",
    "head -c 512 /dev/urandom | od -A x -t x1z | head -40\n",
    'python3 -c "import uuid, hashlib; [print(uuid.uuid4(), hashlib.sha1(str(i).encode()).hexdigest()) for i in range(40)]"\n',
    "env | sort; ls -la /usr/bin | head -60\n",
    "python3 -c \"import base64, json; print(base64.b64encode(json.dumps({'a': list(range(50))}).encode()).decode())\"\n",
]


def docker_trajectories(episodes: int, work: Path) -> list:
    """Real terminal and SWE episodes on the local images (skipped without docker)."""
    from worldtrace.collectors.jobs import run_job
    from worldtrace.collectors.jobspec import JobSpec

    repo = work / "repo"
    (repo / "pkg").mkdir(parents=True)
    for i in range(20):
        (repo / "pkg" / f"m{i}.py").write_text(f"def f{i}(x):\n    return x * {i}\n")
    term = {
        "name": "fp-terminal", "sandbox": "terminal", "episodes": episodes,
        "tasks": [{"id": "hashes", "instruction": "Show hashes.", "actions": TERMINAL_ACTIONS}],
    }  # fmt: skip
    swe = {
        "name": "fp-swe", "sandbox": {"kind": "swe", "repo": str(repo)}, "episodes": episodes,
        "tasks": [{"id": "look", "instruction": "Look around.", "actions": [
            {"tool": "bash", "arguments": {"command": "git init -q . 2>/dev/null; git add -A; git -c user.email=a@b.c -c user.name=a commit -qm init; git log --format=%H; sha256sum pkg/*.py"}},
            {"tool": "read", "arguments": {"path": "pkg/m3.py"}},
            {"tool": "bash", "arguments": {"command": "python3 -c 'import uuid; [print(uuid.uuid4()) for _ in range(20)]'; head -c 2000 /dev/urandom | base64"}},
        ]}],
    }  # fmt: skip
    out = []
    for job in (term, swe):
        out += run_job(JobSpec.from_dict(job), work / "raw").trajectories
    return out


def texts_of(trajectories) -> list[str]:
    return [s for t in trajectories for x in t.turns for s in (x.action.text, x.observation.text)]


def measure(synthetic: int, episodes: int, with_process: bool) -> dict:
    from worldtrace.collectors.synthetic import SyntheticConfig, generate
    from worldtrace.schemas.redact import Redactor
    from worldtrace.schemas.redact_rules import SLOW_PLUGINS, RedactConfig, example_secrets

    work = Path(tempfile.mkdtemp(prefix="bench-redact-"))
    corpus = generate(SyntheticConfig(n=synthetic, seed=1))
    real = []
    try:
        real = docker_trajectories(episodes, work)
    except Exception as exc:  # no engine: the generated corpus alone, said so
        print(f"docker episodes skipped: {exc}")
    red = Redactor()
    result: dict = {"trajectories": {"synthetic": len(corpus), "docker": len(real)}}
    for name, trajs in (("synthetic", corpus), ("docker", real)):
        texts = texts_of(trajs)
        hits = Counter(k for s in texts for _, _, k in red.spans(s))
        mb = sum(len(s) for s in texts) / 1e6
        result[f"false_positives_{name}"] = {
            "texts": len(texts), "mb": round(mb, 2), "redactions": sum(hits.values()),
            "per_mb": round(sum(hits.values()) / mb, 4) if mb else None, "kinds": dict(hits),
        }  # fmt: skip
    wide = Redactor(RedactConfig(detect_secrets=(*RedactConfig().detect_secrets, *SLOW_PLUGINS)))
    texts = texts_of(corpus) + texts_of(real)
    result["false_positives_with_slow_plugins"] = dict(
        Counter(k for s in texts for _, _, k in wide.spans(s))
    )
    hosts = texts_of(real) or texts_of(corpus)
    found = total = 0
    for seed in range(50):
        for kind, (value, line) in example_secrets(seed).items():
            host = hosts[(seed * 31 + len(kind)) % len(hosts)]
            out, _ = red.text(host[: len(host) // 2] + "\n" + line + "\n" + host[len(host) // 2 :])
            total += 1
            found += value not in out
    result["recall_planted"] = f"{found}/{total}"
    result["speed"] = speed(texts_of(corpus))
    if with_process:
        result["process"] = process_cost(corpus, work)
    return result


def speed(texts: list[str]) -> dict:
    from worldtrace.schemas.redact import Redactor
    from worldtrace.schemas.redact_rules import DETECT_SECRETS_PLUGINS, SLOW_PLUGINS, RedactConfig

    mb = sum(len(s) for s in texts) / 1e6
    out = {}
    for name, cfg in (
        ("compiled (default rules)", RedactConfig()),
        (
            "compiled + slow plugins",
            RedactConfig(detect_secrets=DETECT_SECRETS_PLUGINS + SLOW_PLUGINS),
        ),
    ):
        red = Redactor(cfg)
        for d in red.detectors:  # they compile on first search: before the clock
            d.regex.groups  # noqa: B018
        t0 = time.perf_counter()
        for s in texts:
            red.text(s)
        out[name] = round(mb / (time.perf_counter() - t0), 2)
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.settings import default_settings

    classes = {c.__name__: c for c in get_mapping_from_secret_type_to_class().values()}
    plugins = [classes[n]() for n in DETECT_SECRETS_PLUGINS]
    t0 = time.perf_counter()
    with default_settings():
        for s in texts:
            for i, line in enumerate(s.splitlines(), 1):
                for p in plugins:
                    p.analyze_line(filename="t", line=line, line_number=i)
    out["detect-secrets analyze_line (same plugins)"] = round(mb / (time.perf_counter() - t0), 2)
    return {"mb": round(mb, 2), "mb_per_s": out}


def process_cost(corpus, work: Path) -> dict:
    """`process` on the same corpus with redaction on and off (one worker)."""
    import os

    from worldtrace.pipelines.process import ProcessConfig, run
    from worldtrace.schemas import ShardWriter
    from worldtrace.schemas.redact_rules import CONFIG_ENV

    with ShardWriter(work / "in") as w:
        w.write(corpus)
    off = work / "off.yaml"
    off.write_text("enabled: false\n")
    out = {}
    for name, cfg in (("redaction on", None), ("redaction off", str(off))):
        if cfg:
            os.environ[CONFIG_ENV] = cfg
        t0 = time.perf_counter()
        run(
            ProcessConfig(
                inputs=[str(work / "in")], output=str(work / f"out-{len(out)}"), workers=1
            )
        )
        out[name] = round(time.perf_counter() - t0, 2)
        os.environ.pop(CONFIG_ENV, None)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--synthetic", type=int, default=3000)
    ap.add_argument("--episodes", type=int, default=5)
    ap.add_argument("--process", action="store_true")
    ap.add_argument("--document", action="store_true", help="the whole result as one JSON document")
    a = ap.parse_args()
    m = measure(a.synthetic, a.episodes, a.process)
    if a.document:
        print(json.dumps(m, indent=2))
        return
    for line in rows(m):  # the JSON lines `make bench` collects
        print(json.dumps(line))


def rows(m: dict) -> list[dict]:
    """The measurements as `benchmarks.run` rows: speed against detect-secrets, and the
    false positives on texts with no secret (ratio: texts kept intact / all texts)."""
    speed = m["speed"]["mb_per_s"]
    ours, theirs = (
        speed["compiled (default rules)"],
        speed["detect-secrets analyze_line (same plugins)"],
    )
    out = [
        {"name": "redaction MB/s vs detect-secrets analyze_line", "ours": ours, "baseline": theirs,
         "ratio": ours / theirs, "unit": "MB/s",
         "notes": f"same plugins and texts ({m['speed']['mb']} MB); recall on planted secrets {m['recall_planted']}"},
    ]  # fmt: skip
    for kind in ("synthetic", "docker"):
        fp = m[f"false_positives_{kind}"]
        out.append(
            {"name": f"false positives on {kind} texts", "ours": fp["redactions"],
             "baseline": fp["texts"], "ratio": 1 - fp["redactions"] / max(fp["texts"], 1),
             "unit": "", "notes": f"redactions in {fp['texts']:,} texts that hold no secret "
             f"({fp['mb']} MB); ratio = share of texts left intact"}
        )  # fmt: skip
    return out


if __name__ == "__main__":
    main()
