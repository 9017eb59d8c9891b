"""BM25 over context keys: each episodic memory scored as its text plus its neighbours' (``index.episodes``).

Nothing extra is indexed or saved: a query reads the own-text postings of its terms and spreads
each posting to the memories whose windows reach it (``Episodes.spread``), so a key's term
frequency is ``sum over its window of decay**d * tf`` and its length the same weighted sum of the
own lengths. Then it is Okapi BM25 as ``index.lexquery.bm25`` computes it, with

* N the live documents, df the number of *keys* holding the term (the spread's distinct labels),
* the average key length ``(total own length + Episodes.extra_length) / N``.

Because the keys exist only at query time, forgetting a memory removes its words from every key
at once (its postings die with it), and the saved files hold only own text (erasure unchanged).
Cost: every posting of every query term is touched (no pruning), times ``1 + 2 * window``; the
exact pruned path (``index.lexical_topk``) still serves indexes without episodes.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from mempager.index.episodes import Episodes
from mempager.index.lexical_topk import _PRUNE_FROM_ROWS, Wanted, resolve
from mempager.index.lexical_topk import search_scored as top_scored
from mempager.index.lexquery import idf_weights, query_ids, ranked

Int64s = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]


SPREAD_SHARE = 0.2  # terms held by more than this share of the memories score on own text (LoCoMo halves)
SPREAD_CAP = 512  # ... and so do terms held by more than this many: the query's cost stays bounded
SPREAD_FLOOR = 8  # ... but a term held by this few is specific, however small the store


def spread_terms(state: Any, ids: Sequence[int]) -> tuple[list[int], list[int]]:
    """The query's term ids split into (scored on context keys, scored on own text).

    A term most memories hold says little about which one is meant, and folding neighbours in
    makes it all the more common; on LoCoMo both halves pick a fifth of the memories (0.2, 0.3
    and 0.5 score alike; every term scores worse). The cap bounds what one query spreads in a
    large store; below the floor a term is specific whatever the store's size (LoCoMo's ~600-turn
    stores never reach it).
    """
    limit = min(max(SPREAD_SHARE * len(state.label_row), SPREAD_FLOOR), SPREAD_CAP)
    spread = [t for t in ids if state.df[t] <= limit]
    return spread, [t for t in ids if state.df[t] > limit]


def context_scores(state: Any, ids: Sequence[int], episodes: Episodes, k1: float, b: float) -> tuple[Int64s, Floats]:
    """(labels, BM25 of their context keys over the term ids ``ids``) for every live key holding one;
    the labels are distinct, in no particular order.

    All the terms' postings are handled at once (a few dozen numpy calls per query, not per
    term). A memory outside every episode keys on its own text and no window reaches it, so its
    postings are scored as they stand; only episode members' are spread.
    """
    n_docs = len(state.label_row)
    if not ids or not n_docs:
        return np.zeros(0, np.int64), np.zeros(0)
    blocks = [state.post[t][:, : state.npost[t]] for t in ids]
    rows = np.concatenate([blk[0] for blk in blocks]).astype(np.int64)
    tf = np.concatenate([blk[1] for blk in blocks]).astype(np.float64)
    term = np.repeat(np.arange(len(ids), dtype=np.int64), [blk.shape[1] for blk in blocks])
    live = state.alive[rows]
    rows, tf, term = rows[live], tf[live], term[live]
    labels = state.row_label[rows]
    member = episodes.members(labels)
    alone = ~member
    length = state.doclen[rows[alone]] if b else np.zeros(0)
    labels_out, tf_out, term_out = labels[alone], tf[alone], term[alone]
    if member.any():
        keys, src, weight = episodes.spread(labels[member])
        ids_of_key, distinct = episodes.compact(keys)  # the (term, key) pairs in a dense range:
        m = len(distinct)  # a bincount over terms x distinct keys sums them without a sort
        sums = np.bincount(term[member][src] * m + ids_of_key, weights=tf[member][src] * weight)
        pair = np.flatnonzero(sums)  # every sum is > 0 (term frequencies times weights)
        spread_labels = distinct[pair % m]
        labels_out = np.concatenate((labels_out, spread_labels))
        tf_out = np.concatenate((tf_out, sums[pair]))
        term_out = np.concatenate((term_out, pair // m))
        if b:  # b = 0 (the default) ignores key lengths: the costliest gather here is skipped
            length = np.concatenate((length, episodes.key_length[spread_labels]))
    df = np.bincount(term_out, minlength=len(ids)).astype(np.float64)  # keys holding each term
    idf = idf_weights(n_docs, df, k1)
    if b:
        norm = length * (k1 * b * n_docs / (state.total_len + episodes.extra_length))  # k1 b / avg key length
        norm += k1 * (1.0 - b)
        norm += tf_out
    else:
        norm = tf_out + k1
    ids_of_label, distinct = episodes.compact(labels_out)
    bm25 = tf_out / norm * idf[term_out]
    sums_by_label: Floats = np.bincount(ids_of_label, weights=bm25).astype(np.float64, copy=False)
    return distinct, sums_by_label


def _lookup(labels: Int64s, scores: Floats, wanted: Sequence[int]) -> Floats:
    """The score of each of ``wanted`` in the ascending ``labels`` (0 where absent)."""
    want = np.asarray(wanted, np.int64)
    at = np.minimum(np.searchsorted(labels, want), max(len(labels) - 1, 0))
    hit = (labels[at] == want) if len(labels) else np.zeros(len(want), bool)
    return np.where(hit, scores[at] if len(labels) else 0.0, 0.0)


def _dense(
    state: Any,
    words: Sequence[str],
    labels: Int64s,
    scores: Floats,
    k: int,
    wanted: Wanted,
    k1: float,
    b: float,
) -> tuple[list[tuple[int, float]], dict[int, float]]:
    """Own-text BM25 of the common ``words`` over every row, plus the context scores."""
    every = state.scores(words, k1, b)
    held = state.label_row.rows_of(labels)  # live rows: keys come from live postings only
    every[held] += scores
    floor = 0.0
    if 0 < k <= len(held):  # k live rows score at least their k-th best: nothing below it can rank
        got = every[held]
        floor = float(np.partition(got, len(got) - k)[len(got) - k])
    # a scan for ">= floor" keeps far fewer rows than "> 0" for ``ranked`` to sort (common terms
    # match most rows), and keeps every row tied with the k-th score, as ``ranked`` needs
    rows = np.flatnonzero(every >= floor) if floor > 0 else np.flatnonzero(every > 0)
    if state.dead_rows:
        rows = rows[state.alive[rows]]
    top = ranked(state.row_label, rows, every, k) if k > 0 else []
    want = resolve(wanted)
    at = state.label_row.rows_of(np.asarray(want, np.int64))
    got = np.where(at >= 0, every[np.maximum(at, 0)], 0.0)
    return top, dict(zip(want, got.tolist(), strict=True))


def numpy_scored(
    state: Any, terms: Sequence[str], k: int, wanted: Wanted, episodes: Episodes | None, k1: float, b: float
) -> tuple[list[tuple[int, float]], dict[int, float]]:
    """``lexical_search.search_scored`` in numpy, the reference the compiled kernel is held to bit for
    bit: context keys when memories are placed in episodes (``context_scored``), own text otherwise
    (``lexical_topk.search_scored``). Same arguments, same answers."""
    if episodes is not None and len(episodes):
        return context_scored(state, terms, k, wanted, episodes, k1, b)
    return top_scored(state, terms, k, wanted, k1, b)


def context_scored(
    state: Any, terms: Sequence[str], k: int, wanted: Wanted, episodes: Episodes, k1: float, b: float
) -> tuple[list[tuple[int, float]], dict[int, float]]:
    """The top ``k`` (label, score) best first, ties to the lower label, and the score of each
    label in ``wanted`` (0.0 when absent or unmatched), as ``index.lexical_topk.search_scored``.

    Rare terms score on context keys (``context_scores``); common ones on own text through the
    exact pruned search, asked for its best ``k`` outside the context candidates and for every
    context candidate's score: the merged top ``k`` is exact (any other memory scores its own text
    alone, and ranks below those ``k``), and the pruning keeps its depth of ``k``.
    """
    ids = query_ids(state.ids, state.df, terms)
    if not ids:
        return [], dict.fromkeys(resolve(wanted), 0.0)
    spread, plain = spread_terms(state, ids)
    labels, scores = context_scores(state, spread, episodes, k1, b)
    if plain and state.nrows < _PRUNE_FROM_ROWS:  # as the plain search: one pass over every row
        return _dense(state, [state.terms[t] for t in plain], labels, scores, k, wanted, k1, b)
    want_now = functools.cache(lambda: resolve(wanted))  # asked for once, as late as can be
    if plain:
        words = [state.terms[t] for t in plain]
        found = labels

        def ask() -> list[int]:  # the pruned search's own top k first: ``wanted`` may still be coming
            return sorted(set(found.tolist()) | set(want_now()))

        top_plain, plain_of = top_scored(state, words, k, ask, k1, b, exclude=labels)
        merged = dict(zip(labels.tolist(), scores.tolist(), strict=True))
        for label, extra in plain_of.items():
            if label in merged:
                merged[label] += extra
        for label, score in top_plain:
            merged.setdefault(label, score)  # not a context candidate (excluded above): context part 0
        labels = np.fromiter(merged, np.int64, len(merged))
        scores = np.fromiter(merged.values(), np.float64, len(merged))
        order = np.argsort(labels, kind="stable")
        labels, scores = labels[order], scores[order]
        want = want_now()
        wanted_scores = _lookup(labels, scores, want)
        for i, label in enumerate(want):  # a wanted label outside both lists: its own-text part
            if wanted_scores[i] == 0.0:
                wanted_scores[i] = plain_of.get(label, 0.0)
    else:
        order = np.argsort(labels)  # distinct labels: no ties to settle
        labels, scores = labels[order], scores[order]
        want = want_now()
        wanted_scores = _lookup(labels, scores, want)
    top: list[tuple[int, float]] = []
    if k > 0 and len(labels):
        keep = np.flatnonzero(scores > 0)
        if len(keep) > k:
            cut = np.partition(-scores[keep], k - 1)[k - 1]
            keep = keep[-scores[keep] <= cut]
        chosen = keep[np.lexsort((labels[keep], -scores[keep]))[:k]]
        top = list(zip(labels[chosen].tolist(), scores[chosen].tolist(), strict=True))
    return top, dict(zip(want, wanted_scores.tolist(), strict=True))
