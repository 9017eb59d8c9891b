"""Tombstones, the rebuild threshold, and purging forgotten vectors from memory and disk."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from mempager.index.exact import ExactIndex
from mempager.index.hnsw import HnswIndex

MakeVectors = Callable[..., np.ndarray]
DIM = 16


def test_needs_rebuild_once_tombstones_exceed_the_share(make_vectors: MakeVectors) -> None:
    index = HnswIndex(DIM, max_deleted_share=0.2)
    index.add(np.arange(100), make_vectors(100, DIM))
    index.remove(range(20))
    assert index.deleted_share() == pytest.approx(0.2)
    assert not index.needs_rebuild()  # at the threshold: not yet
    index.add(np.array([50]), make_vectors(1, DIM, seed=5))  # a rewrite tombstones the old row too
    assert index.deleted_share() == pytest.approx(21 / 101)
    assert index.needs_rebuild()
    index.rebuild()
    assert index.deleted_share() == 0.0 and not index.needs_rebuild()
    assert len(index) == 80


def test_remove_does_not_rebuild_on_its_own(make_vectors: MakeVectors) -> None:
    index = HnswIndex(DIM)
    index.add(np.arange(100), make_vectors(100, DIM))
    index.remove(range(90))
    assert index.deleted_share() == pytest.approx(0.9)


def test_rebuild_preserves_search_results(make_vectors: MakeVectors) -> None:
    vectors = make_vectors(3000, DIM, seed=6)
    labels = np.arange(3000, dtype=np.int64) * 11
    index = HnswIndex(DIM, ef=128, exact_below=0)
    index.add(labels, vectors)
    index.remove(labels[::3].tolist())
    index.add(labels[1:300:3], make_vectors(100, DIM, seed=7))
    queries = make_vectors(50, DIM, seed=8)
    before = [index.search(q, 10) for q in queries]
    live = index.labels()
    kept = index.get_vectors(live)

    index.rebuild()
    assert index.labels().tolist() == live.tolist()
    np.testing.assert_array_equal(index.get_vectors(live), kept)
    after = [index.search(q, 10) for q in queries]
    ref = ExactIndex(DIM)
    ref.add(live, index.get_vectors(live))
    for got_before, got_after, q in zip(before, after, queries, strict=True):
        want = {label for label, _ in ref.search(q, 10)}
        assert len(want & {label for label, _ in got_after}) >= 9
        assert len({label for label, _ in got_before} & {label for label, _ in got_after}) >= 9


def test_save_and_rebuild_purge_a_forgotten_vector_from_the_saved_files(
    tmp_path: Path, make_vectors: MakeVectors
) -> None:
    signs = np.where(np.random.default_rng(42).integers(0, 2, DIM) == 1, 1.0, -1.0)
    secret = (0.25 * signs).astype(np.float32)[None, :]  # exactly unit length: stored byte for byte
    needle = secret.tobytes()
    index = HnswIndex(DIM)
    index.add(np.arange(500), make_vectors(500, DIM))
    index.add(np.array([777]), secret)
    index.remove([777])
    assert 777 not in index

    index.save(tmp_path)
    on_disk = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    rows_file = next(name for name in on_disk if name.startswith("rows-"))
    assert on_disk[rows_file].count(needle) == 0
    graph_file = next(name for name in on_disk if name.startswith("hnsw-"))
    # hnswlib keeps the tombstone's bytes in memory, but save() overwrites them in the file it writes
    assert on_disk[graph_file].count(needle) == 0

    index.rebuild()
    index.save(tmp_path)
    assert sum(p.read_bytes().count(needle) for p in tmp_path.iterdir()) == 0
    assert len(index) == 500
