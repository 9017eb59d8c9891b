"""BM25's top k without scoring every document: exact MaxScore pruning over the postings.

Scoring all documents costs a pass over every row (a million float64s at 1M memories) whatever
the query; most queries have a rare term or two, and a document holding none of them can only
score the sum of what the other terms can give. So: take the terms from highest idf down, score
exactly every live document holding one of the terms taken so far (their full score, over all
terms), and stop once the k-th best score among them is above what a document holding only the
terms not taken could reach. Every such document then ranks below the k-th, tie included, so the
top k (ties broken by label) is exactly the full scan's.

The bound: a term's contribution to a document is ``fl(fl(tf / norm) * w)``, ``w = idf * (k1 + 1)``,
``norm = fl(fl(fl(dl * scale) + base) + tf)`` with ``scale = k1 * b / avgdl``, ``base = k1 * (1 -
b)``. Each term keeps ``ratio``, the largest ``fl(tf / norm)`` over its postings computed at a scale
``s0`` (``State.bound_ratio``/``bound_scale``; ``_AT_ZERO`` for ``s0 = 0``): rounding is monotone,
so at any scale >= ``s0`` no posting's ``fl(tf / norm)`` exceeds it and no contribution exceeds ``ub
= fl(ratio * w)``. A score is the float sum of its terms' contributions in query-term order, and a
float sum is monotone in each operand, so the float sum of ``ub`` over the terms not taken, in the
same order, bounds every unseen document. ``s0`` is set a little below the scale of the moment, so
the bound survives the small drifts of avgdl that writes cause; appending postings raises ``ratio``
to cover them (``raise_bounds``); dropping postings leaves it a valid, if looser, bound.

Scores are computed operation for operation as ``lexquery.bm25`` does (same constants, same
order, summed term by term in query order from 0.0), so they are bit-identical to the full scan's.
When the candidates grow past a fraction of the index, or the index is small, the full scan is
cheaper and is used.

Scoring a candidate looks its tf up in each query term's postings (a binary search); for the few
terms held by more than 1/64 of the documents, a byte per row (``State.tf_columns``, made on first
use, at most ``_COLUMNS`` of them, kept current by ``on_postings``) answers with one read instead.
Once all ``_COLUMNS`` are taken, a term scored ``_TAKE_OVER`` times as often as the least used
column's term takes its place: the columns follow what is asked (names, at LoCoMo scale), not
whichever common terms the first queries happened to hold.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from mempager.index.labelmap import LabelRows
from mempager.index.lexical_postings import PostingLists
from mempager.index.lexquery import idf_weights, query_ids, ranked

Floats = npt.NDArray[np.float64]
Int64s = npt.NDArray[np.int64]
# The labels whose scores a search must also give: given, or a function that gives them once the top
# k is known (so the semantic lane can search meanwhile, in another thread: lanes.retrieval).
Wanted = Sequence[int] | Callable[[], Sequence[int]]
Int32s = npt.NDArray[np.int32]
_DENSE_SHARE = 1 / 16  # candidates above this share of rows: one pass over every row is cheaper
# Below this many rows one numpy pass over every row (~2 ns a row) beats pruning's look-ups
# (~40 ns per candidate and term): measured on LoCoMo questions at 100k rows, pruning lost.
_PRUNE_FROM_ROWS = 262_144
_COLUMN_SHARE = 1 / 64  # a term in more than this share of rows gets a tf column ...
_COLUMNS = 32  # ... up to this many per index (a byte per row each)
_SATURATED = 255  # a tf column's largest value: the exact tf is then read from the postings
_TAKE_OVER = 2  # a term takes a full set's least used column once scored this many times as often
_AGE_AT = 65_536  # a term scored this often halves every count: the columns follow what is asked now
# ``bound_scale`` of a ratio computed at scale 0 (b = 0): 0 itself means "not computed yet", and
# any scale a search can have (>= 0) is at or above it. Without it, b = 0 recomputed every bound
# on every search (a pass over each query term's postings: ~0.75 ms a query at 1M memories).
_AT_ZERO = -1.0


class Postings(Protocol):
    """What the search reads of the lexical index's state (``index.lexical.State``); it also keeps
    the per-term bounds (``bound_*``) up to date."""

    bound_base: float
    tf_columns: dict[int, npt.NDArray[np.uint8]]
    tf_uses: dict[int, int]

    @property
    def bound_ratio(self) -> Floats: ...
    @property
    def bound_scale(self) -> Floats: ...

    @property
    def ids(self) -> Mapping[str, int]: ...
    @property
    def post(self) -> PostingLists: ...
    @property
    def npost(self) -> Int64s: ...
    @property
    def df(self) -> Int64s: ...
    @property
    def alive(self) -> npt.NDArray[np.bool_]: ...
    @property
    def doclen(self) -> Floats: ...
    @property
    def row_label(self) -> Int64s: ...
    @property
    def label_row(self) -> LabelRows: ...
    @property
    def total_len(self) -> int: ...
    @property
    def nrows(self) -> int: ...

    def scores(self, terms: Sequence[str], k1: float, b: float) -> Floats: ...


def resolve(wanted: Wanted) -> list[int]:
    """The labels ``wanted`` names (called once, when they are needed)."""
    return [int(x) for x in (wanted() if callable(wanted) else wanted)]


def search_scored(
    state: Postings,
    terms: Sequence[str],
    k: int,
    wanted: Wanted,
    k1: float,
    b: float,
    exclude: Int64s | None = None,
) -> tuple[list[tuple[int, float]], dict[int, float]]:
    """The top ``k`` (label, BM25) best first, ties to the lower label, and the BM25 of each label
    in ``wanted`` (0.0 when absent or unmatched); the same numbers as a full scan. A function for
    ``wanted`` is called once the top ``k`` is known. Labels in ``exclude`` are left out of the
    top ``k`` (not of ``wanted``): a caller that scores them its own way needs the best k others."""
    skip = _rows_of(state, exclude)
    ids = query_ids(state.ids, state.df, terms)
    if not ids:
        return [], dict.fromkeys(resolve(wanted), 0.0)

    def of(row_scores: Floats) -> dict[int, float]:
        want = np.array(resolve(wanted), np.int64)
        at = state.label_row.rows_of(want)  # -1: no live row
        return dict(zip(want.tolist(), np.where(at >= 0, row_scores[np.maximum(at, 0)], 0.0).tolist(), strict=True))

    if state.nrows < _PRUNE_FROM_ROWS:  # one pass over every row answers both
        ranked_all, every = _full_scan(state, terms, k, k1, b, skip)
        return ranked_all, of(every)
    n_docs, total_len = len(state.label_row), state.total_len
    dfs = state.df[ids].astype(np.float64)
    weights = idf_weights(n_docs, dfs, k1)
    postings = [state.post[t][:, :n] for t, n in zip(ids, state.npost[ids].tolist(), strict=True)]  # rows; tfs
    scale, base = k1 * b * n_docs / total_len, k1 * (1.0 - b)
    scorer = _Scorer(postings, weights, state.doclen, scale, base, [_column(state, t) for t in ids])
    top: list[tuple[int, float]] = []
    if k > 0:
        bounds = _bounds(state, ids, postings, scale, base) * weights
        top, full = _top(state, scorer, bounds, k, terms, k1, b, skip)
        if full is not None:  # the pruning gave way to a full pass: it has every score
            return top, of(full)
    want = np.array(resolve(wanted), np.int64)
    at = state.label_row.rows_of(want)  # -1: no live row
    held = at >= 0
    known = np.unique(at[held])
    got = np.zeros(len(at), np.float64)
    got[held] = scorer.score(known)[np.searchsorted(known, at[held])]
    return top, dict(zip(want.tolist(), got.tolist(), strict=True))


class _Scorer:
    """Exact BM25 of chosen rows, term by term in query order (``lexquery.bm25``'s arithmetic)."""

    def __init__(
        self,
        postings: Sequence[Int32s],
        weights: Floats,
        doclen: Floats,
        scale: float,
        base: float,
        columns: Sequence[npt.NDArray[np.uint8] | None],
    ) -> None:
        self.postings, self.weights, self.doclen = postings, weights, doclen
        self.scale, self.base, self.columns = scale, base, columns

    def contribution(self, term: int, rows: Int64s, tf: Floats) -> Floats:
        """Term ``term``'s part of the BM25 of ``rows``, which hold it ``tf`` times (``tf`` is
        overwritten): the very operations ``score`` does for it."""
        norm = self.doclen[rows]
        norm *= self.scale
        norm += self.base
        norm += tf
        np.divide(tf, norm, out=tf)
        tf *= self.weights[term]
        return tf

    def score(
        self, rows: Int64s, own: int = -1, own_part: Floats | None = None, absent: frozenset[int] = frozenset()
    ) -> Floats:
        """BM25 of ``rows`` (ascending, distinct: the look-ups rely on both). ``own``: a term every
        row holds, whose part (``contribution``) is ``own_part``; ``absent``: terms no row holds.
        Neither is looked up; the sum is the same, term by term in query order."""
        out = np.zeros(len(rows), np.float64)
        if not len(rows):
            return out
        needles = rows.astype(np.int32)  # the postings' own type: searchsorted would copy them otherwise
        for term, (post, weight, column) in enumerate(zip(self.postings, self.weights, self.columns, strict=True)):
            if term == own and own_part is not None:
                out += own_part
                continue
            if term in absent:
                continue
            if column is None:
                hit, tf = _lookup(post, needles)
            else:
                small = column[rows]
                hit = np.flatnonzero(small)
                tf = small[hit].astype(np.float64)
                big = np.flatnonzero(tf == _SATURATED)
                if len(big):
                    tf[big] = _lookup(post, needles[hit[big]])[1]
            if not len(hit):
                continue
            norm = self.doclen[rows[hit]]
            norm *= self.scale
            norm += self.base
            norm += tf
            np.divide(tf, norm, out=tf)
            tf *= weight
            out[hit] += tf
        return out


def _lookup(post: Int32s, needles: npt.NDArray[np.int32]) -> tuple[npt.NDArray[np.intp], Floats]:
    """Positions of the ``needles`` (rows, ascending) a term's postings hold, and their tfs: the
    shorter of the two lists is binary-searched in the longer, in ascending order."""
    held = post[0]
    if len(held) < len(needles):
        at = np.minimum(needles.searchsorted(held), len(needles) - 1)
        found = np.flatnonzero(needles[at] == held)
        return at[found], post[1, found].astype(np.float64)
    at = np.minimum(held.searchsorted(needles), len(held) - 1)
    hit = np.flatnonzero(held[at] == needles)
    return hit, post[1, at[hit]].astype(np.float64)


def _column(state: Postings, term: int) -> npt.NDArray[np.uint8] | None:
    """The term's tf column (made now if the term is common enough and there is room, or it is
    asked ``_TAKE_OVER`` times as often as the least asked term holding one), or None."""
    column = state.tf_columns.get(term)
    if column is None:
        n = int(state.npost[term])
        if n <= _COLUMN_SHARE * state.nrows:
            return None
        uses = _used(state, term)
        if len(state.tf_columns) >= _COLUMNS:
            least = min(state.tf_columns, key=lambda t: state.tf_uses.get(t, 0))
            if uses < _TAKE_OVER * max(state.tf_uses.get(least, 0), 1):
                return None
            del state.tf_columns[least]  # its postings still answer; its column comes back if asked again
        column = np.zeros(state.nrows + state.nrows // 8 + 1024, np.uint8)
        post = state.post[term]
        column[post[0, :n]] = np.minimum(post[1, :n], _SATURATED)
        state.tf_columns[term] = column
    else:
        _used(state, term)
        if len(column) < state.nrows:  # rows added since, none of them holding the term
            column = state.tf_columns[term] = _grown(column, state.nrows)
    return column


def _used(state: Postings, term: int) -> int:
    """Count one more scoring of a common term; its count (all counts halve once one reaches ``_AGE_AT``)."""
    uses = state.tf_uses[term] = state.tf_uses.get(term, 0) + 1
    if uses >= _AGE_AT:
        for t, n in list(state.tf_uses.items()):
            state.tf_uses[t] = n // 2
        uses = state.tf_uses[term]
    return uses


def _grown(column: npt.NDArray[np.uint8], need: int) -> npt.NDArray[np.uint8]:
    out = np.zeros(max(need, 2 * len(column)), np.uint8)
    out[: len(column)] = column
    return out


def on_postings(state: Postings, tids: Int64s, rows: Int64s, tf: Int64s) -> None:
    """New postings ``(tids[i], rows[i], tf[i])`` (rows' lengths already set): written into their
    terms' tf columns, and their terms' known ratios raised to cover them."""
    if state.tf_columns:
        for term in np.unique(tids[np.isin(tids, list(state.tf_columns))]).tolist():
            mine = tids == term
            column = state.tf_columns[term]
            if len(column) <= int(rows[mine].max()):
                column = state.tf_columns[term] = _grown(column, int(rows[mine].max()) + 1)
            column[rows[mine]] = np.minimum(tf[mine], _SATURATED)
    scale = state.bound_scale[tids]
    known = np.flatnonzero(scale != 0.0)
    if not len(known):
        return
    tf_known = tf[known].astype(np.float64)
    norm = state.doclen[rows[known]]
    norm *= np.maximum(scale[known], 0.0)  # _AT_ZERO: computed at scale 0
    norm += state.bound_base
    norm += tf_known
    np.maximum.at(state.bound_ratio, tids[known], tf_known / norm)


def _bounds(state: Postings, ids: Sequence[int], postings: Sequence[Int32s], scale: float, base: float) -> Floats:
    """Each query term's ratio (see the module docstring), computed where unknown or too tight."""
    if state.bound_base != base:  # ratios of other BM25 parameters: start again
        state.bound_scale[:] = 0.0
        state.bound_base = base
    out = np.empty(len(ids), np.float64)
    for j, t in enumerate(ids):
        known = state.bound_scale[t]
        if known == 0.0 or known > scale:
            low = scale * (1.0 - 1e-3)  # headroom: valid until avgdl grows by 0.1%
            tf = postings[j][1].astype(np.float64)
            if low > 0.0:
                norm = state.doclen[postings[j][0]]
                norm *= low
                norm += base
                norm += tf
            else:  # b = 0 (the default): lengths play no part, the bound holds at every scale
                norm = tf + base
            state.bound_ratio[t] = float((tf / norm).max())
            state.bound_scale[t] = low if low > 0.0 else _AT_ZERO
        out[j] = state.bound_ratio[t]
    return out


def _top(
    state: Postings,
    scorer: _Scorer,
    bounds: Floats,
    k: int,
    terms: Sequence[str],
    k1: float,
    b: float,
    skip: Int64s,
) -> tuple[list[tuple[int, float]], Floats | None]:
    """The top ``k`` of the rows not in ``skip`` (ascending); and every row's score when it took a
    full pass instead (else None).

    A row first met in term ``j``'s postings holds none of the terms taken before ``j`` (it would
    have been met there): those are not looked up, and its part for ``j`` is read from ``j``'s own
    postings, so only the terms not taken yet are looked up. The ``skip`` rows start as met, scored
    -inf: never looked up, never ranked, never counted in the k-th best.
    """
    ub = bounds.tolist()
    order = sorted(range(len(ub)), key=lambda j: -ub[j])  # the most a term can give first
    limit = _DENSE_SHARE * state.nrows + len(skip)
    cand, scores = skip, np.full(len(skip), -np.inf)
    for taken, j in enumerate(order, 1):
        post = scorer.postings[j]
        live = state.alive[post[0]]
        new, tf = post[0][live].astype(np.int64), post[1][live].astype(np.float64)
        if len(cand):
            fresh = ~_sorted_has(cand, new)
            new, tf = new[fresh], tf[fresh]
        if len(cand) + len(new) > limit:  # one pass over every row is cheaper than this many look-ups
            return _full_scan(state, terms, k, k1, b, skip)
        part = scorer.contribution(j, new, tf)
        cand, scores = _merge(cand, scores, new, scorer.score(new, j, part, frozenset(order[: taken - 1])))
        # Every document not yet scored holds only terms not taken, so it scores at most the float
        # sum (in query order) of their bounds: once that is below the k-th best, the top k is known.
        if taken < len(order) and len(cand) >= k and _sum_in_order(ub, order[taken:]) < _kth(scores, k):
            break
    if len(scores) > k:  # as lexquery.ranked: keep every row tied with the k-th, then order
        keep = scores >= _kth(scores, k)
        cand, scores = cand[keep], scores[keep]
    if len(skip):  # fewer than k rows scored: the skipped ones are still there
        scored = scores > -np.inf
        cand, scores = cand[scored], scores[scored]
    labels = state.row_label[cand]
    best = np.lexsort((labels, -scores))[:k]
    return list(zip(labels[best].tolist(), scores[best].tolist(), strict=True)), None


def _sorted_has(haystack: Int64s, needles: Int64s) -> npt.NDArray[np.bool_]:
    """Which ``needles`` are in ``haystack`` (ascending)."""
    at = np.minimum(haystack.searchsorted(needles), len(haystack) - 1)
    found: npt.NDArray[np.bool_] = haystack[at] == needles
    return found


def _merge(rows: Int64s, scores: Floats, more: Int64s, more_scores: Floats) -> tuple[Int64s, Floats]:
    """Two ascending, disjoint row sets and their scores as one ascending set."""
    if not len(rows):
        return more, more_scores
    merged = np.concatenate([rows, more])
    order = np.argsort(merged, kind="stable")
    return merged[order], np.concatenate([scores, more_scores])[order]


def _kth(scores: Floats, k: int) -> float:
    return float(np.partition(scores, len(scores) - k)[len(scores) - k])


def _sum_in_order(ub: Sequence[float], terms: Sequence[int]) -> float:
    """The float sum of the terms' bounds in query order (the order a score sums its terms in)."""
    total = 0.0
    for j in sorted(terms):
        total += ub[j]
    return total


def _full_scan(
    state: Postings, terms: Sequence[str], k: int, k1: float, b: float, skip: Int64s
) -> tuple[list[tuple[int, float]], Floats]:
    """The top ``k`` of the rows not in ``skip`` from scoring every row, and every row's score."""
    scores = state.scores(terms, k1, b)
    if k <= 0:
        return [], scores
    rows = np.flatnonzero(scores > 0)
    rows = rows[state.alive[rows]]
    if len(skip):
        rows = rows[~_sorted_has(skip, rows)]
    return ranked(state.row_label, rows, scores, k), scores


def _rows_of(state: Postings, labels: Int64s | None) -> Int64s:
    """The live rows of ``labels``, ascending and distinct (none for None)."""
    if labels is None or not len(labels):
        return np.empty(0, np.int64)
    at = state.label_row.rows_of(np.asarray(labels, np.int64))
    return np.unique(at[at >= 0]).astype(np.int64)
