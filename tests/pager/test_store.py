"""The DuckDB store: durable, deduplicating, partitioned by actor."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pager.errors import DimensionMismatch, NonFiniteVector, SchemaTooNew, StoreLocked
from pager.migrations import LATEST
from pager.store import DuckDBStore
from pager.types import MemoryType, NewMemory, Scope, Source

text_st = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=200
).filter(str.strip)
meta_st = st.dictionaries(
    st.text(max_size=10),
    st.recursive(st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
                 lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
                 max_leaves=8),
    max_size=4,
)
time_st = st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2100, 1, 1),
                       timezones=st.just(timezone.utc))


@pytest.fixture
def store(tmp_path: Path):  # type: ignore[no-untyped-def]
    s = DuckDBStore(tmp_path / "s.duckdb")
    yield s
    s.close()


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(text=text_st, mtype=st.sampled_from(list(MemoryType)), source=st.sampled_from(list(Source)),
       scope=st.sampled_from(list(Scope)), conf=st.floats(0, 1), imp=st.floats(0, 1), stren=st.floats(0, 1),
       created=time_st, tags=st.lists(st.text(min_size=1, max_size=10), max_size=4).map(tuple), meta=meta_st)
def test_memory_round_trips(store, text, mtype, source, scope, conf, imp, stren, created, tags, meta):  # type: ignore[no-untyped-def]
    item = NewMemory(actor="a1", type=mtype, text=text, source=source, scope=scope, confidence=conf,
                     importance=imp, strength=stren, created_at=created, tags=tags, metadata=meta)
    result = store.put(item)
    got = store.get("a1", result.memory.id)
    assert got == result.memory
    if result.created:
        assert (got.text, got.type, got.source, got.scope, got.tags, dict(got.metadata)) == (
            text, mtype, source, scope, tags, meta)
        assert got.created_at == created
        assert (got.confidence, got.importance, got.strength) == (conf, imp, stren)
    assert got.uri == f"mem://a1/{mtype.value}/{got.id}"


def test_dedup_returns_existing_uri_and_reinforces(store: DuckDBStore) -> None:
    first = store.put(NewMemory(actor="a", type=MemoryType.FACT, text="The sky is blue."))
    again = store.put(NewMemory(actor="a", type=MemoryType.FACT, text="  the SKY is   blue "))
    assert first.created and not again.created
    assert again.memory.uri == first.memory.uri
    assert again.memory.strength > first.memory.strength
    assert again.memory.access_count == first.memory.access_count + 1
    assert store.counts("a") == {"fact": 1}
    # same words, another type or another actor: distinct memories
    assert store.put(NewMemory(actor="a", type=MemoryType.BELIEF, text="The sky is blue.")).created
    assert store.put(NewMemory(actor="b", type=MemoryType.FACT, text="The sky is blue.")).created


def test_events_at_different_times_are_distinct(store: DuckDBStore) -> None:
    t1, t2 = datetime(2023, 5, 8, tzinfo=timezone.utc), datetime(2023, 6, 1, tzinfo=timezone.utc)
    a = store.put(NewMemory(actor="a", type=MemoryType.EVENT, text="Thanks!", created_at=t1))
    b = store.put(NewMemory(actor="a", type=MemoryType.EVENT, text="Thanks!", created_at=t2))
    c = store.put(NewMemory(actor="a", type=MemoryType.EVENT, text="thanks", created_at=t1))
    assert a.created and b.created and not c.created


def test_put_many_dedups_within_and_across_batches(store: DuckDBStore) -> None:
    items = [NewMemory(actor="a", type=MemoryType.FACT, text=f"fact {i % 50}") for i in range(200)]
    results = store.put_many(items)
    assert sum(r.created for r in results) == 50
    assert len({r.memory.uri for r in results}) == 50
    again = store.put_many(items[:10] + [NewMemory(actor="a", type=MemoryType.FACT, text="new")])
    assert [r.created for r in again] == [False] * 10 + [True]
    assert store.counts("a") == {"fact": 51}


def test_actor_isolation_in_every_read(store: DuckDBStore) -> None:
    a = store.put(NewMemory(actor="alice", type=MemoryType.FACT, text="alice secret")).memory
    b = store.put(NewMemory(actor="bob", type=MemoryType.FACT, text="bob secret")).memory
    assert store.get("bob", a.id) is None
    assert store.get_many("bob", [a.label, b.label]) == {b.label: b}
    assert [m.text for m in store.query("bob", limit=100)] == ["bob secret"]
    assert store.delete("bob", a.id) is None and store.get("alice", a.id) == a
    assert store.find("bob", MemoryType.FACT, a.content_hash) is None
    sal = store.salience("bob", list(MemoryType), _params(), 100)
    assert [lab for lab, _ in sal] == [b.label]
    store.put_vectors("m", np.array([a.label, b.label]), np.eye(2, 4, dtype=np.float32),
                      [a.content_hash, b.content_hash])
    labels, _ = store.vectors("bob", "m")
    assert labels.tolist() == [b.label]
    assert [p.label for p in store.pending("bob", "other", 10)] == [b.label]


def _params():  # type: ignore[no-untyped-def]
    from pager.config import PagerConfig
    from pager.salience import params_from_config

    return params_from_config(PagerConfig(), datetime.now(timezone.utc))


def test_vectors_reject_bad_shapes_and_values(store: DuckDBStore) -> None:
    m = store.put(NewMemory(actor="a", type=MemoryType.FACT, text="x")).memory
    with pytest.raises(NonFiniteVector):
        store.put_vectors("m", np.array([m.label]), np.array([[np.nan, 0, 0]], np.float32), [m.content_hash])
    with pytest.raises(DimensionMismatch):
        store.put_vectors("m", np.array([m.label]), np.ones((1, 3), np.float64), [m.content_hash])
    store.put_vectors("m", np.array([m.label]), np.ones((1, 3), np.float32), [m.content_hash])
    with pytest.raises(DimensionMismatch, match="3-d"):
        store.put_vectors("m", np.array([m.label]), np.ones((1, 4), np.float32), [m.content_hash])
    assert store.vectors("a", "m")[1].shape == (1, 3)


def test_stale_vectors_are_not_stored(store: DuckDBStore) -> None:
    m = store.put(NewMemory(actor="a", type=MemoryType.FACT, text="old words")).memory
    store.update("a", m.id, text="new words")  # re-worded while it was being embedded
    stored = store.put_vectors("m", np.array([m.label]), np.ones((1, 3), np.float32), [m.content_hash])
    assert stored.tolist() == []
    assert [p.text for p in store.pending("a", "m", 10)] == ["new words"]


def test_migrations_recorded_and_newer_schema_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.duckdb"
    s = DuckDBStore(path)
    assert s._fetch("SELECT max(version) FROM schema_migrations")[0][0] == LATEST
    s._fetch("INSERT INTO schema_migrations (version, name) VALUES (?, 'from the future')", [LATEST + 1])
    s.close()
    with pytest.raises(SchemaTooNew, match="upgrade mempager"):
        DuckDBStore(path)


def test_second_process_gets_store_locked(tmp_path: Path) -> None:
    path = tmp_path / "locked.duckdb"
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            from pager.store import DuckDBStore
            s = DuckDBStore({str(path)!r}); print("ready", flush=True); time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        with pytest.raises(StoreLocked) as info:
            DuckDBStore(path)
        message = str(info.value)
        assert str(path) in message and "another process" in message
    finally:
        holder.kill()
        holder.wait()


WRITER = """
import sys
from pager.store import DuckDBStore
from pager.types import NewMemory, MemoryType
s = DuckDBStore(sys.argv[1])
i = 0
while True:
    if i % 7 == 3:
        batch = [NewMemory(actor="w", type=MemoryType.EVENT, text=f"batch {i} item {j}") for j in range(50)]
        s.put_many(batch)
        print(f"B {i}", flush=True)
    else:
        s.put(NewMemory(actor="w", type=MemoryType.FACT, text=f"fact number {i}"))
        print(f"A {i}", flush=True)
    i += 1
"""


@pytest.mark.parametrize("round_", range(10))
def test_acknowledged_writes_survive_sigkill(tmp_path: Path, round_: int) -> None:
    path = tmp_path / f"crash{round_}.duckdb"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    acked: list[str] = []
    assert proc.stdout is not None
    deadline = time.monotonic() + 0.4 + 0.15 * round_
    for line in proc.stdout:
        acked.append(line.strip())
        if time.monotonic() > deadline and len(acked) > 5:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    s = DuckDBStore(path)
    texts = {m.text for m in s.query("w", limit=10_000_000)}
    for ack in acked:
        kind, i = ack.split()
        if kind == "A":
            assert f"fact number {i}" in texts
        else:
            assert all(f"batch {i} item {j}" in texts for j in range(50))
    # no partial batch: every batch is all-or-nothing
    batches: dict[str, int] = {}
    for t in texts:
        if t.startswith("batch "):
            batches[t.split()[1]] = batches.get(t.split()[1], 0) + 1
    assert all(n == 50 for n in batches.values())
    s.close()
