"""The device's `sh`: the commands adb clients and uiautomator2 send, with Android's output.

A small interpreter: `;`, `&&`, `||`, pipes into `grep`, `$?`, and `NAME=value` prefixes.
Commands answer the way Android's toolbox, `am`, `pm`, `dumpsys`, `ime`, `input`,
`monkey` and `uiautomator` do, so client code parsing their output (regexes in
adbutils and uiautomator2) works unchanged. `app_process` starting the uiautomator2
server is a *daemon*: it runs until the adb connection closes.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import re
import shlex
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from .device import ADB_KEYBOARD, BOOT_ID, U2_JAR, Device
from .ui import HEIGHT, WIDTH

KEYCODES = {"3": "home", "4": "back", "66": "enter", "67": "delete", "187": "recent", "82": "menu"}
U2_MAIN = "com.wetest.uia2.Main"
BROADCAST_OK = 'Broadcast completed: result=-1, data="success"\n'


@dataclass
class Result:
    out: str = ""
    code: int = 0
    err: str = ""
    daemon: tuple[Callable[[], None], Callable[[], None]] | None = None
    """(start, stop) of a process that lives as long as the shell connection."""
    merged: str | None = None
    """stdout and stderr in the order the parts ran (what a v1 shell shows)."""

    @property
    def stream(self) -> str:
        return self.out + self.err if self.merged is None else self.merged


class Shell:
    def __init__(self, device: Device, rpc_factory: Callable[[Device], Callable]):
        self.d = device
        self.rpc_factory = rpc_factory
        """Makes the uiautomator2 server's connection handler when `app_process` starts it."""

    def run(self, line: str) -> Result:
        """Run a command line; the output of every part, the last exit code."""
        lex = shlex.shlex(line, posix=True, punctuation_chars=";&|")
        lex.whitespace_split = True
        tokens = list(lex)
        out, err, mixed, code, op, daemon = [], [], [], 0, ";", None
        while tokens:
            n = next((i for i, t in enumerate(tokens) if t in (";", "&&", "||")), len(tokens))
            part, sep = tokens[:n], tokens[n] if n < len(tokens) else ";"
            tokens = tokens[n + 1 :]
            if part and (op == ";" or (op == "&&") == (code == 0)):
                r = self._pipeline([t.replace("$?", str(code)) for t in part])
                out.append(r.out)
                err.append(r.err)
                mixed.append(r.stream)
                code, daemon = r.code, r.daemon or daemon
            op = sep
        return Result("".join(out), code, "".join(err), daemon, "".join(mixed))

    def _pipeline(self, tokens: list[str]) -> Result:
        stages = [[]]
        for t in tokens:
            if t == "|":
                stages.append([])
            else:
                stages[-1].append(t)
        with self.d.lock:
            r = self._command(stages[0])
        for stage in stages[1:]:
            if not stage or stage[0] != "grep":
                return Result(
                    "", 1, f"/system/bin/sh: {stage[0] if stage else '|'}: unsupported in a pipe\n"
                )
            g = _grep(stage[1:], r.out)
            r = Result(g.out, g.code, r.err, r.daemon)
        return r

    def _command(self, argv: list[str]) -> Result:
        while argv and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", argv[0]):
            argv = argv[1:]  # environment assignments (CLASSPATH=...)
        if argv and argv[0] == "toybox":
            argv = argv[1:]
        if not argv:
            return Result()
        fn = getattr(self, "cmd_" + argv[0].replace("-", "_"), None)
        if fn is None:
            return Result("", 127, f"/system/bin/sh: {argv[0]}: inaccessible or not found\n")
        return fn(argv[1:])

    # -- toolbox -----------------------------------------------------------------------
    def cmd_echo(self, a: list[str]) -> Result:
        return Result(" ".join(a) + "\n")

    def cmd_true(self, a: list[str]) -> Result:
        return Result()

    def cmd_md5sum(self, a: list[str]) -> Result:
        out, err = [], []
        for path in a:
            f = self.d.files.get(path)
            if f is None:
                err.append(f"md5sum: {path}: No such file or directory\n")
            else:
                out.append(f"{hashlib.md5(f.data).hexdigest()}  {path}\n")
        return Result("".join(out), 1 if err else 0, "".join(err))

    cmd_md5 = cmd_md5sum

    def cmd_cat(self, a: list[str]) -> Result:
        if a and a[0] == BOOT_ID:  # procfs: read-only, not a file of the simulated storage
            return Result(self.d.boot_id + "\n")
        f = self.d.files.get(a[0]) if a else None
        if f is None:
            return Result("", 1, f"cat: {a[0] if a else ''}: No such file or directory\n")
        return Result(f.data.decode("utf-8", "replace"))

    def cmd_rm(self, a: list[str]) -> Result:
        for path in (p for p in a if not p.startswith("-")):
            if self.d.files.pop(path, None) is None and "-f" not in a and "-rf" not in a:
                return Result("", 1, f"rm: {path}: No such file or directory\n")
        return Result()

    def cmd_ls(self, a: list[str]) -> Result:
        path = next((p for p in a if not p.startswith("-")), "/")
        if self.d.stat(path) is None:
            return Result("", 1, f"ls: {path}: No such file or directory\n")
        return Result("".join(n + "\n" for n in self.d.listdir(path)) or "")

    def cmd_getprop(self, a: list[str]) -> Result:
        props = self.d.props()
        if a:
            return Result(props.get(a[0], "") + "\n")
        return Result("".join(f"[{k}]: [{v}]\n" for k, v in sorted(props.items())))

    def cmd_ps(self, a: list[str]) -> Result:
        lines = ["USER           PID  PPID     VSZ    RSS WCHAN            ADDR S NAME"]
        procs = [("root", 1, 0, "init"), ("root", 301, 1, "zygote64"), ("system", 612, 301, "system_server"),
                 ("u0_a98", 1021, 301, "com.android.systemui"), ("u0_a112", 1388, 301, "com.google.android.apps.nexuslauncher")]  # fmt: skip
        procs += [
            (f"u0_a{140 + i}", pid, 301, pkg)
            for i, (pkg, pid) in enumerate(sorted(self.d.pids.items()))
        ]
        for user, pid, ppid, name in procs:
            lines.append(
                f"{user:<10} {pid:>8} {ppid:>5} 14512736 198432 do_epoll_wait       0 S {name}"
            )
        return Result("\n".join(lines) + "\n")

    def cmd_pidof(self, a: list[str]) -> Result:
        pid = self.d.pids.get(a[0]) if a else None
        return Result(f"{pid}\n") if pid else Result("", 1)

    def cmd_wm(self, a: list[str]) -> Result:
        if a[:1] == ["size"]:
            return Result(f"Physical size: {WIDTH}x{HEIGHT}\n")
        if a[:1] == ["density"]:
            return Result("Physical density: 420\n")
        return Result(f"Unknown command: {' '.join(a)}\n", 255)

    def cmd_uiautomator(self, a: list[str]) -> Result:
        if a[:1] != ["dump"]:
            return Result("Usage: uiautomator <subcommand> [options]\n", 1)
        path = a[1] if len(a) > 1 else "/sdcard/window_dump.xml"
        self.d.write(path, self.d.dump().encode(), 0o100660)
        return Result(f"UI hierchary dumped to: {path}\n")

    def cmd_app_process(self, a: list[str]) -> Result:
        """`app_process / com.wetest.uia2.Main -p PORT`: the uiautomator2 server."""
        if U2_MAIN not in a:
            return Result("Error: no class name or --zygote supplied.\n", 1)
        if U2_JAR not in self.d.files:
            return Result(f"Error: Could not find or load main class {U2_MAIN}\n", 1)
        port = int(a[a.index("-p") + 1]) if "-p" in a else 9008
        if port in self.d.listeners:
            return Result("java.net.BindException: Address already in use\n", 1)
        d = self.d

        def start() -> None:
            d.listeners[port] = self.rpc_factory(d)

        def stop() -> None:
            d.listeners.pop(port, None)

        return Result("[server] INFO: [UiAutomator2Server] Starting Server\n", daemon=(start, stop))

    # -- input and key events --------------------------------------------------------
    def cmd_input(self, a: list[str]) -> Result:
        if a[:1] == ["-d"]:
            a = a[2:]
        verb, args = (a[0], a[1:]) if a else ("", [])
        try:
            if verb == "tap":
                self.d.tap(int(float(args[0])), int(float(args[1])))
            elif verb in ("swipe", "draganddrop"):
                x1, y1, x2, y2 = (int(float(v)) for v in args[:4])
                self.d.swipe(x1, y1, x2, y2, int(args[4]) if len(args) > 4 else 300)
            elif verb == "text":
                self.d.commit_text(" ".join(args).replace("%s", " "))
            elif verb == "keyevent":
                for k in (k for k in args if not k.startswith("--")):
                    self.d.key(KEYCODES.get(k) or k.upper().removeprefix("KEYCODE_").lower())
            else:
                return Result("Usage: input [<source>] [-d DISPLAY_ID] <command> [<arg>...]\n", 1)
        except (IndexError, ValueError):
            return Result(f"Error: Invalid arguments for command: {verb}\n", 1)
        return Result()

    # -- activity manager, package manager, monkey ---------------------------------------
    def cmd_monkey(self, a: list[str]) -> Result:
        pkg = a[a.index("-p") + 1] if "-p" in a and a.index("-p") + 1 < len(a) else None
        err = self.d.launch(pkg) if pkg else "** No activities found to run, monkey aborted."
        if err:
            return Result(err + "\n", 251)
        return Result(
            "Events injected: 1\n## Network stats: elapsed time=14ms (0ms mobile, 0ms wifi, 14ms not connected)\n"
        )

    def cmd_am(self, a: list[str]) -> Result:
        verb = a[0] if a else ""
        if verb == "force-stop" and len(a) > 1:
            self.d.force_stop(a[-1])
            return Result()
        if verb == "start":
            return self._am_start(a[1:])
        if verb == "broadcast":
            return self._broadcast(a[1:])
        return Result(f"Unknown command: {verb}\n", 255)

    def _am_start(self, a: list[str]) -> Result:
        opts = dict(itertools.pairwise(a))
        comp = opts.get("-n")
        if comp is None or "/" not in comp:
            return Result(
                "Error: Activity not started, unable to resolve Intent { act="
                + opts.get("-a", "")
                + " }\n",
                1,
            )
        pkg, cls = comp.split("/", 1)
        app = self.d.apps.get(pkg)
        main = app.main().title().split("/", 1)[1] if app and app.launchable else None
        if main is None or (pkg + cls if cls.startswith(".") else cls) != main:
            return Result(
                f"Starting: Intent {{ cmp={comp} }}\nError type 3\nError: Activity class {{{comp}}} does not exist.\n",
                1,
            )
        if "-S" in a:
            self.d.force_stop(pkg)
        self.d.launch(pkg)
        return Result(
            f"Starting: Intent {{ act=android.intent.action.MAIN cat=[android.intent.category.LAUNCHER] cmp={comp} }}\n"
        )

    def _broadcast(self, a: list[str]) -> Result:
        action = a[a.index("-a") + 1] if "-a" in a else ""
        extras = {a[i + 1]: a[i + 2] for i, t in enumerate(a[:-2]) if t in ("--es", "--ei")}
        head = f"Broadcasting: Intent {{ act={action} flg=0x400000 }}\n"
        ime_on = self.d.settings["secure"].get("default_input_method") == ADB_KEYBOARD
        if not action.startswith("ADB_KEYBOARD_") or not ime_on:
            return Result(head + "Broadcast completed: result=0\n")
        if action == "ADB_KEYBOARD_INPUT_TEXT":
            self.d.commit_text(base64.b64decode(extras.get("text", "")).decode("utf-8"))
        elif action == "ADB_KEYBOARD_CLEAR_TEXT":
            self.d.clear_text()
        elif action == "ADB_KEYBOARD_HIDE":
            self.d.show_keyboard(False)
        elif action in ("ADB_KEYBOARD_SMART_ENTER", "ADB_KEYBOARD_EDITOR_CODE"):
            self.d.key("enter")
        return Result(head + BROADCAST_OK)

    def cmd_pm(self, a: list[str]) -> Result:
        verb, rest = (a[0], a[1:]) if a else ("", [])
        third_party = {
            p for p, app in self.d.apps.items() if app.launchable and p.startswith("com.example")
        }
        installed = sorted(self.d.apps) + (
            ["com.github.uiautomator"] if self.d.config.ime_installed else []
        )
        if verb == "list" and rest[:1] == ["packages"]:
            pkgs = installed
            flt = [x for x in rest[1:] if not x.startswith("-")]
            if "-3" in rest:
                pkgs = [p for p in pkgs if p in third_party or p == "com.github.uiautomator"]
            pkgs = [p for p in pkgs if not flt or flt[0] in p]
            return Result("".join(f"package:{p}\n" for p in pkgs))
        if verb == "path" and rest:
            if rest[0] not in installed:
                return Result("", 1)  # as Android answers a package it does not have
            return Result(
                f"package:/data/app/~~{zlib.crc32(rest[0].encode()):08x}==/{rest[0]}-1/base.apk\n"
            )
        if verb == "clear" and rest:
            app = self.d.apps.get(rest[-1])
            if app is None:
                return Result("Failed\n", 1)
            self.d.force_stop(app.package)
            app.clear()
            return Result("Success\n")
        if verb == "grant":
            return Result()
        if verb in ("install", "uninstall"):
            return Result(
                "Failure [INSTALL_FAILED_USER_RESTRICTED: the simulator cannot install packages]\n",
                1,
            )
        return Result(f"Error: unknown command '{verb}'\n", 1)

    # -- dumpsys, ime, settings ---------------------------------------------------------
    def cmd_dumpsys(self, a: list[str]) -> Result:
        svc, rest = (a[0], a[1:]) if a else ("", [])
        d = self.d
        focus, app = d.focus()
        token = f"{zlib.crc32(focus.encode()):08x}"
        if svc == "window":
            return Result(
                "WINDOW MANAGER WINDOWS (dumpsys window windows)\n"
                f"  mCurrentFocus=Window{{{token} u0 {focus}}}\n"
                f"  mFocusedApp=ActivityRecord{{{token[::-1]} u0 {app} t{12 + len(d.tasks)}}}\n"
            )
        if svc == "activity":
            pid = d.pids.get(app.split("/")[0], 1388)
            return Result(
                f"  mResumedActivity: ActivityRecord{{{token[::-1]} u0 {app} t12}}\n"
                f"  ACTIVITY {app} {token} pid={pid}\n"
            )
        if svc == "input_method":
            ime = d.settings["secure"].get("default_input_method", "")
            return Result(f"  mCurMethodId={ime}\n  mInputShown={str(d.keyboard).lower()}\n")
        if svc == "display":
            return Result(
                f"  mDefaultViewport=DisplayViewport{{valid=true, orientation=0, deviceWidth={WIDTH}, deviceHeight={HEIGHT}}}\n"
            )
        if svc == "power":
            return Result("  mWakefulness=Awake\n  mHoldingDisplaySuspendBlocker=true\n")
        if svc == "package" and rest:
            app_ = d.apps.get(rest[0])
            if app_ is None:
                return Result(f"Unable to find package: {rest[0]}\n")
            return Result(
                f"Packages:\n  Package [{app_.package}]\n    versionCode=1 minSdk=26 targetSdk=34\n    versionName={app_.version}\n"
            )
        return Result(f"Can't find service: {svc}\n")

    def cmd_ime(self, a: list[str]) -> Result:
        d = self.d
        verb, arg = (a[0] if a else ""), (a[-1] if len(a) > 1 else "")
        if verb == "list":
            return Result("".join(i + "\n" for i in (d.imes if "-a" in a else d.enabled_imes)))
        if arg not in d.imes:
            return Result(f"Unknown input method {arg} cannot be {verb}d for user #0\n", 1)
        if verb == "enable":
            if arg not in d.enabled_imes:
                d.enabled_imes.append(arg)
            return Result(f"Input method {arg}: now enabled for user #0\n")
        if verb == "disable":
            d.enabled_imes = [i for i in d.enabled_imes if i != arg]
            return Result(f"Input method {arg}: now disabled for user #0\n")
        if verb == "set" and arg in d.enabled_imes:
            d.settings["secure"]["default_input_method"] = arg
            return Result(f"Input method {arg} selected for user #0\n")
        return Result(f"Unknown command: {verb}\n", 1)

    def cmd_settings(self, a: list[str]) -> Result:
        if len(a) >= 3 and a[0] in ("get", "put") and a[1] in self.d.settings:
            table = self.d.settings[a[1]]
            if a[0] == "get":
                return Result(f"{table.get(a[2], 'null')}\n")
            if len(a) >= 4:
                table[a[2]] = a[3]
                return Result()
        if len(a) >= 3 and a[0] == "delete" and a[1] in self.d.settings:
            found = self.d.settings[a[1]].pop(a[2], None) is not None
            return Result(f"Deleted {int(found)} rows\n")
        return Result("usage:  settings [--user <USER_ID> | current] get namespace key\n", 1)


def _grep(args: list[str], text: str) -> Result:
    flags, pattern, invert = 0, None, False
    for arg in args:
        if arg == "-i":
            flags |= re.I
        elif arg == "-v":
            invert = True
        elif arg in ("-E", "-e"):
            continue
        elif pattern is None:
            pattern = arg
    rx = re.compile(pattern or "", flags)
    lines = [ln for ln in text.splitlines(keepends=True) if bool(rx.search(ln)) != invert]
    return Result("".join(lines), 0 if lines else 1)
