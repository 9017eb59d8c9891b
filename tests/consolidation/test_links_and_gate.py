"""Associations (strength model) and the catastrophic-shrink gate, as pure functions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mempager.consolidation.associations import (
    CAP,
    DECAY,
    DIRECT,
    FLOOR,
    SESSION,
    Affect,
    as_affect,
    update_links,
)
from mempager.consolidation.schema import DEFAULT_SCHEMA, PARTNERSHIP_SCHEMA, Section
from mempager.consolidation.shrink_gate import RETAIN_SECTION, RETAIN_TOTAL, check_shrink
from mempager.errors import InvalidInput, ShrinkRefused
from mempager.protocols import AssociationLink


def test_the_constants_are_the_seeds() -> None:
    assert (DIRECT, SESSION, DECAY, CAP, FLOOR) == (1.0, 0.3, 0.9, 10.0, 0.1)
    assert (RETAIN_SECTION, RETAIN_TOTAL) == (0.5, 0.25)


def test_pattern_pairs_get_direct_and_wrap_pairs_get_session_strength() -> None:
    links, report = update_links([], [[1, 2], [3, 4]], [1, 2, 3, 4], wrap=1)
    by = {(k.a, k.b): k.strength for k in links}
    assert by[(1, 2)] == by[(3, 4)] == DIRECT
    assert by[(1, 3)] == by[(2, 4)] == SESSION and len(by) == 6
    assert report.created == 6


def test_affect_is_recorded_and_scales_the_gain() -> None:
    links, _ = update_links([], [[1, 2]], [1, 2], wrap=3, affect=Affect("curious", 1.0))
    (link,) = links
    assert (link.affect_tag, link.affect_intensity, link.last_wrap) == ("curious", 1.0, 3)
    assert link.strength == pytest.approx(1.5)
    assert as_affect({"tag": "calm", "intensity": 0.2}) == Affect("calm", 0.2) == as_affect(("calm", 0.2))
    for bad in (("x", 1.5), ("", 0.5), ("x", float("nan")), "x"):
        with pytest.raises(InvalidInput):
            as_affect(bad)


@given(st.floats(0.1, 20.0), st.integers(1, 40))
def test_property_unused_links_decay_and_vanish_below_the_floor(strength: float, wraps: int) -> None:
    links: tuple[AssociationLink, ...] = (AssociationLink(1, 2, strength, 0, None, None),)
    for n in range(wraps):
        links, _ = update_links(links, [], [], wrap=n + 1)
    expected = strength * DECAY**wraps
    if wraps and expected < FLOOR * 0.999:
        assert links == ()
    elif links:
        assert links[0].strength == pytest.approx(expected) and links[0].strength >= FLOOR * 0.999


@given(st.integers(1, 30))
def test_property_reinforced_strength_caps(wraps: int) -> None:
    links: tuple[AssociationLink, ...] = ()
    for n in range(wraps):
        links, _ = update_links(links, [[1, 2], [1, 2]], [1, 2], wrap=n + 1, affect=Affect("x", 1.0))
    assert 0 < links[0].strength <= CAP
    assert links[0].strength == pytest.approx(min(CAP, 3.0 * wraps))


def _sections(patterns: int, understanding: int, other: int) -> list[Section]:
    return [
        Section("State", "live-state", ("s" * other,)),
        Section("Patterns", "graduating", ("p" * patterns,)),
        Section("Decisions", "narrative", ()),
        Section("Context", "narrative", ()),
        Section("Understanding", "narrative-timeless", ("u" * understanding,)),
    ]


@given(st.integers(1, 400), st.integers(0, 400))
def test_property_shrink_gate_section_boundary(before: int, after: int) -> None:
    old, new = _sections(100, before, 0), _sections(100, after, 0)
    refused = after < RETAIN_SECTION * before or (after + 100) < RETAIN_TOTAL * (before + 100)
    if refused:
        with pytest.raises(ShrinkRefused, match="allow_shrink=True"):
            check_shrink(old, new, PARTNERSHIP_SCHEMA, False)
    else:
        check_shrink(old, new, PARTNERSHIP_SCHEMA, False)
    check_shrink(old, new, PARTNERSHIP_SCHEMA, True)  # the literal True always passes
    check_shrink(old, new, DEFAULT_SCHEMA, False)  # ops schemas are never gated


def test_shrink_gate_boundaries_exactly() -> None:
    check_shrink(_sections(100, 100, 0), _sections(50, 50, 0), PARTNERSHIP_SCHEMA, False)  # exactly 50% passes
    with pytest.raises(ShrinkRefused, match="'## Understanding' would keep 49 of 100"):
        check_shrink(_sections(100, 100, 0), _sections(100, 49, 0), PARTNERSHIP_SCHEMA, False)
    old, new = _sections(10, 10, 380), _sections(5, 5, 90)  # 100 of 400: exactly 25% passes
    check_shrink(old, new, PARTNERSHIP_SCHEMA, False)
    with pytest.raises(ShrinkRefused, match="whole continuity would keep 99 of 400"):
        check_shrink(old, _sections(5, 5, 89), PARTNERSHIP_SCHEMA, False)
    for not_true in (1, "yes", "True"):  # fail closed: only the literal True bypasses
        with pytest.raises(ShrinkRefused):
            check_shrink(_sections(100, 100, 0), _sections(100, 0, 0), PARTNERSHIP_SCHEMA, not_true)
