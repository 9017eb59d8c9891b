"""A removed vector never reaches a saved index file, and the scrubbed file still serves searches."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from mempager.errors import IndexStale
from mempager.index.hnsw import HnswIndex
from mempager.index.hnsw_file import scrub_deleted

from .conftest import clustered

DIM = 32


def stored_bytes(index: HnswIndex, label: int) -> bytes:
    """The vector exactly as hnswlib holds it (it normalises on insert) for our label's row."""
    state = index._state
    row = state.rows[label]
    got = np.asarray(state.graph.get_items([row], return_type="numpy"), dtype=np.float32)[0]
    return got.tobytes()


def files_holding(directory: Path, needle: bytes) -> list[str]:
    return [f.name for f in directory.iterdir() if f.is_file() and needle in f.read_bytes()]


def test_save_leaves_no_removed_vector_in_any_file(tmp_path: Path) -> None:
    vectors = clustered(3000, DIM, seed=3)
    index = HnswIndex(DIM, exact_below=0)
    index.add(np.arange(3000), vectors)
    doomed = [5, 999, 2500]
    needles = {label: stored_bytes(index, label) for label in doomed}
    control = tmp_path / "before"
    index.save(control)
    assert all(files_holding(control, needle) for needle in needles.values())  # the probe can see them

    index.remove(doomed)
    saved = tmp_path / "after"
    index.save(saved)
    for label, needle in needles.items():
        assert files_holding(saved, needle) == [], f"label {label}'s vector is still in a saved file"
    kept = stored_bytes(index, 6)
    assert files_holding(saved, kept)  # live vectors are untouched

    loaded = HnswIndex(DIM, exact_below=0)
    loaded.load(saved)
    assert len(loaded) == 2997 and not any(label in loaded for label in doomed)
    queries = clustered(200, DIM, seed=4)
    agree = np.mean(
        [len({x for x, _ in loaded.search(q, 10)} & {x for x, _ in index.search(q, 10)}) / 10 for q in queries]
    )
    assert agree >= 0.98  # a tombstone keeps routing with a live neighbour's vector


def test_rescrub_and_replaced_labels(tmp_path: Path) -> None:
    """Re-adding a label tombstones its old row: the old vector goes too; saving twice stays clean."""
    vectors = clustered(2000, DIM, seed=5)
    index = HnswIndex(DIM, exact_below=0)
    index.add(np.arange(2000), vectors)
    old = stored_bytes(index, 42)
    index.add(np.array([42]), clustered(1, DIM, seed=99))
    index.save(tmp_path / "a")
    index.save(tmp_path / "b")
    for folder in ("a", "b"):
        assert files_holding(tmp_path / folder, old) == []
    loaded = HnswIndex(DIM, exact_below=0)
    loaded.load(tmp_path / "b")
    assert 42 in loaded


def test_foreign_layout_is_refused_untouched(tmp_path: Path) -> None:
    vectors = clustered(500, DIM, seed=6)
    index = HnswIndex(DIM, exact_below=0)
    index.add(np.arange(500), vectors)
    path = tmp_path / "graph.bin"
    index._state.graph.save_index(str(path))
    before = path.read_bytes()
    with pytest.raises(IndexStale, match="layout"):
        scrub_deleted(path, DIM + 1)  # the index's own dim disagrees with the file's offsets
    assert path.read_bytes() == before
    short = tmp_path / "short.bin"
    short.write_bytes(struct.pack("<Q", 0))
    with pytest.raises(IndexStale, match="too short"):
        scrub_deleted(short, DIM)
