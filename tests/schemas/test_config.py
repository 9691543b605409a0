"""`schemas.config`: YAML and `key=value` overrides onto config dataclasses, every value
checked against its field's type here and its range by the config class."""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest
from worldtrace.pipelines.dedup import DedupConfig
from worldtrace.pipelines.filters import FilterConfig
from worldtrace.pipelines.process import SETTINGS, ProcessConfig
from worldtrace.schemas.config import SettingError, as_overrides, load, to_dict


@dataclass(frozen=True)
class Inner:
    ratio: float = 0.5
    count: int = 1
    flag: bool = False
    mode: Literal["a", "b"] = "a"
    label: str | None = None


@dataclass
class Outer:
    inner: Inner = field(default_factory=Inner)
    names: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    seed: int = 0


def test_values_are_read_as_their_field_types():
    cfg = load(
        Outer(),
        overrides=[
            "inner.ratio=1e-1",  # YAML 1.1 reads this as text; a number field takes it
            "inner.count=3",
            "inner.flag=yes",
            "inner.mode=b",
            "inner.label=123",  # text field: the text, not the number
            "names=[x, y]",
            "extra.k=0.8",
            "seed=7",
        ],
    )
    assert cfg.inner == Inner(ratio=0.1, count=3, flag=True, mode="b", label="123")
    assert cfg.names == ["x", "y"] and cfg.extra == {"k": 0.8} and cfg.seed == 7
    assert isinstance(load(Outer(), overrides=["inner.ratio=1"]).inner.ratio, float)
    assert load(Outer(), overrides=["inner.label=none"]).inner.label is None


@pytest.mark.parametrize(
    "override, message",
    [
        ("inner.ratio=abc", "inner.ratio=abc: expected a number"),
        ("inner.count=1.5", "inner.count=1.5: expected an integer"),
        ("inner.count=true", "inner.count=true: expected an integer"),
        ("inner.flag=maybe", "inner.flag=maybe: expected true or false"),
        ("inner.mode=c", "inner.mode=c: expected one of a, b"),
        ("names=x", "names=x: expected a list"),
        ("inner.nope=1", "inner.nope=1: unknown setting (known: inner.ratio, inner.count"),
        ("seed.x=1", "seed.x=1: seed has no sub-settings"),
        ("inner=3", "inner=3: expected its settings, e.g. inner.NAME=VALUE"),
        ("seed", "seed: expected KEY=VALUE"),
    ],
)
def test_a_value_its_field_does_not_take_names_the_key(override, message):
    with pytest.raises(SettingError) as e:
        load(Outer(), overrides=[override])
    assert str(e.value).startswith(message) and e.value.source is None


@pytest.mark.parametrize(
    "override, message",
    [
        ("dedup.threshold=7", "dedup.threshold=7: expected a number in (0, 1]"),
        ("dedup.threshold=0", "dedup.threshold=0: expected a number in (0, 1]"),
        ("dedup.threshold=nan", "dedup.threshold=nan: expected a number in (0, 1]"),
        ("dedup.num_perm=0", "dedup.num_perm=0: expected a positive integer"),
        ("dedup.shingle_words=0", "dedup.shingle_words=0: expected a positive integer"),
        ("dedup.bands=-1", "dedup.bands=-1: expected 0 (set from threshold) or more"),
        ("dedup.bands=16", "dedup.bands=16: expected rows set too"),
        ("dedup.seed=-1", "dedup.seed=-1: expected an integer in [0, 2^64)"),
        ("filters.min_turns=-5", "filters.min_turns=-5: expected an integer >= 0"),
        ("filters.retry_similarity=1.5", "filters.retry_similarity=1.5: expected a number in"),
    ],
)
def test_ranges_are_checked_by_the_config_classes(override, message):
    with pytest.raises(SettingError) as e:
        load(ProcessConfig(), overrides=[override])
    assert str(e.value) == message or str(e.value).startswith(message)
    with pytest.raises(SettingError):  # the classes check themselves, loader or not
        key, _, value = override.partition("=")
        section, name = key.split(".")
        cls = DedupConfig if section == "dedup" else FilterConfig
        cls(**{name: float(value) if "." in value or value == "nan" else int(value)})


def test_settings_across_fields_are_checked_together_in_any_order():
    """bands x rows <= num_perm: checked on the final values, not after each override."""
    for order in (
        ["dedup.bands=16", "dedup.rows=16", "dedup.num_perm=256"],
        ["dedup.num_perm=256", "dedup.rows=16", "dedup.bands=16"],
    ):
        cfg = load(ProcessConfig(), overrides=order)
        assert cfg.dedup.band_rows() == (16, 16)
    with pytest.raises(SettingError) as e:
        load(ProcessConfig(), overrides=["dedup.bands=16", "dedup.rows=16"])
    assert str(e.value) == ("dedup.rows=16: expected bands x rows (16 x 16) at most num_perm (128)")


def test_yaml_file_errors_name_the_file_and_overrides_win(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("dedup:\n  threshold: 7\nfilters: {min_turns: 3}\n")
    with pytest.raises(SettingError) as e:
        load(ProcessConfig(), f)
    assert str(e.value) == f"{f}: dedup.threshold=7: expected a number in (0, 1]"
    assert e.value.source == str(f)
    cfg = load(ProcessConfig(), f, ["dedup.threshold=0.7"])  # the override replaces it
    assert cfg.dedup.threshold == 0.7 and cfg.filters.min_turns == 3
    f.write_text("dedup: [\n")
    with pytest.raises(SettingError, match=r"c.yaml: not YAML \(line 2: "):
        load(ProcessConfig(), f)
    f.write_text("- dedup\n")
    with pytest.raises(SettingError, match="expected a mapping of settings"):
        load(ProcessConfig(), f)
    # found: a key given twice kept the last in silence (a second `dedup:` block dropped
    # the first's settings)
    f.write_text("dedup:\n  threshold: 0.8\n  threshold: 0.9\n")
    with pytest.raises(SettingError) as e:
        load(ProcessConfig(), f)
    assert str(e.value) == f"{f}: not YAML (line 3: duplicate key 'threshold' (first at line 2))"


def test_mapping_values_read_alike_from_yaml_and_overrides(tmp_path):
    """`--set policy_settings.echo_ol=0.8` and `echo_ol: 0.8` in a --config file are the
    same setting (a run compares them with the last run's)."""
    f = tmp_path / "c.yaml"
    f.write_text("policy_settings: {echo_ol: 0.8, keep: {echo: 0}}\n")
    from_file = load(ProcessConfig(), f)
    from_set = load(
        ProcessConfig(), overrides=["policy_settings.echo_ol=0.8", "policy_settings.keep.echo=0"]
    )
    assert from_file.policy_settings == from_set.policy_settings == {"echo_ol": 0.8, "keep.echo": 0}


def test_as_overrides_says_a_runs_settings_as_set_flags():
    given = ["dedup.threshold=0.7", "filters.min_turns=3", "policy_settings.echo_ol=0.8", "seed=3"]
    cfg = load(ProcessConfig(), overrides=given)
    pick = lambda c: {k: to_dict(c)[k] for k in SETTINGS}  # noqa: E731
    flags = as_overrides(pick(cfg), pick(ProcessConfig()))
    assert sorted(flags) == sorted(given)
    assert pick(load(ProcessConfig(), overrides=flags)) == pick(cfg)
    assert as_overrides(pick(ProcessConfig()), pick(ProcessConfig())) == []


def test_setting_errors_pickle():
    e = SettingError("dedup.threshold", 7, "expected a number in (0, 1]", "c.yaml")
    assert str(pickle.loads(pickle.dumps(e))) == str(e)


def test_the_later_value_of_a_key_wins():
    assert load(Outer(), overrides=["seed=1", "seed=2"]).seed == 2
    cfg = load(Outer(), overrides=["extra={a: 1}", "extra.b=2"])
    assert cfg.extra == {"a": 1, "b": 2}
    assert load(Outer(), overrides=["extra.b=2", "extra={a: 1}"]).extra == {"a": 1}
    with pytest.raises(SettingError, match=r"^extra=3: expected a mapping$"):
        load(Outer(), overrides=["extra=3", "extra.b=2"])
