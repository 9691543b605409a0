"""Click options generated from config dataclasses, and choices read from registries.

An option that mirrors a config field is declared once, on the dataclass: the field name
gives the option name, its type hint the click type, its default the default and its
attribute docstring (the string literal under the field) the help. A new config field is
then one edit. Configs and registries are named `"module:attr"` (the convention of
`sandboxes.base.kinds()`) and read on first use, so listing the commands imports neither
Beam nor pyarrow.

`--help` reads none of them either: a config's module loads its command's libraries
(`process`' Beam, ~1.5 s; pyarrow; pydantic), so help shows the options as
`worldtrace/help_options.py` has them, written from the configs by `python -m
worldtrace.options` (a test checks it is theirs). A command that runs reads the configs.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import functools
import importlib
import inspect
import itertools
import json
import re
import textwrap
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

import click

FC = TypeVar("FC", bound=Callable[..., Any])
SCALARS = (int, float, str)


def resolve(ref: Any) -> Any:
    """`"module:attr"` -> that attribute (called, when it is a function such as a registry's
    `kinds()`); anything else is returned as it is."""
    if not isinstance(ref, str):
        return ref
    module, _, name = ref.partition(":")
    value = getattr(importlib.import_module(module), name)
    return value() if callable(value) and not isinstance(value, type) else value


class RegistryChoice(click.Choice):
    """A choice among the names of a registry or constant (`"module:attr"`, any iterable
    of names), read when the command is used rather than when it is defined."""

    def __init__(self, ref: Any, *, first: Iterable[str] = (), case_sensitive: bool = True):
        # click.Choice.__init__ would read the registry now; `choices` is read lazily below
        self.ref, self.first, self.case_sensitive = ref, tuple(first), case_sensitive

    @functools.cached_property
    def choices(self) -> tuple[str, ...]:  # type: ignore[override]
        return (*self.first, *resolve(self.ref))

    def named(self, names: Iterable[str]) -> RegistryChoice:
        """This choice among `names` (the registry's as `help_options` has them), the
        registry left unread."""
        known = copy.copy(self)
        known.choices = (*self.first, *names)  # the cached_property's own slot
        return known


def field_docs(cls: type) -> dict[str, str]:
    """Attribute docstrings of a dataclass and its dataclass bases, whitespace folded.

    Python keeps no attribute docstrings at run time, so they are read from the source.
    """
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):  # defined where no source is kept (exec, REPL)
            continue
        body = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef)).body
        for node, after in itertools.pairwise(body):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def _scalar(hint: Any) -> Any:
    """`X | None` -> X; the hint itself otherwise."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1:
        return args[0]
    return hint


def config_options(config: Any, **kw: Any) -> list[click.Option]:
    """One click option per scalar field of `config` (a dataclass or `"module:Class"`):
    the options of `option_specs(config, **kw)`."""
    return [make_option(spec) for spec in option_specs(config, **kw)]


def option_specs(
    config: Any,
    *,
    include: Iterable[str] | None = None,
    exclude: Iterable[str] = (),
    choices: Mapping[str, Any] | None = None,
    shown: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """What each option of a scalar field of `config` is (`make_option` makes it), as
    JSON data, so that `help_options` can keep it.

    bool -> `--x/--no-x`; a field named in `choices` (a registry, see RegistryChoice) or
    typed `Literal[...]` -> a choice; int/float/str -> that type. Fields of other types
    (lists, dicts, nested configs) are set through `--config`/`--set` and are skipped.
    `shown`: what `--help` says is the default of a field whose default the command
    decides (export's `--seed`: the processing run's), instead of the field's.
    """
    cls = resolve(config)
    named = set(include or ())
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    choices = dict(choices or {})
    fields = dataclasses.fields(cls)
    include = {f.name for f in fields} if include is None else set(include)
    exclude = set(exclude)
    unknown = (include | exclude | set(choices)) - {f.name for f in fields}
    if unknown:
        raise ValueError(f"{cls.__name__} has no field(s) {', '.join(sorted(unknown))}")
    wanted = [f for f in fields if f.name in include - exclude]
    specs = []
    for f in wanted:
        hint = _scalar(hints[f.name])
        if f.name in choices:
            ptype: Any = {"registry": choices[f.name]}
        elif typing.get_origin(hint) is Literal:
            ptype = {"choice": list(typing.get_args(hint))}
        elif hint is bool or hint in SCALARS:
            ptype = hint.__name__
        elif f.name in named:
            raise TypeError(f"{cls.__name__}.{f.name}: {hint} cannot be a command-line option")
        else:
            continue
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        flag = "--" + f.name.replace("_", "-")
        specs.append(
            {
                "decls": [f"{flag}/--no-{flag[2:]}" if ptype == "bool" else flag, f.name],
                "type": ptype,
                "default": default,
                "show_default": (shown or {}).get(f.name, default != ""),
                "help": docs.get(f.name),
            }
        )
    _name_options_in_help(specs)
    return specs


TYPES = {t.__name__: t for t in SCALARS}
"""An option spec's scalar `type` -> the click type (`bool` is a flag: no type)."""


def make_option(
    spec: Mapping[str, Any], registries: Mapping[str, Any] | None = None
) -> click.Option:
    """The click option of an `option_specs` entry; a registry choice among the names
    `registries` gives for it, else read when the command is used."""
    ptype = spec["type"]
    if isinstance(ptype, dict) and "registry" in ptype:
        ref = ptype["registry"]
        choice = RegistryChoice(ref)
        known = (registries or {}).get(ref) if isinstance(ref, str) else None
        kind: Any = choice if known is None else choice.named(known)
    elif isinstance(ptype, dict):
        kind = click.Choice(tuple(ptype["choice"]))
    else:
        kind = TYPES.get(ptype)
    return click.Option(
        list(spec["decls"]),
        type=kind,
        default=spec["default"],
        show_default=spec["show_default"],
        help=spec["help"],
    )


def _name_options_in_help(specs: list[dict[str, Any]]) -> None:
    """Docstrings name fields (`seq_len`); on the command line they read `--seq-len`."""
    names = {s["decls"][1]: s["decls"][0].partition("/")[0] for s in specs}
    names = {k: v for k, v in names.items() if "_" in k}
    if not names:
        return
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")
    for s in specs:
        if s["help"]:
            s["help"] = pattern.sub(lambda m: names[m.group(1)], s["help"])


@dataclasses.dataclass
class _Pending:
    """Where `options_from` options go in a command, built on first use."""

    config: Any
    kw: dict[str, Any]

    def build(self) -> list[click.Option]:
        return config_options(self.config, **self.kw)

    @property
    def key(self) -> str | None:
        """Its name in `help_options` (a config given as a class has none)."""
        if not isinstance(self.config, str):
            return None
        try:
            return f"{self.config} {json.dumps(self.kw, sort_keys=True)}"
        except TypeError:  # a registry given as an object: read, not kept
            return None

    def __getattr__(self, name: str) -> Any:  # click reading a parameter of a plain Command
        raise AttributeError(
            f"{name}: options_from needs its command declared with cls=ConfigCommand"
        )


def options_from(config: Any, **kw: Any) -> Callable[[FC], FC]:
    """Decorator: the options of `config_options(config, **kw)`, at this place among the
    command's options. The command must be a `ConfigCommand` (`cls=ConfigCommand`); the
    callback receives every option as a keyword named after its field."""

    def decorator(f: FC) -> FC:
        if not hasattr(f, "__click_params__"):
            f.__click_params__ = []  # type: ignore[attr-defined]
        f.__click_params__.append(_Pending(config, kw))  # type: ignore[attr-defined]
        return f

    return decorator


class ConfigCommand(click.Command):
    """A command whose `options_from` options are built the first time click reads its
    parameters (help, parsing, completion), not when the command is defined.

    `before_options(ctx)`, when given, runs first: a check that must not wait for the
    options, which load their config's module (Beam, for `process`: seconds). Its context
    holds the options given in code parsed, the global ones among them (`--store` may
    follow the command: the check once looked at the default store, and refused a run
    for another run on that one), the config's left unparsed. Not run for help, which
    changes nothing, nor where those options do not parse (the whole parse says why)."""

    def __init__(
        self, *args: Any, before_options: Callable[[click.Context], None] | None = None, **kw: Any
    ) -> None:
        super().__init__(*args, **kw)
        self.before_options = before_options
        self.built: list[_Pending] = []
        """The `options_from` parts whose options were built (`help_snapshot` reads them)."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        names = parent.help_option_names if parent is not None else ["--help"]
        if any(a in names for a in args):
            self._help(info_name, args, parent, **extra)
        elif self.before_options is not None and parent is not None:
            light = self._light_context(info_name, args, parent)
            if light is not None:
                self.before_options(light)
        return super().make_context(info_name, args, parent, **extra)

    def _help(
        self, info_name: str | None, args: list[str], parent: click.Context | None, **extra: Any
    ) -> None:
        """Help asked for: printed with the options `help_options` has (click exits);
        nothing when it lacks one of them, or when `--help` was an option's value or the
        arguments do not parse: the caller parses them with the options themselves (a
        usage error is said as they say it)."""
        shown = self._shown_params()
        if shown is None:
            return
        live, self._params = self._params, shown
        try:
            super().make_context(info_name, list(args), parent, **extra)
        except click.ClickException:
            pass
        finally:
            self._params = live

    def _shown_params(self) -> list[click.Parameter] | None:
        """The parameters as `help_options` has the configs' and registries' parts of
        them (no config module loaded), or None when it lacks one."""
        kept = _help_snapshot()
        registries = kept.get("registries", {})
        shown: list[click.Parameter] = []
        for p in self._params:
            if isinstance(p, _Pending):
                specs = kept.get("options", {}).get(p.key)
                if specs is None:
                    return None
                shown.extend(make_option(spec, registries) for spec in specs)
            elif isinstance(p.type, RegistryChoice) and isinstance(p.type.ref, str):
                if p.type.ref not in registries:
                    return None
                known = copy.copy(p)
                known.type = p.type.named(registries[p.type.ref])
                shown.append(known)
            else:
                shown.append(p)
        return shown

    def _light_context(
        self, info_name: str | None, args: list[str], parent: click.Context
    ) -> click.Context | None:
        """The command's context with only the options given in code parsed (their
        callbacks run as the whole parse runs them again: the global options' are alike
        for one value), the config's passed over as unknown arguments."""
        light = click.Command(
            self.name,
            params=[p for p in self._params if not isinstance(p, _Pending)],
            context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
            add_help_option=False,
        )
        try:
            return light.make_context(info_name, list(args), parent=parent)
        except click.ClickException:
            return None

    @property  # type: ignore[override]
    def params(self) -> list[click.Parameter]:
        if any(isinstance(p, _Pending) for p in self._params):
            self.built += [p for p in self._params if isinstance(p, _Pending)]
            self._params = [
                o for p in self._params for o in (p.build() if isinstance(p, _Pending) else [p])
            ]
        return self._params

    @params.setter
    def params(self, value: list[click.Parameter]) -> None:
        self._params = value


HELP_OPTIONS = Path(__file__).with_name("help_options.py")
"""Where `write_help_snapshot` keeps the options of the CLI's configs, for `--help`."""


def _help_snapshot() -> dict[str, Any]:
    """`help_options.SNAPSHOT`; empty (help reads the configs) when it is not there."""
    try:
        from . import help_options
    except ImportError:
        return {}
    return help_options.SNAPSHOT


def _config_parts(command: click.Command) -> Iterator[Any]:
    """The `_Pending` options and registry choices of `command` and those under it."""
    if isinstance(command, ConfigCommand):
        for p in (*command._params, *command.built):
            if isinstance(p, _Pending) or isinstance(getattr(p, "type", None), RegistryChoice):
                yield p
    for sub in getattr(command, "commands", {}).values():
        yield from _config_parts(sub)


def help_snapshot() -> dict[str, Any]:
    """What `--help` of the CLI's config commands shows of their configs and registries,
    read from them (each config's module loaded), as `help_options` keeps it."""
    from worldtrace.cli import cli

    options: dict[str, Any] = {}
    refs: list[Any] = []  # a registry given as its names (not "module:attr") is read as it is
    for p in _config_parts(cli):
        if isinstance(p, _Pending):
            if p.key is not None:
                options[p.key] = option_specs(p.config, **p.kw)
                refs += [s["type"]["registry"] for s in options[p.key] if "registry" in s["type"]]
        else:
            refs.append(p.type.ref)
    registries = {ref: list(RegistryChoice(ref).choices) for ref in refs if isinstance(ref, str)}
    return json.loads(json.dumps({"options": options, "registries": registries}))


def write_help_snapshot(path: Path = HELP_OPTIONS) -> None:
    """Write `help_options` from the configs (after a config field or registry changed)."""
    text = json.dumps(help_snapshot(), indent=1, sort_keys=True)
    if '"""' in text:
        raise ValueError('a help text holds """: help_options.py cannot quote it')
    path.write_text(
        '"""The options `--help` shows of the CLI\'s configs and registries, as they were\n'
        "when `python -m worldtrace.options` wrote this file (generated: do not edit; a test\n"
        'checks it against the configs). Help reads them here, loading no config module."""\n'
        "\n"
        "import json\n"
        "\n"
        f'SNAPSHOT = json.loads(\n    r"""\n{text}\n"""\n)\n'
    )


def typed_options(ctx: click.Context) -> list[click.Parameter]:
    """The command's options the user typed, not left at their defaults: what a refusal
    may name (export), what wins over a `--config` file (process). Not the global ones
    (`--store`, `--create`), which every command takes before or after its name: `export
    --verify DIR --store S` was refused as an option beside `--verify`."""
    from click.core import ParameterSource

    from worldtrace.commands import CREATE_KEY, STORE_KEY

    return [
        p
        for p in ctx.command.params
        if p.name not in (STORE_KEY, CREATE_KEY)
        and ctx.get_parameter_source(p.name) is ParameterSource.COMMANDLINE
    ]


def option_error(exc: Exception) -> click.UsageError:
    """A ConfigError from parsing `options_from` values, as a usage error naming each
    option as typed (`--concurrency: ...`, not the config field `concurrency: ...`)."""
    problems = getattr(exc, "problems", None)
    if not problems:
        return click.UsageError(str(exc))
    lines = [
        f"--{p.path[0].replace('_', '-')}: {p.message}"
        if len(p.path) == 1 and isinstance(p.path[0], str)
        else str(p)
        for p in problems
    ]
    return click.UsageError("\n".join(lines))


if __name__ == "__main__":
    from worldtrace.options import write_help_snapshot as _write  # the package's module

    _write()
