"""The provider keys the 12-05 hunt added (`PROVIDER_KEYS`) cut by our output cap: a cut
tail that is one's literal start and some of its characters was kept, since
`CUT_SHAPES` knew only the older shapes (closing note of 2026-12-05, left item)."""

from __future__ import annotations

import pytest
from worldtrace.schemas.redact import Redactor
from worldtrace.schemas.redact_rules import CUT_SHAPES, PROVIDER_KEYS, example_secrets

from .test_redact_hunt_1205g import KEYS

PAD = "x" * 40
PROVIDERS = sorted({kind for kind, *_ in PROVIDER_KEYS})


def test_every_provider_kind_has_a_cut_shape_and_an_example():
    assert set(PROVIDERS) <= {kind for kind, *_ in CUT_SHAPES}
    assert set(PROVIDERS) <= set(example_secrets(0))


@pytest.mark.parametrize("kind", PROVIDERS)
def test_a_provider_key_cut_past_its_start_is_redacted_at_the_cut(kind):
    key = KEYS[kind]
    start = next(len(g) for k, _, _, gates in PROVIDER_KEYS if k == kind for g in gates)
    for n in (start + 1, start + 5, len(key) - 1):
        for before in ("export T=", '{"k": "', "cut here "):
            out, found = Redactor().cut_tail(PAD + before + key[:n])
            assert (out, found) == (PAD + before + f"<secret:{kind}>", 1), key[:n]


@pytest.mark.parametrize("seed", range(5))
def test_the_examples_of_the_provider_kinds_are_found_as_their_kind(seed):
    """`example_secrets` plants them in the recall bench and the end-to-end checks."""
    for kind in PROVIDERS:
        value, line = example_secrets(seed)[kind]
        out, n = Redactor().text(line)
        assert n >= 1 and value not in out and f"<secret:{kind}>" in out, (kind, out)


def test_a_provider_start_inside_a_word_or_without_key_characters_is_kept():
    for tail in ("mask_", "task-runner gsk_", "pip install xai-", "refsbp_ab12"):
        assert Redactor().cut_tail(PAD + tail) == (PAD + tail, 0)
