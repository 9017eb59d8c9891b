"""The lexical lane's catch-up on PostgreSQL rides with the vector search: the search statement
also reads the seq of the actor's latest text change, and when the lexical lane already stands
there the retrieve's lexical search makes no read of its own. What must still hold: a change
another process commits is found by the next retrieve, and so is one this process commits
between the vector search and the lexical search; the "nothing changed" serves one search only,
and not for long."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from mempager.store.pg import lanes as pg_lanes
from mempager.store.pg import open_pg_store
from mempager.types import MemoryType, NewMemory

from .pg_seeded import seeded_pager
from .test_pg_rank_facts import _reads

TEXTS = [f"note {i} about the garden, the weather and the errands" for i in range(20)]


@pytest.fixture
def pager(pg_url: str) -> Iterator[Any]:
    p = seeded_pager(pg_url, TEXTS)
    yield p
    p.close()


def _lexical(p: Any, query: str) -> set[int]:
    return {label for label, _ in p.lexical.search_scored(query, 10, [])[0]}


def test_nothing_changed_means_no_catch_up_read(pager: Any) -> None:
    vector = pager.semantic.embed_query("garden weather")
    pager.semantic.search_snapshot(vector, 10)
    count = _reads(pager.store)
    assert _lexical(pager, "garden weather")
    assert count[0] == 0  # the search said nothing changed: no read of its own
    assert _lexical(pager, "garden weather")
    assert count[0] == 1  # once only: the next search reads again

    pager.semantic.search_snapshot(vector, 10)
    commits, _ = pager.lexical._fresh.mark
    pager.lexical._fresh.mark = (commits, pg_lanes.time.monotonic() - 2 * pg_lanes.FRESH_S)  # long ago
    count = _reads(pager.store)
    _lexical(pager, "garden weather")
    assert count[0] == 1  # too old to stand on


def test_another_process_write_is_found(pager: Any, pg_url: str) -> None:
    other = open_pg_store(pg_url, pool_max=3)  # its own pool and commit count: another process
    try:
        vector = pager.semantic.embed_query("zebra")
        pager.semantic.search_snapshot(vector, 10)  # up to date now: the mark is set
        before = pager.store.commits
        got = other.put(NewMemory(actor="a", type=MemoryType.FACT, text="a zebra crossed the road")).memory
        assert pager.store.commits == before  # not this process's commit: only the search can tell
        # the next retrieve's search sees the change (and voids the mark): the lexical search reads it
        pager.semantic.search_snapshot(vector, 10)
        assert got.label in _lexical(pager, "zebra")
        assert any(s.uri == got.uri for s in pager.retrieve("zebra crossed"))
    finally:
        other.close()


def test_own_write_between_the_searches_is_found(pager: Any, pg_url: str) -> None:
    vector = pager.semantic.embed_query("giraffe")
    pager.semantic.search_snapshot(vector, 10)  # nothing changed: the mark is set
    # this process commits (another handle on the same store: the same process's count)
    same = open_pg_store(pg_url)
    assert same is pager.store
    got = same.put(NewMemory(actor="a", type=MemoryType.FACT, text="a giraffe ate the leaves")).memory
    same.close()
    assert got.label in _lexical(pager, "giraffe")  # the commit voided the mark: caught up


def test_a_retrieve_reads_text_changes_only_after_a_change(pager: Any, pg_url: str) -> None:
    calls: list[int] = []
    text_changes = pager.store.text_changes

    def counted(actor: str, seq: int) -> Any:
        calls.append(seq)
        return text_changes(actor, seq)

    pager.store.text_changes = counted  # the instance's own attribute: found before the class's method
    try:
        pager.retrieve("garden errands")
        calls.clear()
        assert pager.retrieve("garden errands") and calls == []  # nothing changed: no catch-up read
        other = open_pg_store(pg_url, pool_max=3)
        got = other.put(NewMemory(actor="a", type=MemoryType.FACT, text="errands for the garden shed")).memory
        other.close()
        assert any(s.uri == got.uri for s in pager.retrieve("garden shed errands"))
        assert len(calls) == 1  # another process wrote: one catch-up read
    finally:
        del pager.store.text_changes
