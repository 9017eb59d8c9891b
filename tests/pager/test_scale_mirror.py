"""The mirror loaded in label ranges, with codes for type/scope/source, equals the store row by row;
its packing rows and per-type lists equal what whole memories say."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from mempager.lanes.rows import Row
from mempager.store import mirrors
from mempager.store.duckdb import DuckDBStore
from mempager.types import MemoryType, NewMemory, Scope, Source

BASE = datetime(2024, 3, 1, tzinfo=timezone.utc)


def fill(store: DuckDBStore) -> None:
    """Every type, source and scope; tags, metadata, expiry and supersession; two actors interleaved."""
    types, sources, scopes = list(MemoryType), list(Source), list(Scope)
    items = []
    for i in range(300):
        items.append(
            NewMemory(
                actor="a" if i % 3 else "b",
                type=types[i % len(types)] if types[i % len(types)] is not MemoryType.PATTERN else MemoryType.FACT,
                text=f"memory {i} " + "é" * (i % 3),
                source=sources[i % len(sources)],
                scope=scopes[i % len(scopes)],
                importance=(i % 10) / 10,
                created_at=BASE + timedelta(hours=i),
                tags=tuple(f"t{j}" for j in range(i % 3)),
                metadata={"n": i, "kind": "x"} if i % 4 == 0 else ({"same": True} if i % 4 == 1 else {}),
            )
        )
    store.put_many(items)
    some = store.query("a", limit=40)
    for memory in some[:10]:
        store.delete("a", memory.id)  # gaps in the labels
    store.update("a", some[10].id, superseded_by="mem://a/fact/0123456789abcdef")
    store.update("a", some[11].id, valid_until=BASE + timedelta(days=1))


@pytest.mark.parametrize("rows_per_query", [7, 1000])
def test_a_reopened_mirror_equals_the_store(tmp_path: Path, monkeypatch, rows_per_query: int) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "m.duckdb"
    store = DuckDBStore(path)
    fill(store)
    store.close()
    monkeypatch.setattr(mirrors, "_SLICE", rows_per_query)  # 7: the load takes many label ranges
    store = DuckDBStore(path)
    try:
        for actor in ("a", "b"):
            truth = store.reads.sql_get_many(actor, [m.label for m in store.query(actor, limit=10**9)])
            table = store.table(actor)
            assert table.get_many(list(truth)) == truth and len(table) == len(truth)
            rows = table.rows_for(list(truth), Row)
            for label, memory in truth.items():
                row = rows[label]
                assert (row.label, row.uri, row.type, row.text, row.source) == (
                    memory.label,
                    memory.uri,
                    memory.type,
                    memory.text,
                    memory.source,
                )
                assert (row.created_at, row.superseded_by, row.valid_until) == (
                    memory.created_at,
                    memory.superseded_by,
                    memory.valid_until,
                )
            assert table.uris(list(truth)) == {label: m.uri for label, m in truth.items()}
            for kinds in ([MemoryType.GOAL], [MemoryType.RULE, MemoryType.PROFILE], list(MemoryType)):
                for order in ("newest", "oldest"):
                    fast = store.of_types(actor, kinds, order, 1000)
                    sql = store.query(actor, types=kinds, order=order, limit=1000)
                    assert fast == sql
    finally:
        store.close()


def test_per_type_lists_follow_writes_and_deletes(tmp_path: Path) -> None:
    store = DuckDBStore(tmp_path / "t.duckdb")
    try:
        store.put(NewMemory(actor="a", type=MemoryType.RULE, text="first rule"))
        table = store.table("a")
        assert [m.text for m in table.of_types([MemoryType.RULE], True, 10)] == ["first rule"]
        second = store.put(NewMemory(actor="a", type=MemoryType.RULE, text="second rule")).memory
        store.put_many([NewMemory(actor="a", type=MemoryType.RULE, text=f"rule {i}") for i in range(70)])
        assert len(table.of_types([MemoryType.RULE], True, 1000)) == 72
        store.delete("a", second.id)
        store.update("a", table.of_types([MemoryType.RULE], False, 1)[0].id, text="first rule, reworded")
        want = store.query("a", types=[MemoryType.RULE], order="oldest", limit=1000)
        assert table.of_types([MemoryType.RULE], False, 1000) == want
    finally:
        store.close()
