"""A large index reads its saved rows from the saved graph file: same answers as one that holds them
in memory, through adds, removes, rebuilds and saves; damage is still detected before use."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from mempager.errors import IndexStale
from mempager.index import hnsw_rows
from mempager.index.hnsw import HnswIndex
from mempager.index.hnsw_file import read_layout
from mempager.index.hnsw_rows import FileRows, MemoryRows
from mempager.index.manifest import MANIFEST_NAME, read_manifest

DIM = 16
MakeVectors = Callable[..., np.ndarray]


def pair(tmp_path: Path, vectors: np.ndarray) -> tuple[HnswIndex, HnswIndex]:
    """The same saved index loaded twice: rows in memory, and rows read from the file."""
    built = HnswIndex(DIM, exact_below=0)
    built.add(np.arange(len(vectors)) * 3, vectors)
    built.remove([6, 9, 300])
    built.save(tmp_path)
    memory, filed = HnswIndex(DIM, exact_below=0), HnswIndex(DIM, exact_below=0, resident_max_rows=0)
    memory.load(tmp_path)
    filed.load(tmp_path)
    assert isinstance(memory._state.vectors, MemoryRows) and isinstance(filed._state.vectors, FileRows)
    return memory, filed


def same_answers(a: HnswIndex, b: HnswIndex, queries: np.ndarray, labels: list[int]) -> None:
    for q in queries:
        assert a.search(q, 10) == b.search(q, 10)
        assert a.search(q, 5, allow=frozenset(labels[:40])) == b.search(q, 5, allow=frozenset(labels[:40]))
    assert np.array_equal(a.get_vectors(labels), b.get_vectors(labels))
    assert a.labels().tolist() == b.labels().tolist()


def test_file_rows_answer_as_memory_rows(tmp_path: Path, make_vectors: MakeVectors) -> None:
    vectors = make_vectors(1500, DIM)
    memory, filed = pair(tmp_path, vectors)
    queries = make_vectors(30, DIM, seed=5)
    same_answers(memory, filed, queries, memory.labels().tolist())
    for index in (memory, filed):  # rows added after loading live in memory beside the file's
        index.add(np.arange(5000, 5100), make_vectors(100, DIM, seed=8))
        index.add(np.array([3, 12]), make_vectors(2, DIM, seed=9))  # replaces two saved rows
        index.remove([15, 5001])
    same_answers(memory, filed, queries, memory.labels().tolist())
    with pytest.raises(KeyError):
        filed.get_vectors([15])
    filed.rebuild()
    memory.rebuild()
    same_answers(memory, filed, queries, memory.labels().tolist())


def test_a_save_switches_a_large_index_to_its_new_file(tmp_path: Path, make_vectors: MakeVectors) -> None:
    index = HnswIndex(DIM, exact_below=0, resident_max_rows=100)
    index.add(np.arange(400), make_vectors(400, DIM))
    assert isinstance(index._state.vectors, MemoryRows)
    before = index.get_vectors(range(400))
    index.save(tmp_path)
    assert isinstance(index._state.vectors, FileRows)
    assert np.array_equal(index.get_vectors(range(400)), before)
    index.remove([7])
    index.add(np.array([900]), make_vectors(1, DIM, seed=3))
    index.save(tmp_path)  # written from the file's rows plus the new one, then read from it
    assert np.array_equal(index.get_vectors(range(8, 400)), before[8:])
    again = HnswIndex(DIM, resident_max_rows=100)
    again.load(tmp_path)
    assert again.labels().tolist() == index.labels().tolist()
    assert np.array_equal(again.get_vectors([900]), index.get_vectors([900]))


def test_a_removed_vector_leaves_the_file_backed_copy_and_the_next_save(tmp_path: Path) -> None:
    signs = np.where(np.random.default_rng(42).integers(0, 2, DIM) == 1, 1.0, -1.0)
    secret = (0.25 * signs).astype(np.float32)[None, :]  # exactly unit length: stored byte for byte
    index = HnswIndex(DIM, resident_max_rows=0)
    index.add(np.arange(300), np.random.default_rng(1).standard_normal((300, DIM)).astype(np.float32))
    index.add(np.array([777]), secret)
    index.save(tmp_path)
    assert isinstance(index._state.vectors, FileRows)
    index.remove([777])
    row = 300  # its row: read from the file, it now reads as zeros
    assert not index._state.vectors.take(np.array([row])).any()
    index.save(tmp_path)
    assert sum(p.read_bytes().count(secret.tobytes()) for p in tmp_path.iterdir()) == 0


def test_many_rows_are_read_through_a_mapping(tmp_path: Path, make_vectors: MakeVectors, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    memory, filed = pair(tmp_path, make_vectors(1500, DIM))
    monkeypatch.setattr(hnsw_rows, "_PREAD_MAX", 10)
    monkeypatch.setattr(hnsw_rows, "_SLICE", 128)
    rows = np.random.default_rng(3).permutation(1500)
    assert np.array_equal(memory._state.vectors.take(rows), filed._state.vectors.take(rows))


@pytest.mark.parametrize("where", ["labels", "records", "flags", "vector"])
def test_damage_to_the_saved_rows_is_found_on_load(tmp_path: Path, make_vectors: MakeVectors, where: str) -> None:
    pair(tmp_path, make_vectors(1500, DIM))
    manifest = read_manifest(tmp_path)
    assert manifest is not None and manifest.files["rows"].crc32 and manifest.files["index"].crc32
    which = "index" if where == "vector" else "rows"
    path = tmp_path / manifest.files[which].name
    data = bytearray(path.read_bytes())
    where_in_graph = (
        read_layout(path, DIM).vectors_at + 700 * read_layout(path, DIM).per_element + 2 if which == "index" else 0
    )
    at = {"labels": 16, "records": 8 * 1500 + 40, "flags": len(data) - 3, "vector": where_in_graph}[where]
    data[at] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(IndexStale, match="checksum"):
        HnswIndex(DIM, resident_max_rows=0).load(tmp_path)


def test_a_manifest_without_crcs_is_checked_by_its_sha256(tmp_path: Path, make_vectors: MakeVectors) -> None:
    pair(tmp_path, make_vectors(1500, DIM))
    body = json.loads((tmp_path / MANIFEST_NAME).read_text())
    for entry in body["files"].values():
        del entry["crc32"]
    (tmp_path / MANIFEST_NAME).write_text(json.dumps(body))
    HnswIndex(DIM, resident_max_rows=0).load(tmp_path)  # intact: loads
    graph = tmp_path / body["files"]["index"]["name"]
    data = bytearray(graph.read_bytes())
    data[len(data) // 2] ^= 0x10
    graph.write_bytes(bytes(data))
    with pytest.raises(IndexStale, match="checksum"):
        HnswIndex(DIM, resident_max_rows=0).load(tmp_path)


def test_crcs_in_a_manifest_must_cover_the_file(tmp_path: Path, make_vectors: MakeVectors) -> None:
    pair(tmp_path, make_vectors(200, DIM))
    body = json.loads((tmp_path / MANIFEST_NAME).read_text())
    body["files"]["rows"]["crc32"] = [0, 1]  # two chunks for a file of one
    (tmp_path / MANIFEST_NAME).write_text(json.dumps(body))
    with pytest.raises(IndexStale, match="malformed"):
        HnswIndex(DIM).load(tmp_path)
