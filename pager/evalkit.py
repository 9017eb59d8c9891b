"""Offline evaluation of recall at a budget: what fraction of the evidence reaches the page.

evidence recall = mean over questions of |evidence ∩ retrieved| / |evidence| (strict, not
"any hit"), at k snippets and at token budgets, for each lane alone and for the fusion. Lane
rankings are computed once per question, so fusion variants are scored without re-querying.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .config import PagerConfig
from .fusion import fuse, fuse_scores
from .locomo import CATEGORIES, Conversation
from .progress import Progress
from .protocols import Embedder
from .salience import params_from_config

KS = (1, 3, 5, 10, 20)
BUDGETS = (250, 500, 1000, 2000, 4000)


@dataclass(frozen=True, slots=True)
class QuestionRecord:
    """One question's lane rankings, in the evidence ids of the dataset."""

    category: int
    evidence: frozenset[str]
    lanes: Mapping[str, Sequence[tuple[int, float]]]
    completions: Mapping[str, Mapping[int, float]]
    ids: Mapping[int, str]  # label -> dataset id
    tokens: Mapping[int, int]  # label -> snippet tokens


@dataclass
class Scores:
    at_k: dict[int, float] = field(default_factory=dict)
    at_budget: dict[int, float] = field(default_factory=dict)


def _recall(ranked: Iterable[int], record: QuestionRecord) -> float:
    found = {record.ids[label] for label in ranked} & record.evidence
    return len(found) / len(record.evidence)


def _within_budget(ranked: Sequence[int], record: QuestionRecord, budget: int) -> list[int]:
    used, out = 0, []
    for label in ranked:
        cost = record.tokens[label]
        if used + cost <= budget:  # greedy like the pager's packing: skip what does not fit
            used += cost
            out.append(label)
    return out


def score(
    records: Sequence[QuestionRecord],
    rank: Callable[[QuestionRecord], Sequence[int]],
    ks: Sequence[int] = KS,
    budgets: Sequence[int] = BUDGETS,
) -> Scores:
    out = Scores()
    if not records:
        return out
    rankings = [list(rank(r)) for r in records]
    for k in ks:
        out.at_k[k] = sum(_recall(rk[:k], r) for rk, r in zip(rankings, records, strict=True)) / len(records)
    for b in budgets:
        out.at_budget[b] = sum(
            _recall(_within_budget(rk, r, b), r) for rk, r in zip(rankings, records, strict=True)
        ) / len(records)
    return out


def lane_ranker(lane: str) -> Callable[[QuestionRecord], list[int]]:
    return lambda r: [label for label, _ in r.lanes.get(lane, ())]


def _only(lanes: Mapping[str, Any], weights: Mapping[str, float]) -> dict[str, Any]:
    """The lanes a fusion weighs: a recorded extra lane must not join the candidate union."""
    return {name: value for name, value in lanes.items() if name in weights}


def rrf_ranker(weights: Mapping[str, float], rrf_k: int) -> Callable[[QuestionRecord], list[int]]:
    return lambda r: [f.label for f in fuse(_only(r.lanes, weights), weights, rrf_k)]


def score_ranker(weights: Mapping[str, float], floor: float) -> Callable[[QuestionRecord], list[int]]:
    return lambda r: [f.label for f in fuse_scores(_only(r.lanes, weights), r.completions, weights, floor)]


def config_ranker(config: PagerConfig) -> Callable[[QuestionRecord], list[int]]:
    """The fusion the pager itself uses with ``config``."""
    if config.fusion == "rrf":
        return rrf_ranker(config.lane_weights, config.rrf_k)
    return score_ranker(config.lane_weights, config.semantic_floor)


def collect(
    conversations: Sequence[Conversation],
    embedder: Embedder,
    config: PagerConfig,
    depth: int = 300,
    workdir: Path | None = None,
    store: str | None = None,
) -> list[QuestionRecord]:
    """Build one store per conversation, then record every lane's ranking for every question.

    ``store`` (a ``postgresql://`` URL) puts every conversation in that one store, one actor each.
    """
    import pager

    records: list[QuestionRecord] = []
    total = sum(len(c.turns) for c in conversations) + sum(len(c.questions) for c in conversations)
    bar = Progress(total, "locomo")
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        for conv in conversations:
            actor = "".join(ch if ch.isalnum() else "-" for ch in conv.sample_id) or "conv"
            where = store if store is not None else Path(tmp) / f"{actor}.duckdb"
            with pager.open(where, actor=actor, config=config, embedder=embedder) as p:
                uris = p.remember_many([
                    {"type": "event", "text": t.memory_text(), "created_at": t.created_at} for t in conv.turns
                ])
                p.sync()
                bar.advance(len(conv.turns), conv.sample_id)
                ids, tokens = {}, {}
                for uri, turn in zip(uris, conv.turns, strict=True):
                    memory = p.get(uri)
                    ids[memory.label] = turn.dia_id
                    tokens[memory.label] = config.token_estimator(memory.text)
                params = params_from_config(config, p.clock())
                flat = replace(params, w_recency=0.0)  # the same ranking with decay switched off
                for q in conv.questions:
                    lanes, completions = p._rank(q.text, depth)
                    # the salience ranking over everything, to measure what the "all" mode would do
                    lanes["salience_all"] = p.store.salience(p.actor, config.salience_types, params, depth)
                    lanes["salience_all_nodecay"] = p.store.salience(p.actor, config.salience_types, flat, depth)
                    records.append(QuestionRecord(q.category, q.evidence, lanes, completions, ids, tokens))
                    bar.advance(1)
    return records


def report(
    records: Sequence[QuestionRecord], rankers: Mapping[str, Callable[[QuestionRecord], Sequence[int]]]
) -> dict[str, Any]:
    """Scores per configuration, overall and per question category."""
    out: dict[str, Any] = {"questions": len(records), "configurations": {}}
    cats = sorted({r.category for r in records})
    for name, ranker in rankers.items():
        overall = score(records, ranker)
        per_cat = {
            CATEGORIES.get(c, str(c)): score([r for r in records if r.category == c], ranker).__dict__
            for c in cats
        }
        out["configurations"][name] = {**overall.__dict__, "by_category": per_cat}
    return out


def excluded_by_decay(
    records: Sequence[QuestionRecord], with_decay: Callable[[QuestionRecord], Sequence[int]],
    without_decay: Callable[[QuestionRecord], Sequence[int]], k: int,
) -> int:
    """Evidence memories in the top k without decay that decay alone pushes out of it."""
    lost = 0
    for r in records:
        kept = {r.ids[x] for x in with_decay(r)[:k]} & r.evidence
        would = {r.ids[x] for x in without_decay(r)[:k]} & r.evidence
        lost += len(would - kept)
    return lost
