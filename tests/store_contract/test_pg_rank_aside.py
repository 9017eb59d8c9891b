"""Over a large index the PostgreSQL semantic search runs in a helper thread beside the lexical
search (``lanes.aside``). The lexical lane then reads its own catch-up: the vector search's word
that nothing changed is for its own thread. What must hold: the same pages as in one thread; a
change another process commits before a retrieve is found by it, and so is one this process
commits; retrieves from several threads at once get their own answers."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any

import pytest

from mempager.store.pg import lanes as pg_lanes
from mempager.store.pg import open_pg_store
from mempager.types import MemoryType, NewMemory

from .pg_seeded import seeded_pager
from .test_pg_rank_facts import _reads

NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)
TEXTS = [f"note {i} about the garden, the weather and the errands" for i in range(40)] + [
    f"entry {i} on the kitchen, the recipes and the market" for i in range(40)
]
QUERIES = ["garden weather", "kitchen recipes market", "errands note 7", "entry 12 kitchen"]


@pytest.fixture
def pager(pg_url: str) -> Iterator[Any]:
    p = seeded_pager(pg_url, TEXTS)
    p.retriever.clock = lambda: NOW  # the prior's recency depends on the time: the same for every page
    yield p
    p.close()


def _aside(p: Any, on: bool) -> None:
    """Make the lane count as a large index (or not): only the thread its search runs in changes."""
    p.semantic.vectors_at_open = pg_lanes.ASIDE_FROM if on else 0
    assert p.semantic.searches_aside is on


def _search_threads(p: Any) -> list[str]:
    """The names of the threads the store's vector searches run in, from now on."""
    names: list[str] = []
    for name in ("search_with_queue", "search_with_latest"):
        call = getattr(p.store, name)

        def recorded(*args: Any, _call: Any = call) -> Any:
            names.append(threading.current_thread().name)
            return _call(*args)

        setattr(p.store, name, recorded)  # the instance's own attribute: found before the class's method
    return names


def _pages(p: Any) -> list[list[tuple[str, float]]]:
    return [[(s.uri, s.score) for s in p.retrieve(q)] for q in QUERIES]


def test_the_pages_are_those_of_one_thread(pager: Any) -> None:
    _aside(pager, False)
    inline = _pages(pager)
    threads = _search_threads(pager)
    _aside(pager, True)
    assert _pages(pager) == inline
    assert threads and all(name.startswith("mempager-aside") for name in threads)


def test_the_lexical_lane_reads_its_own_catch_up(pager: Any) -> None:
    _aside(pager, True)
    pager.retrieve("garden weather")
    calls: list[int] = []
    text_changes = pager.store.text_changes

    def counted(actor: str, seq: int) -> Any:
        calls.append(seq)
        return text_changes(actor, seq)

    pager.store.text_changes = counted
    count = _reads(pager.store)
    assert pager.retrieve("garden weather")
    assert calls == [pager.lexical.seq]  # its own read: the search's word went to the helper thread
    assert count[0] == 3  # the vector search, the catch-up beside it, the candidates


def test_another_process_write_is_found(pager: Any, pg_url: str) -> None:
    _aside(pager, True)
    pager.retrieve("zebra")
    other = open_pg_store(pg_url, pool_max=3)  # its own pool and commit count: another process
    try:
        got = other.put(NewMemory(actor="a", type=MemoryType.FACT, text="a zebra crossed the road")).memory
    finally:
        other.close()
    lanes, _ = pager.retriever.rank("zebra crossed", 10)
    assert got.label in {label for label, _ in lanes["lexical"]}
    assert any(s.uri == got.uri for s in pager.retrieve("zebra crossed"))


def test_own_write_is_found(pager: Any) -> None:
    _aside(pager, True)
    pager.retrieve("giraffe")
    uri = pager.remember_fact("a giraffe ate the leaves")
    assert any(s.uri == uri for s in pager.retrieve("giraffe leaves"))


def test_retrieves_in_several_threads_at_once(pager: Any) -> None:
    _aside(pager, False)
    alone = _pages(pager)
    _aside(pager, True)
    start = threading.Barrier(4)

    def run() -> list[list[list[tuple[str, float]]]]:
        start.wait()
        return [_pages(pager) for _ in range(2)]

    with ThreadPoolExecutor(max_workers=4) as pool:
        pages = [f.result() for f in [pool.submit(run) for _ in range(4)]]  # a thread's failure is raised here
    assert pages == [[alone, alone]] * 4
