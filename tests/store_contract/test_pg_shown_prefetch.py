"""A retrieve's packing rows on PostgreSQL come with its candidates: ``candidate_facts`` reads the
columns packing needs from the same memory rows, and the retrieve's ``shown_rows`` is answered from
them instead of a round trip of its own. What must hold: they are exactly what a read would give;
a change another process commits is seen by the next retrieve (the rows serve one retrieve only,
dropped when the next ranking starts), and so is one this process commits meanwhile; they serve
only the thread and the actor they were read for, and not for long."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np
import pytest

from mempager import PagerConfig
from mempager.embedders import HashEmbedder
from mempager.lanes.salience import params_from_config
from mempager.protocols import CandidateAsk
from mempager.store.pg import candidates as pg_candidates
from mempager.store.pg import open_pg_store
from mempager.types import MemoryType, NewMemory

from .pg_seeded import seeded_pager
from .test_pg_rank_facts import _reads

NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)
SALIENT = PagerConfig().salience_types
FIELDS = ("label", "uri", "type", "text", "source", "created_at", "superseded_by", "valid_until")
TEXTS = [f"note {i} about the garden, the weather and the errands" for i in range(60)]  # > lane_depth


@pytest.fixture
def store(pg_url: str) -> Iterator[Any]:
    s = open_pg_store(pg_url)
    yield s
    s.close()


def _fields(rows: dict[int, Any]) -> dict[int, list[Any]]:
    return {label: [getattr(row, f) for f in FIELDS] for label, row in rows.items()}


def _memories(store: Any) -> tuple[list[Any], Any, CandidateAsk]:
    """24 memories of "a" (one superseded, one expired, some of a type salience does not rank, a
    fifth without a vector), one of "b", and an ask naming all of them and a label that is no memory:
    the prior asks for the first half, the cosines for the second."""
    rng = np.random.default_rng(7)
    kinds = [MemoryType.FACT, MemoryType.EVENT, MemoryType.RULE, MemoryType.GOAL]
    items = [
        NewMemory(actor="a", type=kinds[i % 4], text=f"memory number {i}", created_at=NOW - timedelta(days=i))
        for i in range(24)
    ] + [NewMemory(actor="b", type=MemoryType.FACT, text="another actor's memory")]
    ms = [r.memory for r in store.put_many(items)]
    store.update("a", ms[0].id, superseded_by=ms[1].uri)
    store.update("a", ms[13].id, valid_until=NOW - timedelta(days=1))
    embedded = [m for i, m in enumerate(ms) if i % 5 != 4]
    vectors = rng.normal(size=(len(embedded), 16)).astype(np.float32)
    store.put_vectors("m", np.array([m.label for m in embedded]), vectors, [m.content_hash for m in embedded])
    labels = [m.label for m in ms] + [10**12]
    params = replace(params_from_config(PagerConfig(), NOW), w_access=0.0, w_strength=0.0)
    ask = CandidateAsk(
        prior=labels[:12], types=SALIENT, params=params, cosine=labels[10:], model="m", vector=vectors[3]
    )
    return ms, labels, ask


def test_packing_rows_come_with_the_candidates_as_a_read_gives_them(store: Any) -> None:
    ms, labels, ask = _memories(store)
    read = store._reads.shown_rows("a", labels)  # the packing read itself
    assert set(read) == {m.label for m in ms[:24]}  # another actor's and no memory: left out
    store.forget_shown()
    store.candidate_facts("a", ask)
    count = _reads(store)
    held = store.shown_rows("a", labels)
    assert count[0] == 0  # every label was asked about: no round trip
    assert _fields(held) == _fields(read)
    assert held[ms[0].label].superseded_by == ms[1].uri and held[ms[13].label].valid_until is not None
    # a label the candidates did not name is read; the ones they did still come from them
    fresh = store.put(NewMemory(actor="a", type=MemoryType.FACT, text="written after the candidates")).memory
    store.candidate_facts("a", ask)
    count = _reads(store)
    both = store.shown_rows("a", [ms[2].label, fresh.label])
    assert count[0] == 1 and set(both) == {ms[2].label, fresh.label}
    assert _fields(both) == _fields(store._reads.shown_rows("a", [ms[2].label, fresh.label]))


def test_only_the_prior_or_only_the_cosines_asked(store: Any) -> None:
    ms, labels, ask = _memories(store)
    for part in (replace(ask, cosine=()), replace(ask, prior=(), params=None), replace(ask, vector=None)):
        asked = {int(x) for x in part.prior} | ({int(x) for x in part.cosine} if part.vector is not None else set())
        store.candidate_facts("a", part)
        count = _reads(store)
        held = store.shown_rows("a", sorted(asked))
        assert count[0] == 0
        assert _fields(held) == _fields(store._reads.shown_rows("a", sorted(asked)))


def test_another_process_change_is_seen_by_the_next_ranking(store: Any, pg_url: str) -> None:
    ms, labels, ask = _memories(store)
    lane = store.native_lanes("a", HashEmbedder(16))[1]
    lane.open()
    other = open_pg_store(pg_url, pool_max=3)  # its own pool and commit count: another process
    try:
        store.candidate_facts("a", ask)
        other.update("a", ms[2].id, superseded_by=ms[3].uri)
        other.delete("a", ms[5].id)
        assert store.shown_rows("a", [ms[2].label])[ms[2].label].superseded_by is None  # the same retrieve
        lane.search_scored("memory number", 5, [])  # the next ranking starts: the rows served their retrieve
        rows = store.shown_rows("a", [ms[2].label, ms[5].label])
        assert rows[ms[2].label].superseded_by == ms[3].uri and ms[5].label not in rows
    finally:
        other.close()


def test_own_commit_is_seen_at_once(store: Any) -> None:
    ms, labels, ask = _memories(store)
    store.candidate_facts("a", ask)
    store.update("a", ms[2].id, superseded_by=ms[3].uri)  # this process commits: its own writes are seen
    assert store.shown_rows("a", [ms[2].label])[ms[2].label].superseded_by == ms[3].uri


def test_rows_serve_their_thread_and_actor_and_not_for_long(store: Any) -> None:
    ms, labels, ask = _memories(store)
    store.candidate_facts("a", ask)
    count = _reads(store)
    seen: list[Any] = []
    worker = threading.Thread(target=lambda: seen.append(store.shown_rows("a", [ms[2].label])))
    worker.start()
    worker.join()
    assert count[0] == 1 and set(seen[0]) == {ms[2].label}  # another thread reads for itself
    assert store.shown_rows("b", [ms[24].label]) and count[0] == 2  # another actor: read
    assert store.shown_rows("a", [ms[2].label]) and count[0] == 2  # this thread, this actor: held
    actor, commits, at, asked, rows = store._shown._local.kept
    store._shown._local.kept = (actor, commits, at - 2 * pg_candidates.PREFETCH_S, asked, rows)  # long ago
    assert store.shown_rows("a", [ms[2].label]) and count[0] == 3


@pytest.fixture
def pager(pg_url: str) -> Iterator[Any]:
    p = seeded_pager(pg_url, TEXTS)
    yield p
    p.close()


def test_a_retrieve_makes_two_round_trips_and_sees_other_processes(pager: Any, pg_url: str) -> None:
    query = "garden weather errands"
    first = pager.retrieve(query)
    count = _reads(pager.store)
    assert [s.uri for s in pager.retrieve(query)] == [s.uri for s in first]
    assert count[0] == 2  # the vector search, the candidates with their packing rows
    other = open_pg_store(pg_url, pool_max=3)
    try:
        gone = parse_id(first[0].uri)
        other.update("a", gone, superseded_by=first[1].uri)
        assert all(s.uri != first[0].uri for s in pager.retrieve(query))
    finally:
        other.close()


def parse_id(uri: str) -> str:
    return uri.rsplit("/", 1)[-1]
