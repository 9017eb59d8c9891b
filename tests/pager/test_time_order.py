"""The mirror's creation-time order (store.time_order) answers the time lane's questions exactly as a
scan of every row does, through appends, moved times, removals and rebuilds."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mempager.store import time_order
from mempager.store.duckdb import DuckDBStore
from mempager.store.time_order import TimeOrder
from mempager.types import MemoryType, NewMemory


class Table:
    """A mirror's columns as TimeOrder reads them (rows appended, times moved, rows removed)."""

    def __init__(self) -> None:
        self.created = np.zeros(0)
        self.alive = np.zeros(0, bool)
        self.labels = np.zeros(0, np.int64)
        self.order = TimeOrder()

    def append(self, times: list[float]) -> None:
        start = len(self.created)
        self.created = np.concatenate((self.created, np.asarray(times, np.float64)))
        self.alive = np.concatenate((self.alive, np.ones(len(times), bool)))
        self.labels = np.concatenate((self.labels, np.arange(start, start + len(times), dtype=np.int64) * 7 % 101))

    def move(self, rows: list[int], times: list[float]) -> None:
        at = np.asarray(rows, np.int64)
        old = self.created[at].copy()
        self.created[at] = times
        self.order.moved(at, old, self.created[at])

    def remove(self, rows: list[int]) -> None:
        self.alive[rows] = False

    def scan_between(self, since: float, until: float, limit: int) -> list[int]:
        rows = np.flatnonzero(self.alive & (self.created >= since) & (self.created < until))
        return rows[np.lexsort((-self.labels[rows], -self.created[rows]))][:limit].tolist()

    def scan_span(self) -> tuple[float, float] | None:
        live = self.created[self.alive]
        return (float(live.min()), float(live.max())) if len(live) else None


times = st.lists(st.integers(0, 60).map(float), min_size=1, max_size=30)  # few distinct times: many ties
steps = st.lists(
    st.tuples(
        st.sampled_from(["append", "move", "remove", "ask"]),
        times,
        st.integers(0, 60),
        st.integers(0, 70),
        st.integers(0, 40),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=400, deadline=None)
@given(times, steps, st.sampled_from([1, 8, 4096]))
def test_windows_and_span_are_the_scans(initial, ops, rebuild_min) -> None:  # type: ignore[no-untyped-def]
    table = Table()
    table.append(initial)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(time_order, "REBUILD_MIN", rebuild_min)  # 1: rebuilt at every question; 4096: never again
        patch.setattr(time_order, "_WALK", 3)  # short walks: the window's end crosses many chunks
        for op, values, a, b, limit in ops:
            n = len(table.created)
            if op == "append":
                table.append(values)
            elif op == "move":
                rows = [(a + i * b) % n for i in range(min(len(values), n))]
                table.move(rows, values[: len(rows)])
            elif op == "remove":
                table.remove([(a + i) % n for i in range(b % 5 + 1)])
            since, until = float(min(a, b)), float(max(a, b) + 1)
            got = table.order.between(since, until, limit, len(table.created), table.created, table.alive, table.labels)
            assert got.tolist() == table.scan_between(since, until, limit)
            assert table.order.span(len(table.created), table.created, table.alive, table.labels) == table.scan_span()


def test_the_store_mirror_answers_as_a_scan_through_its_writes(tmp_path: Path) -> None:
    """Through the DuckDB store's write-through mirror: single puts, a batch (the column path),
    updates and deletes, before and after the order is first built."""
    store = DuckDBStore(tmp_path / "t.duckdb")
    try:
        base = datetime(2023, 5, 1, tzinfo=timezone.utc)

        def put(i: int) -> None:
            store.put(
                NewMemory(actor="a", type=MemoryType.EVENT, text=f"turn {i}", created_at=base + timedelta(hours=i))
            )

        def scan(since: datetime, until: datetime, limit: int) -> list[int]:
            held = [m for m in store.query("a", limit=10**9) if since <= m.created_at < until]
            held.sort(key=lambda m: (-m.created_at.timestamp(), -m.label))
            return [m.label for m in held[:limit]]

        def check() -> None:
            for since, until, limit in ((base, base + timedelta(days=2), 50), (base, base + timedelta(days=40), 5)):
                got = store.created_between("a", since.timestamp(), until.timestamp(), limit).tolist()
                assert got == scan(since, until, limit)
            every = store.query("a", limit=10**9)
            span = store.created_span("a")
            want = (min(m.created_at for m in every).timestamp(), max(m.created_at for m in every).timestamp())
            assert span == want

        for i in range(10):
            put(i)
        check()  # builds the order
        store.put_many(
            [
                NewMemory(actor="a", type=MemoryType.EVENT, text=f"batch {i}", created_at=base + timedelta(hours=3 * i))
                for i in range(100)
            ]
        )
        put(500)
        check()
        newest = store.query("a", limit=3, order="newest")
        oldest = store.query("a", limit=2, order="oldest")
        store.delete_many("a", [m.id for m in newest + oldest])  # the span's ends go: the next ones answer
        store.update("a", store.query("a", limit=1)[0].id, text="re-worded")
        check()
    finally:
        store.close()
