"""``Store.candidate_facts``: the prior and the semantic scores of a retrieve's candidates in one
call (one statement, one round trip on PostgreSQL) give exactly what the separate calls gave:
``salience`` and ``vector_scores`` / the semantic lane's ``scores_for``, on both backends, at the
store and through ``Retriever.rank`` and a whole page."""

from __future__ import annotations

import types
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mempager
from mempager import PagerConfig
from mempager.embedders import HashEmbedder
from mempager.lanes.fusion import UNEMBEDDED
from mempager.lanes.salience import params_from_config
from mempager.protocols import CandidateAsk
from mempager.types import MemoryType, NewMemory

from .conftest import is_pg

NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)
SALIENT = PagerConfig().salience_types


def _reads(store: Any) -> list[int]:
    """Counts the store's round trips to PostgreSQL (``Db.read``) from now on."""
    count = [0]
    db, read = store._db, store._db.read

    def counted(fn: Any) -> Any:
        count[0] += 1
        return read(fn)

    db.read = counted
    return count


def test_one_call_answers_as_salience_and_vector_scores(store: Any) -> None:
    rng = np.random.default_rng(3)
    kinds = [MemoryType.FACT, MemoryType.EVENT, MemoryType.RULE, MemoryType.GOAL]
    items = [
        NewMemory(
            actor="a",
            type=kinds[i % 4],
            text=f"memory number {i}",
            importance=float(rng.uniform()),
            created_at=NOW - timedelta(days=int(rng.integers(0, 400))),
        )
        for i in range(24)
    ] + [NewMemory(actor="b", type=MemoryType.FACT, text="another actor's memory")]
    items[8] = replace(items[4], text="the same score as memory number 4")  # a tie: label order decides
    ms = [r.memory for r in store.put_many(items)]
    mine, theirs = ms[:24], ms[24]
    store.update("a", mine[0].id, superseded_by=mine[1].uri)  # no longer current: not salient
    store.update("a", mine[1].id, valid_until=NOW - timedelta(days=1))  # expired at NOW
    vectors = rng.normal(size=(25, 32)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    embedded = [m for i, m in enumerate(ms) if i % 5 != 4]  # every fifth memory has no vector
    store.put_vectors(
        "m", np.array([m.label for m in embedded]), vectors[: len(embedded)], [m.content_hash for m in embedded]
    )
    query = vectors[7] * 0.6 + vectors[3] * 0.4
    params = replace(params_from_config(PagerConfig(), NOW), w_access=0.0, w_strength=0.0)
    labels = [m.label for m in ms] + [10**12]  # another actor's and one that does not exist
    ask = CandidateAsk(prior=labels, types=SALIENT, params=params, cosine=labels, model="m", vector=query)
    count = _reads(store) if is_pg(store) else [0]
    facts = store.candidate_facts("a", ask)
    assert count[0] == (1 if is_pg(store) else 0)  # PostgreSQL: both answers in one round trip

    assert facts.prior == store.salience("a", SALIENT, params, len(labels), labels)
    prior = {label for label, _ in facts.prior}
    excluded = {mine[0].label, mine[1].label, theirs.label} | {m.label for m in mine if m.type is MemoryType.RULE}
    assert prior == {m.label for m in mine} - excluded
    with_vector = {m.label: vectors[i] for i, m in enumerate(embedded) if m.actor == "a"}
    assert set(facts.cosine) == set(with_vector)  # no vector, another actor's, missing: left out
    for label, vector in with_vector.items():
        assert facts.cosine[label] == pytest.approx(float(vector @ query / np.linalg.norm(query)), abs=1e-5)
    if is_pg(store):  # the same expression as the separate call: the same floats
        assert facts.cosine == store.vector_scores("a", "m", query, labels)

    if is_pg(store):  # what packing reads: get_many's fields, lighter
        whole, shown = store.get_many("a", labels), store.shown_rows("a", labels)
        assert set(shown) == set(whole) == {m.label for m in mine}
        fields = ("label", "uri", "type", "text", "source", "created_at", "superseded_by", "valid_until")
        for label, memory in whole.items():
            assert [getattr(shown[label], f) for f in fields] == [getattr(memory, f) for f in fields]
        assert shown[mine[0].label].superseded_by == mine[1].uri
        assert shown[mine[1].label].valid_until == NOW - timedelta(days=1)

    count = _reads(store) if is_pg(store) else [0]
    assert store.candidate_facts("a", CandidateAsk(cosine=labels)) == type(facts)([], {})  # no vector: no cosine
    assert store.candidate_facts("a", CandidateAsk()).prior == []
    assert count[0] == 0  # nothing asked: no round trip


TEXTS = [
    "Caroline went to the LGBTQ support group on Tuesday and felt welcome",
    "Melanie ran a charity race for mental health last Saturday",
    "Caroline is researching adoption agencies for her family",
    "Melanie painted a sunrise over the lake with her kids",
    "the support group talked about coming out to parents",
    "Caroline wants to become a counselor for transgender youth",
    "Melanie's kids love the beach and camping in the mountains",
    "a charity bake sale raised money for the animal shelter",
    "Caroline read a book about finding your identity",
    "Melanie signed up for a pottery class on weekends",
] + [f"filler note {i} about groceries, weather and errands" for i in range(30)]
QUERIES = [
    "When did Caroline go to the support group?",
    "What did Melanie do for charity?",
    "adoption agencies",
    "what does Melanie like to paint",
    "pottery class weekends",
    "weather and groceries",
]


def _separate_calls(self: Any, lanes: Any, completions: Any, vector: Any, unembedded: Any, params: Any) -> None:
    """What ``Retriever.rank`` did before ``Completions``: ``scores_for``, then ``salience``."""
    if vector is not None:
        seen = {label for label, _ in lanes.get("semantic", ())}
        others = {
            label for name in ("lexical", "salience", "time") for label, _ in lanes.get(name, ()) if label not in seen
        }
        completions["semantic"] = self.semantic.scores_for(vector, sorted(others))
        completions[UNEMBEDDED] = dict.fromkeys(sorted(others & unembedded), 0.0)
    if self.config.lane_weights.get("prior", 0.0) > 0:
        content = {label for label, score in lanes.get("semantic", ()) if score > self.config.semantic_floor}
        content.update(label for name in ("lexical", "time") for label, _ in lanes.get(name, ()))
        if content:
            recency_and_importance = replace(params, w_access=0.0, w_strength=0.0)
            lanes["prior"] = self.store.salience(
                self.actor, self.config.salience_types, recency_and_importance, len(content), sorted(content)
            )


@pytest.fixture
def pager(location: str | Path) -> Iterator[Any]:
    """A pager over the texts, all embedded but the last three (written with no embedding worker)."""
    config = PagerConfig(embedder="hash")
    with mempager.open(location, actor="a", config=config, embedder=HashEmbedder(64)) as p:
        p.remember_many([{"type": "event", "text": t} for t in TEXTS[:-3]])
        assert p.sync(timeout=60)
    idle = replace(config, embed_workers=0)
    p = mempager.open(location, actor="a", config=idle, embedder=HashEmbedder(64))
    p.remember_many([{"type": "fact", "text": t} for t in TEXTS[-3:]])
    p.retriever.clock = lambda: NOW  # the prior's recency depends on the time: the same for both paths
    yield p
    p.close()


def test_rank_and_page_are_those_of_the_separate_calls(pager: Any) -> None:
    retriever = pager.retriever
    fill = retriever._completions.fill
    separate = types.MethodType(_separate_calls, retriever._completions)
    pg = is_pg(pager.store)
    assert len(retriever.semantic.unembedded_labels()) == 3
    for query in QUERIES:
        retriever.rank(query, 10)  # what a first call reads once (the time lane's span, the links) is read
        count = _reads(pager.store) if pg else [0]
        lanes, completions = retriever.rank(query, 10)  # shallow: the lanes find memories the others miss
        together = count[0]
        retriever._completions.fill = separate
        try:
            count = _reads(pager.store) if pg else [0]
            assert retriever.rank(query, 10) == (lanes, completions)
            apart = count[0]
            old_page = retriever.retrieve_with_cuts(query, 4, 200, frozenset())
        finally:
            retriever._completions.fill = fill
        page = retriever.retrieve_with_cuts(query, 4, 200, frozenset())
        assert page == old_page and page[0]
        hydrate, retriever._hydrate = retriever._hydrate, lambda labels: pager.store.get_many("a", labels)
        try:  # packed from whole memories: the same page as from the store's packing rows
            assert retriever.retrieve_with_cuts(query, 4, 200, frozenset()) == page
        finally:
            retriever._hydrate = hydrate
        assert lanes["prior"] and completions["semantic"]  # both parts were asked
        if pg:
            assert together == apart - 1  # the prior and the semantic scores: one round trip, not two
