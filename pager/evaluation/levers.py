"""Issue 19: which retrieval levers lift LoCoMo evidence recall, measured outside the product.

The harness re-implements the content lanes, the time lane and the page's packing on numpy, so
that a lever that would need a product change (index keys richer than the shown text, a stemming
option, a fusion variant, an expansion stage) can be measured before anyone writes it:

* ``levers_data``: the calls measured (``SETTINGS``), the vector cache, the corpus (``prepare``),
  the configurations (``Knobs``: ``BASELINE`` is the product before issue 19, ``PRODUCT`` what
  it runs now) and the ``Outcome``;
* ``levers_keys``: what each lane indexes for a memory (BM25 over own text or context keys,
  key vectors);
* ``levers_fusion``: fusion, the time lane, expansion and packing, as ``Retriever`` does them;
* ``levers_verify``: the real ``retrieve`` on the same questions, call for call;
* here: the lane scores of every question per configuration (``Lanes``, cached) and
  ``evaluate``, which runs every question at every setting.

The semantic lane is exact cosine over the packaged MiniLM vectors (at ~600 memories per actor the
product's HNSW with ef 128 is exact), every lane as deep as ``retrieve`` looks for that call. With
every turn embedded the default salience lane is empty (benchmarks/results/locomo.md), so it is
left out. ``verify_against_product`` counts how often the harness's ``PRODUCT`` returned exactly
the evidence of the real ``retrieve``; the runner (benchmarks/bench_locomo_levers.py) reports it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mempager.evaluation.evalkit import Setting
from mempager.evaluation.levers_data import (
    BASELINE,
    DEFAULT_BUDGET,
    LANE_DEPTH,
    PRODUCT,
    SETTINGS,
    Bools,
    CachedEmbedder,
    Conv,
    Floats,
    Ints,
    Knobs,
    Outcome,
    Query,
    VectorCache,
    actor_of,
    lane_depth,
    prepare,
    product_knobs,
)
from mempager.evaluation.levers_fusion import (
    expand,
    fuse_depth,
    in_ranges,
    lane_order,
    pack,
    query_years,
    score_fusion,
    sessions_of,
    speaker_hits,
    time_lane,
    time_lists,
)
from mempager.evaluation.levers_keys import (
    Analyzer,
    Bm25,
    analyzer,
    neighbours,
    own_terms,
    semantic_keys,
    window_text,
    window_weights,
)
from mempager.evaluation.levers_verify import verify_against_product
from mempager.lanes.when import date_ranges

__all__ = [
    "BASELINE",
    "DEFAULT_BUDGET",
    "LANE_DEPTH",
    "PRODUCT",
    "SETTINGS",
    "Analyzer",
    "Bm25",
    "CachedEmbedder",
    "Conv",
    "Knobs",
    "Lanes",
    "Outcome",
    "Query",
    "Setting",
    "VectorCache",
    "actor_of",
    "analyzer",
    "as_json",
    "date_ranges",
    "evaluate",
    "expand",
    "fuse_depth",
    "in_ranges",
    "means",
    "neighbours",
    "objective",
    "own_terms",
    "pack",
    "prepare",
    "product_knobs",
    "score_fusion",
    "semantic_keys",
    "sessions_of",
    "verify_against_product",
    "window_text",
    "window_weights",
]


class Lanes:
    """Per conversation, the lane scores of every question under each lane configuration (cached)."""

    def __init__(self, convs: Sequence[Conv], cache: VectorCache | None = None) -> None:
        self.convs = convs
        self.cache = cache
        self._bm25: dict[tuple[int, tuple[Any, ...]], Bm25] = {}
        self._lex: dict[tuple[Any, ...], Floats] = {}
        self._sem: dict[tuple[int, tuple[Any, ...]], Floats] = {}
        self._qterms: dict[tuple[int, str], list[list[str]]] = {}

    def bm25(self, c: int, knobs: Knobs) -> Bm25:
        key = (c, knobs.lex_key())
        if key not in self._bm25:
            if len(self._bm25) > 40:
                self._bm25.pop(next(iter(self._bm25)))
            self._bm25[key] = Bm25(self.convs[c], knobs)
        return self._bm25[key]

    def semantic(self, c: int, knobs: Knobs) -> Floats:
        """Cosine of every question with every memory's key vector, (questions, memories)."""
        key = (c, knobs.sem_key())
        if key not in self._sem:
            conv = self.convs[c]
            keys = semantic_keys(conv, knobs, self.cache)
            self._sem[key] = (conv.qvectors @ keys.T).astype(np.float64)
        return self._sem[key]

    def query_terms(self, c: int, stem: str) -> list[list[str]]:
        key = (c, stem)
        if key not in self._qterms:
            a = analyzer(stem)
            self._qterms[key] = [a.query(q.text) for q in self.convs[c].questions]
        return self._qterms[key]

    def lexical(self, c: int, knobs: Knobs) -> Floats:
        """BM25 of every question with every memory, (questions, memories); RM3 when asked."""
        prf = (knobs.prf_docs, knobs.prf_terms, knobs.prf_weight, knobs.prf_source) if knobs.prf_docs else ()
        fused = (knobs.w_sem, knobs.w_lex, knobs.floor, knobs.sem_key()) if prf and knobs.prf_source == "fused" else ()
        key = (c, knobs.lex_key(), prf, fused)
        got = self._lex.get(key)
        if got is None:
            index = self.bm25(c, knobs)
            terms = self.query_terms(c, knobs.stem)
            rows = []
            for qi, qt in enumerate(terms):
                ids = index.ids(qt)
                first = index.scores([(t, 1.0) for t in ids])
                if knobs.prf_docs:
                    if knobs.prf_source == "fused":
                        sem = self.semantic(c, knobs)[qi]
                        rank_by = score_fusion(sem, first, knobs)
                    else:
                        rank_by = first
                    top = np.lexsort((np.arange(len(rank_by)), -rank_by))[: knobs.prf_docs]
                    top = top[rank_by[top] > 0]
                    first = index.scores(index.rm3(rank_by, ids, knobs, top))
                rows.append(first)
            got = np.array(rows) if rows else np.zeros((0, self.convs[c].n))
            if len(self._lex) > 200:
                self._lex.pop(next(iter(self._lex)))
            self._lex[key] = got
        return got


def evaluate(lanes: Lanes, knobs: Knobs, keep_found: bool = False, only: Sequence[int] | None = None) -> Outcome:
    """Every question of every conversation (or of ``only``) through lanes, fusion, expansion, packing."""
    by_depth: dict[int, list[int]] = {}
    for j, s in enumerate(SETTINGS):
        by_depth.setdefault(lane_depth(s), []).append(j)
    recall, cats, convs, found = [], [], [], []
    wanted = range(len(lanes.convs)) if only is None else only
    for c in wanted:
        conv = lanes.convs[c]
        sem_all, lex_all = lanes.semantic(c, knobs), lanes.lexical(c, knobs)
        years = query_years(conv.created)
        labels = np.arange(conv.n)
        for qi, q in enumerate(conv.questions):
            sem, lex = sem_all[qi], lex_all[qi]
            base = score_fusion(sem, lex, knobs)
            timed: Bools | None = None
            lists: list[Ints] = []
            if knobs.time_boost or knobs.time_abs:
                ranges = date_ranges(q.text, years)
                if ranges:
                    lists = time_lists(conv.created, ranges, knobs.time_before, knobs.time_after)
                    timed = time_lane(lists, conv.n, conv.n)
            row = np.zeros(len(SETTINGS))
            got: list[frozenset[int]] = [frozenset()] * len(SETTINGS)
            evidence = set(q.evidence.tolist())
            orders = (lane_order(sem, False), lane_order(lex, True))
            said = speaker_hits(conv, q.text, knobs.stem) if knobs.speaker else None
            for depth, which in by_depth.items():
                f, cand = fuse_depth(sem, lex, knobs, depth, base, orders)
                hits = time_lane(lists, conv.n, depth) if timed is not None else None
                f, cand = expand(f, cand, conv, knobs, timed, hits)
                if said is not None and said.any():
                    f = f + knobs.speaker * (cand & said)
                keep = np.flatnonzero(cand & (f > 0))
                order = keep[np.lexsort((labels[keep], -f[keep]))]
                for j in which:
                    s = SETTINGS[j]
                    hit = evidence.intersection(pack(order, conv, s.k, s.budget))
                    row[j] = len(hit) / len(evidence)
                    got[j] = frozenset(hit)
            recall.append(row)
            cats.append(q.category)
            convs.append(c)
            if keep_found:
                found.append(got)
    return Outcome(np.array(recall), np.array(cats, np.int64), np.array(convs, np.int64), found)


def means(outcome: Outcome, mask: Bools | None = None) -> dict[str, float]:
    """Mean recall per setting over the questions in ``mask``."""
    rows = outcome.recall if mask is None else outcome.recall[mask]
    if not len(rows):
        return {s.label: float("nan") for s in SETTINGS}
    return {s.label: float(v) for s, v in zip(SETTINGS, rows.mean(axis=0), strict=True)}


def objective(outcome: Outcome, mask: Bools) -> float:
    """What tuning maximises: the mean over the ten columns (bench_locomo's rule)."""
    return float(outcome.recall[mask].mean())


def as_json(knobs: Knobs) -> Mapping[str, Any]:
    return knobs.changed()
