"""The DuckDB store's bulk reads for opening at scale: vectors read a label range at a time, the
mirror's id index built on first use, DuckDB's read cache let go of; none changes an answer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mempager.store import vectors as vector_rows
from mempager.store.duckdb import DuckDBStore
from mempager.types import MemoryType, NewMemory


def fill(store: DuckDBStore, n: int, actor: str = "a") -> list[int]:
    items = [NewMemory(actor=actor, type=MemoryType.FACT, text=f"memory number {i}") for i in range(n)]
    memories = [r.memory for r in store.put_many(items)]
    rng = np.random.default_rng(n)
    vectors = rng.normal(size=(n, 8)).astype(np.float32)
    labels = np.array([m.label for m in memories], dtype=np.int64)
    store.put_vectors("m", labels, vectors, [m.content_hash for m in memories])
    return [int(x) for x in labels]


def test_vectors_in_slices_equal_one_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = DuckDBStore(tmp_path / "s.duckdb")
    try:
        labels = fill(store, 50)
        fill(store, 7, actor="b")  # interleaved labels of another actor stay out
        store.delete_many("a", [m.id for m in store.of_types("a", [MemoryType.FACT])][:5])
        whole_labels, whole = store.vectors("a", "m")
        monkeypatch.setattr(vector_rows, "_SLICE", 4)  # many label ranges
        sliced_labels, sliced = store.vectors("a", "m")
        assert sliced_labels.tolist() == whole_labels.tolist() == sorted(whole_labels.tolist())
        assert len(whole_labels) == 45 and set(whole_labels.tolist()) <= set(labels)
        np.testing.assert_array_equal(sliced, whole)
        since_labels, _ = store.vectors_since("a", "m", 40)
        assert since_labels.tolist() == [x for x in whole_labels.tolist() if x in since_labels.tolist()]
        assert store.vector_labels("a", "m").tolist() == whole_labels.tolist()
        empty_labels, empty = store.vectors("nobody", "m")
        assert len(empty_labels) == 0 and empty.shape == (0, 0)
    finally:
        store.close()


def test_mirror_ids_after_a_bulk_load(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    store = DuckDBStore(path)
    fill(store, 20)
    store.close()
    store = DuckDBStore(path)  # a fresh mirror, loaded in bulk
    try:
        memories = store.of_types("a", [MemoryType.FACT])
        gone = memories[0]
        store.delete_many("a", [gone.id])  # before the id index exists
        assert store.get("a", gone.id) is None
        kept = memories[1]
        assert store.get("a", kept.id) == kept
        new = store.put(NewMemory(actor="a", type=MemoryType.FACT, text="written after the index"))
        assert store.get("a", new.memory.id) == new.memory
        store.release_cache()
        assert store.get("a", memories[2].id) == memories[2]
        assert store.vectors("a", "m")[0].tolist() == sorted(m.label for m in memories[1:])
    finally:
        store.close()
