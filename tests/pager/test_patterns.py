from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mempager import InvalidInput, PatternSpec
from mempager.patterns import PREFIX

words = st.text(min_size=0, max_size=40)
lists = st.lists(st.text(max_size=30), max_size=5).map(tuple)


@given(
    name=st.text(min_size=1, max_size=40).filter(str.strip),
    trigger=words,
    pre=lists,
    steps=lists,
    gotchas=lists,
    done=lists,
)
def test_spec_round_trips_through_text(name, trigger, pre, steps, gotchas, done) -> None:  # type: ignore[no-untyped-def]
    spec = PatternSpec(
        name=name, trigger=trigger, preconditions=pre, steps=steps, gotchas=gotchas, success_criteria=done
    )
    encoded = spec.encode()
    assert encoded.startswith(PREFIX)
    assert PatternSpec.decode(encoded) == spec


def test_legacy_plain_statement_decodes_as_one_step() -> None:
    spec = PatternSpec.decode("restart the worker, then clear the cache")
    assert spec.steps == ("restart the worker, then clear the cache",)


def test_dedup_key_prefers_name_then_trigger_then_steps() -> None:
    a = PatternSpec(name="Deploy", trigger="x", steps=["1"])
    b = PatternSpec(name="deploy ", trigger="y", steps=["2"])
    assert a.dedup_key() == b.dedup_key()
    c = PatternSpec(trigger="When CI fails", steps=["1"])
    d = PatternSpec(trigger="when ci fails", steps=["2"])
    assert c.dedup_key() == d.dedup_key() != a.dedup_key()
    e = PatternSpec(steps=["a", "b"])
    assert e.dedup_key() == PatternSpec(steps=["A", "b"]).dedup_key() != PatternSpec(steps=["b", "a"]).dedup_key()


def test_bad_specs_are_typed_errors() -> None:
    with pytest.raises(InvalidInput):
        PatternSpec()
    with pytest.raises(InvalidInput, match="list of strings"):
        PatternSpec(name="x", steps="do it")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        PatternSpec.decode(PREFIX + "{not json")
