"""Columnar score fusion (lanes.fused) gives exactly the records of the per-candidate reference."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mempager.lanes import _fuse
from mempager.lanes.fused import UNEMBEDDED, Fused, FusedOrder, _fuse_numpy, fuse_order
from mempager.lanes.fusion import fuse_scores
from mempager.types import LaneHit


def reference(
    lanes: Mapping[str, Sequence[tuple[int, float]]],
    completions: Mapping[str, Mapping[int, float]],
    weights: Mapping[str, float],
    semantic_floor: float,
) -> list[Fused]:
    """fuse_scores as it was before it went columnar, record by record."""
    hits: dict[int, dict[str, LaneHit]] = {}
    raw: dict[str, dict[int, float]] = {}
    for lane in sorted(lanes):
        values = dict(completions.get(lane, {}))
        for rank, (label, score) in enumerate(lanes[lane], start=1):
            found = hits.get(label)
            if found is None:
                found = hits[label] = {}
            if lane not in found:
                found[lane] = LaneHit(lane=lane, rank=rank, score=float(score))
                values[label] = float(score)
        raw[lane] = values
    totals = dict.fromkeys(hits, 0.0)
    for lane, values in raw.items():
        weight = weights.get(lane, 0.0)
        floor, span = (
            (semantic_floor, 1.0 - semantic_floor) if lane == "semantic" else (0.0, max(values.values(), default=0.0))
        )
        if weight <= 0 or span <= 0:
            continue
        factor = weight / span
        for label, value in values.items():
            if value > floor and label in totals:
                totals[label] += (value - floor) * factor
    unembedded = completions.get(UNEMBEDDED, {})
    lexical = raw.get("lexical", {})
    best_lexical = max(lexical.values(), default=0.0)
    if unembedded and "semantic" in lanes and best_lexical > 0 and weights.get("semantic", 0.0) > 0:
        share = weights["semantic"] / best_lexical
        for label in unembedded:
            if label in totals and lexical.get(label, 0.0) > 0:
                totals[label] += lexical[label] * share
    fused = []
    for label, found in hits.items():
        extra = {lane: values[label] for lane, values in raw.items() if lane not in found and label in values}
        fused.append(Fused(label=label, score=totals[label], hits=found, completed=extra))
    fused.sort(key=lambda f: (-f.score, f.label))
    return fused


labels = st.integers(0, 40)
scores = st.one_of(st.floats(-1, 1), st.floats(0, 30), st.sampled_from([0.0, 0.5, 1.0, 2.0]))
lane_list = st.lists(st.tuples(labels, scores), max_size=25)
names = st.sampled_from(["semantic", "lexical", "salience", "other"])


@settings(max_examples=1500, deadline=None)
@given(
    st.dictionaries(names, lane_list, max_size=4),
    st.dictionaries(
        st.sampled_from(["semantic", "lexical", "salience", UNEMBEDDED]),
        st.dictionaries(labels, scores, max_size=15),
        max_size=4,
    ),
    st.dictionaries(names, st.sampled_from([0.0, 0.2, 0.4, 0.6, 1.0, -0.5]), max_size=4),
    st.sampled_from([0.0, 0.1, 0.3, -0.2]),
)
def test_columnar_fusion_is_the_reference(lanes, completions, weights, floor) -> None:  # type: ignore[no-untyped-def]
    want = reference(lanes, completions, weights, floor)
    got = fuse_scores(lanes, completions, weights, floor)
    assert got == want  # labels, order, scores bit for bit, hits and completed scores
    assert [list(f.hits) for f in got] == [list(f.hits) for f in want]  # lanes in the same order
    order = fuse_order(lanes, completions, weights, floor)
    assert order.labels() == [f.label for f in want] and order.scores() == [f.score for f in want]
    assert list(order[2:]) == want[2:] and order.records() == want
    numpy_path = _fuse_numpy(lanes, completions, weights, floor)  # the kernel's reference, and its fallback
    assert numpy_path.records() == want and numpy_path.labels() == order.labels()
    for lane in lanes:
        assert order.hit_by(lane).tolist() == numpy_path.hit_by(lane).tolist() == [lane in f.hits for f in want]


def test_input_the_kernel_does_not_take_goes_the_numpy_way_with_the_same_answer() -> None:
    lanes = {"semantic": [(1, 0.9), (2, 0.5)], "lexical": [(3, 7.0), (1, 3.5), (3, 1.0)], "salience": [(4, 0.6)]}
    completions = {"lexical": {2: 0.5}, "semantic": {3: 0.2, 9: 0.95}, UNEMBEDDED: {4: 0.0}}
    weights = {"semantic": 0.4, "lexical": 0.6, "salience": 0.2}
    want = reference(lanes, completions, weights, 0.1)
    as_numpy = {lane: [(np.int64(label), np.float32(score)) for label, score in hits] for lane, hits in lanes.items()}
    as_lists = {lane: [[label, score] for label, score in hits] for lane, hits in lanes.items()}  # not tuples
    as_floats = {lane: [(float(label), score) for label, score in hits] for lane, hits in lanes.items()}
    for variant in (lanes, as_lists, as_floats):
        assert fuse_scores(variant, completions, weights, 0.1) == want  # type: ignore[arg-type]
    numpy_want = reference(as_numpy, completions, weights, 0.1)  # float32 scores, widened exactly
    assert fuse_scores(as_numpy, completions, weights, 0.1) == numpy_want  # type: ignore[arg-type]
    nan = {**lanes, "salience": [(4, float("nan"))]}  # a NaN score: the kernel leaves it to numpy
    got, ref = fuse_order(nan, completions, weights, 0.1), _fuse_numpy(nan, completions, weights, 0.1)
    assert got.labels() == ref.labels()


def test_the_kernel_refuses_mismatched_lanes_with_a_clear_error() -> None:
    with pytest.raises(ValueError, match="one per lane"):
        _fuse.fuse([[(1, 0.5)]], [], [1.0], -1, 0.0, -1, None, 0.0)
    with pytest.raises(TypeError, match="tuple"):
        _fuse.fuse([[[1, 0.5]]], [None], [1.0], -1, 0.0, -1, None, 0.0)
    with pytest.raises(OverflowError):
        _fuse.fuse([[(1 << 70, 0.5)]], [None], [1.0], -1, 0.0, -1, None, 0.0)


def test_a_fused_order_reorders_and_wraps_a_list() -> None:
    lanes = {"semantic": [(1, 0.9), (2, 0.5)], "lexical": [(3, 7.0), (1, 3.5)], "salience": [(4, 0.6)]}
    order = fuse_order(lanes, {"lexical": {2: 0.0}}, {"semantic": 0.4, "lexical": 0.6, "salience": 0.2}, 0.1)
    records = order.records()
    flipped = order.reordered(np.arange(len(order))[::-1].copy())
    assert flipped.records() == records[::-1]
    assert flipped.hit_by("salience").tolist() == [("salience" in f.hits) for f in records[::-1]]
    assert order.only_hit_by("salience").tolist() == [set(f.hits) == {"salience"} for f in records]
    wrapped = FusedOrder.of(records)
    assert wrapped.records() == records and wrapped.labels() == order.labels()
    assert wrapped.hit_by("semantic").tolist() == order.hit_by("semantic").tolist()
    assert FusedOrder.of(order) is order
