"""A large remember_many pauses Python's cyclic collector and always gives it back as it found it."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

import mempager
from mempager import PagerConfig
from mempager.errors import InvalidInput
from mempager.types import Memory
from mempager.writing.gcpause import collector_paused
from mempager.writing.writeback import GC_PAUSE_FROM

HASH = PagerConfig(embedder="hash")


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if was:
        gc.enable()
    else:  # pragma: no cover - pytest runs with the collector on
        gc.disable()


def _watch(p: mempager.Pager) -> list[bool]:
    """gc.isenabled() as seen by the store's change listener, i.e. in the middle of each write."""
    seen: list[bool] = []

    def listener(upserted: Sequence[Memory], removed: Sequence[int]) -> None:
        seen.append(gc.isenabled())

    p.store.add_change_listener(p.actor, listener)
    return seen


def test_a_large_batch_runs_paused_and_restores_the_collector(store_path: Path) -> None:
    with mempager.open(store_path, actor="neo", config=HASH) as p:
        p.workers.stop()
        seen = _watch(p)
        uris = p.remember_many([{"type": "fact", "text": f"fact number {i}"} for i in range(GC_PAUSE_FROM)])
        assert seen == [False] and gc.isenabled()
        assert len(set(uris)) == GC_PAUSE_FROM and p.get(uris[-1]).text == f"fact number {GC_PAUSE_FROM - 1}"
        p.remember_many([{"type": "fact", "text": "a small batch"}])  # below the threshold: not paused
        assert seen == [False, True] and gc.isenabled()


def test_a_refused_batch_restores_the_collector_and_stores_nothing(store_path: Path) -> None:
    with mempager.open(store_path, actor="neo", config=HASH) as p:
        p.workers.stop()
        before = len(p.store.live_labels("neo"))
        items = [{"type": "fact", "text": f"fact {i}"} for i in range(GC_PAUSE_FROM)] + [{"type": "fact", "text": " "}]
        with pytest.raises(InvalidInput, match=f"item {GC_PAUSE_FROM}"):
            p.remember_many(items)
        assert gc.isenabled()
        assert len(p.store.live_labels("neo")) == before == 0


def test_a_collector_the_application_disabled_stays_disabled(store_path: Path) -> None:
    with mempager.open(store_path, actor="neo", config=HASH) as p:
        p.workers.stop()
        gc.disable()
        p.remember_many([{"type": "fact", "text": f"fact {i}"} for i in range(GC_PAUSE_FROM)])
        assert not gc.isenabled()


def test_overlapping_pauses_in_threads_keep_it_paused_until_the_last_leaves() -> None:
    inside, release = threading.Event(), threading.Event()

    def other() -> None:
        with collector_paused():
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=other)
    with collector_paused():
        thread.start()
        assert inside.wait(10)
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other thread's batch is still running
    release.set()
    thread.join(10)
    assert gc.isenabled()


def test_an_inactive_pause_changes_nothing() -> None:
    with collector_paused(False):
        assert gc.isenabled()
    assert gc.isenabled()


def test_the_mirror_keeps_its_columns_out_of_the_collectors_walk(store_path: Path) -> None:
    """Every full collection in the process walks every element of every tracked list; the mirror's
    per-memory columns are numpy object arrays, which it does not walk, whatever the store's size."""
    with mempager.open(store_path, actor="neo", config=HASH) as p:
        p.workers.stop()
        uris = p.remember_many([{"type": "fact", "text": f"fact {i}", "tags": ["t"]} for i in range(50)])
        table = p.store.table("neo")
        assert table.obj and not any(gc.is_tracked(column) for column in table.obj.values())
        assert p.get(uris[7]).tags == ("t",) and p.get(uris[7]).text == "fact 7"
