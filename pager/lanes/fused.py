"""Score fusion as columns: every candidate's score is computed at once (in the compiled kernel,
``lanes/_fuse.c``, or its numpy reference ``_fuse_numpy``), and its ``Fused`` record (the lane hits
and completed scores a report shows) is built only when something reads it.

A page fault fuses ~100 candidates and shows ~8: building a record with a dict of ``LaneHit`` for
each of the 100 was most of fusion's cost. ``FusedOrder`` is a ``Sequence[Fused]`` in fused order,
so code that iterates it sees exactly the list ``fusion.fuse_scores`` returns; the packer reads its
label and score columns instead and asks for records one by one.

The arithmetic is the reference's (``fusion.fuse_scores``) operation for operation, in the same
order, on float64: numpy's elementwise ``-``, ``*``, ``/`` and ``+`` round exactly like Python's
floats, and adding 0.0 where a lane has nothing changes no total, so scores are bit-identical. The
kernel does the same double operations in the same order (no fused multiply-add). Side by side
(benchmarks/results/fusion_before_after.md): ``fuse_order`` 117 -> 35 us on 100k page faults, the
whole retrieve 1.020 -> 0.913 ms p50 at 100k and 2.377 -> 2.255 at 1M.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import overload

import numpy as np
import numpy.typing as npt

from mempager.lanes import _fuse
from mempager.types import LaneHit

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]

# A key of ``completions`` (not a lane): the candidates the semantic lane has no vector for yet.
UNEMBEDDED = "unembedded"


@dataclass(frozen=True, slots=True)
class Fused:
    label: int
    score: float
    hits: Mapping[str, LaneHit]  # the lanes whose top list held this memory
    completed: Mapping[str, float] = field(default_factory=dict)  # raw scores looked up for the rest


class FusedOrder(Sequence[Fused]):
    """Candidates best first: label and score columns, and each ``Fused`` built on first read.

    ``labels``/``scores`` are per candidate (any order); ``order`` lists candidate positions best
    first; ``hit[lane][c]`` says whether ``lane``'s top list held candidate ``c``.
    """

    __slots__ = ("_labels", "_scores", "_order", "_make", "_hit", "_cache")

    def __init__(
        self,
        labels: Ints,
        scores: Floats,
        order: Ints,
        make: Callable[[int], Fused],
        hit: Mapping[str, Bools],
        cache: dict[int, Fused] | None = None,
    ) -> None:
        self._labels, self._scores, self._order = labels, scores, order
        self._make, self._hit = make, hit
        self._cache: dict[int, Fused] = {} if cache is None else cache  # shared by reorderings

    @classmethod
    def of(cls, fused: Sequence[Fused]) -> FusedOrder:
        """``fused`` as columns (itself when it already is); any sequence of ``Fused`` will do."""
        if isinstance(fused, FusedOrder):
            return fused
        items = list(fused)
        lanes = {lane for f in items for lane in f.hits}
        return cls(
            np.fromiter((f.label for f in items), np.int64, len(items)),
            np.fromiter((f.score for f in items), np.float64, len(items)),
            np.arange(len(items), dtype=np.int64),
            items.__getitem__,
            {lane: np.fromiter((lane in f.hits for f in items), bool, len(items)) for lane in lanes},
            dict(enumerate(items)),
        )

    def __len__(self) -> int:
        return len(self._order)

    @overload
    def __getitem__(self, index: int) -> Fused: ...

    @overload
    def __getitem__(self, index: slice) -> FusedOrder: ...

    def __getitem__(self, index: int | slice) -> Fused | FusedOrder:
        if isinstance(index, slice):
            return self._with(self._order[index])
        c = int(self._order[index])
        found = self._cache.get(c)
        if found is None:
            found = self._cache[c] = self._make(c)
        return found

    def __iter__(self) -> Iterator[Fused]:
        for i in range(len(self._order)):
            yield self[i]

    def labels(self) -> list[int]:
        """Labels best first."""
        out: list[int] = self._labels[self._order].tolist()
        return out

    def label_array(self) -> Ints:
        """Labels best first, as an array."""
        return self._labels[self._order]

    def scores(self) -> list[float]:
        """Fused scores best first."""
        out: list[float] = self._scores[self._order].tolist()
        return out

    def records(self) -> list[Fused]:
        """Every record, best first (built now where not built yet)."""
        cache, make, out = self._cache, self._make, []
        for c in self._order.tolist():
            found = cache.get(c)
            if found is None:
                found = cache[c] = make(c)
            out.append(found)
        return out

    def hit_by(self, lane: str) -> Bools:
        """Best first: whether ``lane``'s top list held each candidate."""
        hit = self._hit.get(lane)
        return np.zeros(len(self._order), bool) if hit is None else hit[self._order]

    def only_hit_by(self, lane: str) -> Bools:
        """Best first: whether ``lane`` and no other lane's top list held each candidate."""
        others = [hit for name, hit in self._hit.items() if name != lane]
        alone = self.hit_by(lane)
        for hit in others:
            alone = alone & ~hit[self._order]
        return alone

    def reordered(self, positions: Ints) -> FusedOrder:
        """The candidates at ``positions`` (of this order), in that order."""
        return self._with(self._order[positions])

    def _with(self, order: Ints) -> FusedOrder:
        return FusedOrder(self._labels, self._scores, order, self._make, self._hit, self._cache)


def fuse_order(
    lanes: Mapping[str, Sequence[tuple[int, float]]],
    completions: Mapping[str, Mapping[int, float]],
    weights: Mapping[str, float],
    semantic_floor: float,
) -> FusedOrder:
    """``fusion.fuse_scores`` (see its docstring for the scoring), as a lazily built ``FusedOrder``.

    The arithmetic runs in the compiled kernel (``lanes/_fuse.c``: the same numbers as
    ``_fuse_numpy``, bit for bit); input the kernel does not take (a label that is not an ``int``,
    a hit that is not a tuple, a NaN score) goes through ``_fuse_numpy``, which answers or fails as
    it always has.
    """
    names = sorted(lanes)
    unembedded = _as_dict(completions.get(UNEMBEDDED))
    imputing = unembedded is not None and "semantic" in lanes and "lexical" in lanes
    imputing = imputing and weights.get("semantic", 0.0) > 0
    try:
        got = _fuse.fuse(
            [_as_list(lanes[lane]) for lane in names],
            [_as_dict(completions.get(lane)) for lane in names],
            [float(weights.get(lane, 0.0)) for lane in names],
            names.index("semantic") if "semantic" in lanes else -1,
            float(semantic_floor),
            names.index("lexical") if "lexical" in lanes else -1,
            unembedded if imputing else None,
            float(weights["semantic"]) if imputing else 0.0,
        )
    except (TypeError, OverflowError):
        got = None
    if got is None:
        return _fuse_numpy(lanes, completions, weights, semantic_floor)
    labels_b, totals_b, order_b, ranks_b, values_b, present_b = got
    labels = np.frombuffer(labels_b, np.int64)
    totals = np.frombuffer(totals_b, np.float64)
    m = len(labels)
    ranks = np.frombuffer(ranks_b, np.int64).reshape(len(names), m)
    values = np.frombuffer(values_b, np.float64).reshape(len(names), m)
    present = np.frombuffer(present_b, np.bool_).reshape(len(names), m)
    hit = ranks > 0
    make = _Records(names, labels, totals, ranks, values, present)
    return FusedOrder(labels, totals, np.frombuffer(order_b, np.int64), make, dict(zip(names, hit, strict=True)))


def _as_list(hits: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
    """A lane's hits as the kernel takes them: a list (the lanes' own answers already are)."""
    return hits if isinstance(hits, list) else list(hits)


def _as_dict(scores: Mapping[int, float] | None) -> dict[int, float] | None:
    """A lane's completed scores as the kernel takes them: a dict, or None for none."""
    if not scores:
        return None
    return scores if isinstance(scores, dict) else dict(scores)


def _fuse_numpy(
    lanes: Mapping[str, Sequence[tuple[int, float]]],
    completions: Mapping[str, Mapping[int, float]],
    weights: Mapping[str, float],
    semantic_floor: float,
) -> FusedOrder:
    """``fuse_order`` in numpy: the kernel's reference, and the path for input the kernel does not take."""
    names = sorted(lanes)
    position: dict[int, int] = {}  # label -> candidate, in first-seen order
    lane_cands: list[Ints] = []
    lane_ranks: list[Ints] = []
    lane_scores: list[Floats] = []
    place = position.setdefault  # bound once: this loop runs for every hit of every lane
    for lane in names:
        hits = lanes[lane]
        labels_of, scores_of = zip(*hits, strict=True) if hits else ((), ())  # every hit is a pair
        cands = [place(label, len(position)) for label in labels_of]
        scores = [float(score) for score in scores_of]
        if len(set(cands)) == len(cands):
            ranks = np.arange(1, len(hits) + 1, dtype=np.int64)
        else:  # a lane that reports a label twice counts it once, at its best rank
            first = sorted({c: i for i, c in reversed(list(enumerate(cands)))}.values())
            cands, scores = [cands[i] for i in first], [scores[i] for i in first]
            ranks = np.array(first, dtype=np.int64) + 1
        lane_cands.append(np.array(cands, dtype=np.int64))
        lane_scores.append(np.array(scores, dtype=np.float64))
        lane_ranks.append(ranks)
    m = len(position)
    labels = np.fromiter(position, np.int64, m)
    totals = np.zeros(m, np.float64)
    values: list[Floats] = []  # per lane: raw score of each candidate (hit, else completed) ...
    present: list[Bools] = []  # ... where there is one
    best: list[float] = []  # per lane: the best raw score, over completed non-candidates too
    hit = {lane: _mask(m, lane_cands[j]) for j, lane in enumerate(names)}
    for j, lane in enumerate(names):
        at, own = lane_cands[j], lane_scores[j]
        vals, completed = np.zeros(m, np.float64), completions.get(lane)
        if completed:
            has = hit[lane].copy()
            outside = _complete(vals, has, completed, position)
        else:  # only the lane's own hits (the prior, speaker, time lanes): its own short arrays suffice
            has, outside = hit[lane], []
        vals[at] = own  # a lane's own score wins over a completed one
        if completed:
            tops = [float(vals[has].max())] if len(at) or has.any() else []
        else:
            tops = [float(own.max())] if len(at) else []
        top = max(tops + outside, default=0.0)  # over every score the lane has, as the reference
        values.append(vals)
        present.append(has)
        best.append(top)
        weight = weights.get(lane, 0.0)
        floor, span = (semantic_floor, 1.0 - semantic_floor) if lane == "semantic" else (0.0, top)
        if weight <= 0 or span <= 0:
            continue
        factor = weight / span
        if completed:
            scored = has & (vals > floor)
            totals[scored] += (vals[scored] - floor) * factor
        else:  # the same sums, element by element, over the lane's own hits (distinct candidates)
            keep = own > floor
            totals[at[keep]] += (own[keep] - floor) * factor
    _impute_unembedded(totals, names, values, present, best, completions.get(UNEMBEDDED, {}), position, weights)
    order = np.lexsort((labels, -totals)).astype(np.int64)
    rank_rows = [_scatter(m, cands, rank) for cands, rank in zip(lane_cands, lane_ranks, strict=True)]
    make = _Records(names, labels, totals, rank_rows, values, present)
    return FusedOrder(labels, totals, order, make, hit)


class _Records:
    """Builds the ``Fused`` record of a candidate from fusion's columns (as lists: indexing a list
    is ~10x cheaper than reading a numpy scalar, and a report reads ~100 records)."""

    __slots__ = ("_columns", "_lists")

    def __init__(
        self,
        names: Sequence[str],
        labels: Ints,
        totals: Floats,
        ranks: Sequence[Ints] | Ints,  # per lane (a list, or a matrix's rows): each candidate's rank there, 0 if none
        values: Sequence[Floats] | Floats,  # per lane: each candidate's raw score (hit, else completed) ...
        present: Sequence[Bools] | Bools,  # ... where there is one
    ) -> None:
        self._columns = (names, labels, totals, ranks, values, present)
        self._lists: tuple[list[int], list[float], list[tuple[str, list[int], list[float], list[bool]]]] | None = None

    def __call__(self, c: int) -> Fused:
        if self._lists is None:
            names, labels, totals, ranks, values, present = self._columns
            lanes = [
                (n, r.tolist(), v.tolist(), p.tolist())
                for n, r, v, p in zip(names, ranks, values, present, strict=True)
            ]
            self._lists = (labels.tolist(), totals.tolist(), lanes)
        labels_l, totals_l, lanes_l = self._lists
        found: dict[str, LaneHit] = {}
        extra: dict[str, float] = {}
        for lane, rank, value, has in lanes_l:
            if rank[c]:
                found[lane] = LaneHit(lane, rank[c], value[c])
            elif has[c]:
                extra[lane] = value[c]
        return Fused(labels_l[c], totals_l[c], found, extra)


def _complete(vals: Floats, has: Bools, completed: Mapping[int, float], position: Mapping[int, int]) -> list[float]:
    """Fill ``vals``/``has`` with a lane's completed scores; returns the best completed score of a
    label that is no candidate (it still sets the lane's scale), or nothing."""
    if not completed:
        return []
    at = position.get
    where = np.array([at(label, -1) for label in completed], np.int64)
    got = np.fromiter(completed.values(), np.float64, len(completed))
    known = where >= 0
    vals[where[known]] = got[known]
    has[where[known]] = True
    return [] if known.all() else [float(got[~known].max())]


def _impute_unembedded(
    totals: Floats,
    names: Sequence[str],
    values: Sequence[Floats],
    present: Sequence[Bools],
    best: Sequence[float],
    unembedded: Mapping[int, float],
    position: Mapping[int, int],
    weights: Mapping[str, float],
) -> None:
    """A candidate without a vector: its semantic share is its normalised lexical score."""
    if not unembedded or "semantic" not in names or "lexical" not in names or weights.get("semantic", 0.0) <= 0:
        return
    j = names.index("lexical")
    if best[j] <= 0:
        return
    share = weights["semantic"] / best[j]
    where = np.fromiter((position.get(label, -1) for label in unembedded), np.int64, len(unembedded))
    where = where[where >= 0]
    where = where[present[j][where] & (values[j][where] > 0)]
    totals[where] += values[j][where] * share


def _mask(m: int, cands: Ints) -> Bools:
    out = np.zeros(m, bool)
    out[cands] = True
    return out


def _scatter(m: int, cands: Ints, ranks: Ints) -> Ints:
    out = np.zeros(m, np.int64)
    out[cands] = ranks
    return out
