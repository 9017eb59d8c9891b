"""The in-process mirror always equals the store file, and its salience equals the SQL formula."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mempager.config import PagerConfig
from mempager.errors import StoreLocked
from mempager.lanes.salience import params_from_config
from mempager.store.duckdb import DuckDBStore, open_store
from mempager.types import MemoryType, NewMemory

ops = st.lists(
    st.tuples(
        st.sampled_from(["put", "put_many", "update", "delete", "touch", "supersede"]),
        st.integers(0, 30),
        st.sampled_from([MemoryType.FACT, MemoryType.EVENT, MemoryType.PROFILE, MemoryType.GOAL]),
        st.floats(0, 1),
    ),
    max_size=40,
)


def _snapshot(store: DuckDBStore, actor: str) -> dict[int, object]:
    return store.reads.sql_get_many(actor, [m.label for m in store.query(actor, limit=10**9)])


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=ops)
def test_mirror_equals_sql_after_any_operations(tmp_path_factory, steps) -> None:  # type: ignore[no-untyped-def]
    store = DuckDBStore(tmp_path_factory.mktemp("mirror") / "m.duckdb")
    try:
        store.put(NewMemory(actor="a", type=MemoryType.FACT, text="seed"))
        table = store.table("a")  # loaded before the operations: exercised write-through
        base = datetime(2023, 1, 1, tzinfo=timezone.utc)
        for op, n, mtype, x in steps:
            existing = store.query("a", limit=10**9)
            target = existing[n % len(existing)] if existing else None
            if op == "put":
                store.put(
                    NewMemory(
                        actor="a", type=mtype, text=f"text {n}", importance=x, created_at=base + timedelta(days=n)
                    )
                )
            elif op == "put_many":
                store.put_many(
                    [NewMemory(actor=act, type=mtype, text=f"many {n} {i % 3}") for i in range(5) for act in ("a", "b")]
                )
            elif target is None:
                continue
            elif op == "update":
                store.update("a", target.id, strength=x, text=f"updated {n}", tags=["t"], metadata={"n": n})
            elif op == "delete":
                store.delete("a", target.id)
            elif op == "touch":
                store.touch("a", [target.label], base)
            elif op == "supersede":
                store.update("a", target.id, superseded_by="mem://a/fact/0123456789abcdef")
        truth = _snapshot(store, "a")
        assert table.get_many(list(truth)) == truth
        assert len(table) == len(truth)
        params = params_from_config(PagerConfig(), base + timedelta(days=40))
        types = list(MemoryType)
        fast, sql = store.salience("a", types, params, 25), store.sql_salience("a", types, params, 25)
        assert [label for label, _ in fast] == [label for label, _ in sql]
        assert [score for _, score in fast] == pytest.approx([score for _, score in sql])
        assert all(m.actor == "a" for m in table.get_many(list(truth)).values())
    finally:
        store.close()


def test_cold_load_equals_write_through(tmp_path: Path) -> None:
    path = tmp_path / "c.duckdb"
    store = DuckDBStore(path)
    store.put_many(
        [
            NewMemory(actor="a", type=MemoryType.EVENT, text=f"e{i}", tags=("x", str(i)), metadata={"i": i})
            for i in range(50)
        ]
    )
    warm = store.table("a").get_many(list(range(1, 60)))
    store.close()
    store = DuckDBStore(path)
    try:
        assert store.table("a").get_many(list(range(1, 60))) == warm
    finally:
        store.close()


def test_one_store_object_per_file_per_process(tmp_path: Path) -> None:
    path = tmp_path / "one.duckdb"
    first = open_store(path)
    second = open_store(path)
    assert first is second
    with pytest.raises(StoreLocked, match="already open in this process"):
        DuckDBStore(path)
    first.close()
    assert not second.closed  # still one user
    second.close()
    assert second.closed
    DuckDBStore(path).close()  # free again


def test_ids_and_hashes_of_any_shape_load_and_read_back_exactly(tmp_path: Path) -> None:
    """The mirror packs the ids and hashes the store makes; any other (a foreign import's, an older
    version's) is kept as it is, through a cold load and through write-through alike."""
    import duckdb

    from mempager.validate import content_digest

    path = tmp_path / "odd.duckdb"
    store = DuckDBStore(path)
    store.put_many([NewMemory(actor="a", type=MemoryType.FACT, text=f"fact {i}") for i in range(6)])
    labels = sorted(m.label for m in store.query("a", limit=100))
    store.close()
    con = duckdb.connect(str(path))
    odd = {labels[0]: ("abcdef012345", "SHORT"), labels[1]: ("0123456789ABCDEF", "ab" * 32 + "x")}
    for label, (memory_id, chash) in odd.items():
        con.execute("UPDATE memories SET id = ?, content_hash = ? WHERE label = ?", [memory_id, chash, label])
    con.close()
    store = DuckDBStore(path)
    try:
        truth = store.reads.sql_get_many("a", labels)
        assert {label: (truth[label].id, truth[label].content_hash) for label in odd} == odd
        table = store.table("a")  # a cold load: the SQL packs
        assert table.get_many(labels) == truth
        asked = np.array([*labels, 10**6], np.int64)
        assert table.content_hashes() == {label: truth[label].content_hash for label in labels}
        assert table.digests_of(asked).tolist() == [content_digest(truth[x].content_hash) for x in labels] + [-1]
        assert table.uris(labels) == {label: truth[label].uri for label in labels}
        assert store.get("a", "abcdef012345") == truth[labels[0]]  # the id index reads them back too
        store.update("a", "abcdef012345", text="fact 0, re-worded")  # write-through keeps the odd id
        assert table.get(labels[0]) == store.reads.sql_get_many("a", [labels[0]])[labels[0]]
        assert table.get(labels[0]).id == "abcdef012345"  # type: ignore[union-attr]
    finally:
        store.close()
