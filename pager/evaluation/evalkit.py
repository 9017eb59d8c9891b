"""Offline evaluation of recall at a budget: what fraction of the evidence reaches the page.

evidence recall = mean over questions of |evidence ∩ retrieved| / |evidence| (strict, not
"any hit"), at k snippets and at token budgets. Every number is what ``retrieve`` returns: the
pager's own fusion is measured by calling ``retrieve(query, k=…, budget=…)``; the other
configurations (each lane alone, other weights, other salience modes) replay the same
selection and packing (``Pager._select``: store re-check, salience reserve, every snippet
charged its rendered line) on lane rankings taken once per question and cut to the depth
``retrieve`` would search for that call. The replay of the pager's own fusion is compared with
the real calls (``agreement``), which is what vouches for the other rows.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from mempager.config import PagerConfig
from mempager.evaluation.locomo import CATEGORIES, Conversation
from mempager.lanes.fusion import Fused, fuse, fuse_scores
from mempager.lanes.salience import params_from_config
from mempager.protocols import Embedder
from mempager.types import Snippet

KS = (1, 3, 5, 10, 20)
BUDGETS = (250, 500, 1000, 2000, 4000)
Lanes = Mapping[str, Sequence[tuple[int, float]]]
Completions = Mapping[str, Mapping[int, float]]


def progress_bar(total: int, label: str) -> tqdm[Any]:
    """Progress on stderr (tqdm): the benchmark's results go to stdout and files."""
    return tqdm(total=total, desc=label, unit="item", file=sys.stderr, dynamic_ncols=True)


@dataclass(frozen=True, slots=True)
class Setting:
    """One ``retrieve(query, k=k, budget=budget)`` call, reported under ``kind`` at ``value``."""

    kind: str  # "at_k" | "at_budget"
    value: int
    k: int
    budget: int

    @property
    def label(self) -> str:
        return f"R@{self.value}" if self.kind == "at_k" else f"{self.value} tok"


def settings(config: PagerConfig) -> tuple[Setting, ...]:
    """R@k: k snippets within the default budget. At a budget: as many snippets as fit (a
    rendered line costs far more than one token, so k = budget never binds)."""
    return tuple(Setting("at_k", k, k, config.retrieval_budget_tokens) for k in KS) + tuple(
        Setting("at_budget", b, b, b) for b in BUDGETS
    )


@dataclass(frozen=True, slots=True)
class Variant:
    """A fusion to measure: which recorded ranking feeds each pager lane, and the weights."""

    name: str
    lanes: Mapping[str, str]  # pager lane name -> recorded ranking
    weights: Mapping[str, float]
    fusion: str = "score"
    rrf_k: int = 60
    semantic_floor: float = 0.1

    @property
    def key(self) -> tuple[Any, ...]:
        """Two variants with the same key rank identically (whatever their names)."""
        return (
            tuple(sorted(self.lanes.items())),
            tuple(sorted(self.weights.items())),
            self.fusion,
            self.rrf_k,
            self.semantic_floor,
        )

    def fuse(self, lanes: Lanes, completions: Completions) -> list[Fused]:
        picked = {lane: lanes.get(source, ()) for lane, source in self.lanes.items()}
        if self.fusion == "rrf":
            return fuse(picked, self.weights, self.rrf_k)
        return fuse_scores(picked, completions, self.weights, self.semantic_floor)


def pager_variant(name: str, config: PagerConfig) -> Variant:
    """The fusion ``config`` makes the pager run (its salience lane as that mode records it)."""
    salience = "salience" if config.salience_mode == "unindexed" else "salience_all"
    return Variant(
        name,
        {
            "semantic": "semantic",
            "lexical": "lexical",
            "salience": salience,
            "time": "time",
            "prior": "prior",
            "speaker": "speaker",
        },
        dict(config.lane_weights),
        config.fusion,
        config.rrf_k,
        config.semantic_floor,
    )


@dataclass(frozen=True, slots=True)
class QuestionResult:
    category: int
    recall: Mapping[str, Mapping[Setting, float]]  # variant name -> setting -> recall
    agree: Mapping[Setting, bool]  # replay of the pager's fusion == the real retrieve call
    lost_to_decay: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Evaluation:
    results: list[QuestionResult]
    depths: dict[str, int]  # how deep every lane looked, per reported call


@dataclass(frozen=True, slots=True)
class DecayPair:
    """Evidence in the top 10 of ``without`` (recency switched off) missing from ``with_``'s."""

    name: str
    with_: Variant
    without: Variant


def evaluate(
    conversations: Sequence[Conversation],
    embedder: Embedder,
    config: PagerConfig,
    variants: Sequence[Variant],
    decay: Sequence[DecayPair] = (),
    real: str = "",
    workdir: Path | None = None,
) -> Evaluation:
    """One store per conversation; every question through ``retrieve`` and every variant's replay.

    ``real`` names the variant that is measured by calling ``retrieve`` (the pager's own fusion);
    its replay is kept only to check it agrees.
    """
    import mempager

    plan = settings(config)
    by_name = {v.name: v for v in variants}
    results: list[QuestionResult] = []
    depths: dict[Setting, int] = {}
    total = sum(len(c.turns) + len(c.questions) for c in conversations)
    with progress_bar(total, "locomo") as bar, tempfile.TemporaryDirectory(dir=workdir) as tmp:
        for conv in conversations:
            actor = "".join(ch if ch.isalnum() else "-" for ch in conv.sample_id) or "conv"
            with mempager.open(Path(tmp) / f"{actor}.duckdb", actor=actor, config=config, embedder=embedder) as p:
                uris = p.remember_many(
                    [{"type": "event", "text": t.memory_text(), "created_at": t.created_at} for t in conv.turns]
                )
                p.sync()
                bar.update(len(conv.turns))
                bar.set_postfix_str(conv.sample_id)
                ids = {p.get(uri).label: turn.dia_id for uri, turn in zip(uris, conv.turns, strict=True)}
                depths = {s: p.retriever.depth(s.k, s.budget) for s in plan}
                for q in conv.questions:
                    recorded = _record(p, q.text, depths.values(), config)

                    def found(
                        snippets: Iterable[Snippet], evidence: frozenset[str] = q.evidence, ids: Mapping[int, str] = ids
                    ) -> frozenset[str]:
                        return frozenset(ids[s.label] for s in snippets) & evidence

                    hits = _replay(p, variants, recorded, depths, found)
                    agree = {}
                    if real:
                        twins = [v.name for v in variants if v.key == by_name[real].key]
                        for s in plan:
                            got = found(p.retrieve(q.text, k=s.k, budget=s.budget))
                            agree[s] = got == hits[real][s]
                            for name in twins:
                                hits[name][s] = got
                    ten = next(s for s in plan if s.kind == "at_k" and s.value == 10)
                    lost = {d.name: len(hits[d.without.name][ten] - hits[d.with_.name][ten]) for d in decay}
                    recall = {name: {s: len(f) / len(q.evidence) for s, f in per.items()} for name, per in hits.items()}
                    results.append(QuestionResult(q.category, recall, agree, lost))
                    bar.update(1)
    return Evaluation(results, {f"{s.kind} {s.value}": d for s, d in depths.items()})


def _record(p: Any, query: str, depths: Iterable[int], config: PagerConfig) -> dict[int, tuple[Lanes, Completions]]:
    """For each depth, the lanes exactly as ``retrieve`` ranks them at that depth (an approximate
    vector search is not cut from a deeper one), plus salience rankings over every memory (with
    and without decay) and the semantic scores a salience-over-everything lane would look up."""
    params = params_from_config(config, p.clock())
    flat = replace(params, w_recency=0.0)  # the same ranking with decay switched off
    types, deepest = config.salience_types, max(depths)
    unembedded = sorted(p.semantic.unembedded_labels())
    extra = {
        "salience_nodecay": p.store.salience(p.actor, types, flat, deepest, unembedded),
        "salience_all": p.store.salience(p.actor, types, params, deepest),
        "salience_all_nodecay": p.store.salience(p.actor, types, flat, deepest),
    }
    vector = p.semantic.embed_query(query)
    out: dict[int, tuple[Lanes, Completions]] = {}
    for depth in sorted(set(depths)):
        lanes, completions = p.retriever.rank(query, depth)
        lanes.update({name: hits[:depth] for name, hits in extra.items()})  # exact: salience order is total
        if "semantic" in lanes:
            semantic = completions.setdefault("semantic", {})
            known = {label for label, _ in lanes["semantic"]} | set(semantic)
            wanted = sorted({label for name in extra for label, _ in lanes[name]} - known)
            semantic.update(p.semantic.scores_for(vector, wanted))
        out[depth] = lanes, completions
    return out


def _replay(
    p: Any,
    variants: Sequence[Variant],
    recorded: Mapping[int, tuple[Lanes, Completions]],
    depths: Mapping[Setting, int],
    found: Callable[[Iterable[Snippet]], frozenset[str]],
) -> dict[str, dict[Setting, frozenset[str]]]:
    """Each variant through the selection ``retrieve`` runs, on the lanes of each call's depth."""
    out: dict[str, dict[Setting, frozenset[str]]] = {}
    done: dict[tuple[Any, ...], dict[Setting, frozenset[str]]] = {}
    for variant in variants:
        if variant.key in done:
            out[variant.name] = dict(done[variant.key])
            continue
        per: dict[Setting, frozenset[str]] = {}
        for depth, (lanes, completions) in recorded.items():
            fused = variant.fuse(lanes, completions)
            for s in (s for s, d in depths.items() if d == depth):
                snippets, _ = p.retriever.select(fused, s.k, s.budget, frozenset(), explain=False)
                per[s] = found(snippets)
        out[variant.name] = done[variant.key] = per
    return out


def summarize(results: Sequence[QuestionResult], names: Sequence[str]) -> dict[str, Any]:
    """Mean recall per variant and setting, overall and per question category."""
    cats = sorted({r.category for r in results})
    out: dict[str, Any] = {}
    for name in names:
        overall = _means(results, name)
        overall["by_category"] = {
            CATEGORIES.get(c, str(c)): _means([r for r in results if r.category == c], name) for c in cats
        }
        out[name] = overall
    return out


def _means(results: Sequence[QuestionResult], name: str) -> dict[str, Any]:
    out: dict[str, dict[int, float]] = {"at_k": {}, "at_budget": {}}
    if not results:
        return dict(out)
    for s in results[0].recall[name]:
        out[s.kind][s.value] = sum(r.recall[name][s] for r in results) / len(results)
    return dict(out)


def agreement(results: Sequence[QuestionResult]) -> float | None:
    """Share of (question, call) pairs where the replay returned exactly the real call's evidence."""
    flags = [ok for r in results for ok in r.agree.values()]
    return sum(flags) / len(flags) if flags else None


# -- ranking-only recall (no packing), kept for comparing store backends on the same lanes ------


@dataclass(frozen=True, slots=True)
class QuestionRecord:
    """One question's lane rankings, in the evidence ids of the dataset."""

    category: int
    evidence: frozenset[str]
    lanes: Mapping[str, Sequence[tuple[int, float]]]
    completions: Mapping[str, Mapping[int, float]]
    ids: Mapping[int, str]  # label -> dataset id


@dataclass
class Scores:
    at_k: dict[int, float] = field(default_factory=dict)


def score(
    records: Sequence[QuestionRecord], rank: Callable[[QuestionRecord], Sequence[int]], ks: Sequence[int] = KS
) -> Scores:
    """Recall of the first k of a ranking: how two backends' lanes compare, not what a page holds."""
    out = Scores()
    if records:
        rankings = [list(rank(r)) for r in records]
        for k in ks:
            out.at_k[k] = sum(
                len({r.ids[x] for x in rk[:k]} & r.evidence) / len(r.evidence)
                for rk, r in zip(rankings, records, strict=True)
            ) / len(records)
    return out


def lane_ranker(lane: str) -> Callable[[QuestionRecord], list[int]]:
    return lambda r: [label for label, _ in r.lanes.get(lane, ())]


def variant_ranker(variant: Variant) -> Callable[[QuestionRecord], list[int]]:
    return lambda r: [f.label for f in variant.fuse(r.lanes, r.completions)]


def collect(
    conversations: Sequence[Conversation],
    embedder: Embedder,
    config: PagerConfig,
    depth: int = 300,
    workdir: Path | None = None,
    store: str | None = None,
) -> list[QuestionRecord]:
    """Record every lane's ranking for every question (``store``: one ``postgresql://`` store
    for every conversation, one actor each)."""
    import mempager

    records: list[QuestionRecord] = []
    total = sum(len(c.turns) + len(c.questions) for c in conversations)
    with progress_bar(total, "locomo") as bar, tempfile.TemporaryDirectory(dir=workdir) as tmp:
        for conv in conversations:
            actor = "".join(ch if ch.isalnum() else "-" for ch in conv.sample_id) or "conv"
            where = store if store is not None else Path(tmp) / f"{actor}.duckdb"
            with mempager.open(where, actor=actor, config=config, embedder=embedder) as p:
                uris = p.remember_many(
                    [{"type": "event", "text": t.memory_text(), "created_at": t.created_at} for t in conv.turns]
                )
                p.sync()
                bar.update(len(conv.turns))
                bar.set_postfix_str(conv.sample_id)
                ids = {p.get(uri).label: turn.dia_id for uri, turn in zip(uris, conv.turns, strict=True)}
                for q in conv.questions:
                    lanes, completions = p.retriever.rank(q.text, depth)
                    records.append(QuestionRecord(q.category, q.evidence, lanes, completions, ids))
                    bar.update(1)
    return records
