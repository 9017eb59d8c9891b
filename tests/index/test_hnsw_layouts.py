"""The saved graph file holds the index's own vectors (``hnsw_file.stamp``), so a save is the graph plus
a small rows file; an older save (graph plus a vectors file) still loads, and its next save is the newer
layout. Damage to either layout is found before hnswlib or a search reads a byte of it."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import hnswlib
import numpy as np
import pytest

from mempager.errors import IndexStale
from mempager.index import hnsw_state
from mempager.index import manifest as persist
from mempager.index.hnsw import HnswIndex
from mempager.index.hnsw_file import read_layout, stamp
from mempager.index.hnsw_rows import FileRows, MemoryRows
from mempager.index.manifest import MANIFEST_NAME, Manifest, read_manifest

DIM = 16
MakeVectors = Callable[..., np.ndarray]


def built(make_vectors: MakeVectors, n: int = 1500) -> HnswIndex:
    index = HnswIndex(DIM, exact_below=0)
    index.add(np.arange(n) * 3, make_vectors(n, DIM))  # one batch: hnswlib's threads number the rows
    index.remove([6, 9, 300])
    index.add(np.array([12]), make_vectors(1, DIM, seed=4))  # a replaced row: a tombstone too
    return index


def older_layout(directory: Path, index: HnswIndex) -> None:
    """Rewrite a save of ``index`` the way saves were written before the graph held our vectors:
    the graph file plus a file of labels, vectors and live flags."""
    manifest = read_manifest(directory)
    assert manifest is not None
    state = index._state
    vectors = persist.write_content_file(
        directory, "vectors", ".bin", lambda path: persist.write_rows(path, *state.snapshot())
    )
    (directory / manifest.files["rows"].name).unlink()
    older = Manifest(
        kind=manifest.kind,
        dim=manifest.dim,
        M=manifest.M,
        ef_construction=manifest.ef_construction,
        count=manifest.count,
        rows=manifest.rows,
        deleted=manifest.deleted,
        max_label=manifest.max_label,
        files={"index": manifest.files["index"], "vectors": vectors},
        meta=manifest.meta,
    )
    persist.write_manifest(directory, older)


def same(a: HnswIndex, b: HnswIndex, queries: np.ndarray) -> None:
    labels = a.labels().tolist()
    assert b.labels().tolist() == labels
    assert np.array_equal(a.get_vectors(labels), b.get_vectors(labels))  # byte for byte, not close
    for q in queries:
        assert a.search(q, 10) == b.search(q, 10)
        assert a.search(q, 5, allow=frozenset(labels[:40])) == b.search(q, 5, allow=frozenset(labels[:40]))


@pytest.mark.parametrize("resident", [True, False])
def test_loaded_rows_are_the_saved_index_s_own_bytes(tmp_path: Path, make_vectors: MakeVectors, resident: bool) -> None:
    index = built(make_vectors)
    index.save(tmp_path)
    manifest = read_manifest(tmp_path)
    assert manifest is not None and set(manifest.files) == {"index", "rows"}
    assert not any(p.name.startswith("vectors-") for p in tmp_path.iterdir())
    loaded = HnswIndex(DIM, exact_below=0, resident_max_rows=10**6 if resident else 0)
    loaded.load(tmp_path)
    assert isinstance(loaded._state.vectors, MemoryRows if resident else FileRows)
    same(index, loaded, make_vectors(30, DIM, seed=5))
    with pytest.raises(KeyError):
        loaded.get_vectors([6])


@pytest.mark.parametrize("resident", [True, False])
def test_an_older_save_loads_and_its_next_save_is_the_newer_layout(
    tmp_path: Path, make_vectors: MakeVectors, resident: bool
) -> None:
    index = built(make_vectors)
    index.save(tmp_path)
    older_layout(tmp_path, index)
    limit = 10**6 if resident else 0
    loaded = HnswIndex(DIM, exact_below=0, resident_max_rows=limit)
    loaded.load(tmp_path)
    queries = make_vectors(30, DIM, seed=5)
    same(index, loaded, queries)
    loaded.add(np.array([9000]), make_vectors(1, DIM, seed=6))
    index.add(np.array([9000]), make_vectors(1, DIM, seed=6))
    loaded.save(tmp_path)
    manifest = read_manifest(tmp_path)
    assert manifest is not None and set(manifest.files) == {"index", "rows"}
    assert not any(p.name.startswith("vectors-") for p in tmp_path.iterdir())  # the older file is gone
    again = HnswIndex(DIM, exact_below=0, resident_max_rows=limit)
    again.load(tmp_path)
    same(index, again, queries)


@pytest.mark.parametrize("where", ["labels", "vector", "flags", "truncated"])
def test_damage_to_an_older_save_s_vectors_file_is_still_found(
    tmp_path: Path, make_vectors: MakeVectors, where: str
) -> None:
    index = built(make_vectors)
    index.save(tmp_path)
    older_layout(tmp_path, index)
    manifest = read_manifest(tmp_path)
    assert manifest is not None
    path = tmp_path / manifest.files["vectors"].name
    data = bytearray(path.read_bytes())
    if where == "truncated":
        del data[-1]
    else:
        data[{"labels": 16, "vector": 8 * 1501 + 4 * DIM * 700 + 2, "flags": len(data) - 3}[where]] ^= 0x01
    path.write_bytes(bytes(data))
    for limit in (0, 10**6):
        with pytest.raises(IndexStale, match="checksum|bytes"):
            HnswIndex(DIM, resident_max_rows=limit).load(tmp_path)


def test_a_rows_file_that_puts_two_rows_in_one_record_is_refused(tmp_path: Path, make_vectors: MakeVectors) -> None:
    """Checksums catch damage; this is a rows file written wrong and checksummed as written."""
    built(make_vectors).save(tmp_path)
    body = json.loads((tmp_path / MANIFEST_NAME).read_text())
    path = tmp_path / body["files"]["rows"]["name"]
    data = bytearray(path.read_bytes())
    n = len(data) // 18  # labels, records (int64), live flags, levels (uint8)
    data[8 * n + 8 : 8 * n + 16] = data[8 * n : 8 * n + 8]  # row 1 claims row 0's record
    entry = persist.write_content_file(tmp_path, "rows", ".bin", lambda p: p.write_bytes(bytes(data)))
    body["files"]["rows"] = {"name": entry.name, "sha256": entry.sha256, "size": entry.size, "crc32": list(entry.crc32)}
    (tmp_path / MANIFEST_NAME).write_text(json.dumps(body))
    for limit in (0, 10**6):
        with pytest.raises(IndexStale, match="two rows in one record"):
            HnswIndex(DIM, resident_max_rows=limit).load(tmp_path)


def raw_graph(path: Path, vectors: np.ndarray, labels: np.ndarray, deleted: list[int]) -> None:
    graph = hnswlib.Index(space="ip", dim=DIM)
    graph.init_index(max_elements=len(vectors))
    for label, vector in zip(labels.tolist(), vectors, strict=True):  # one at a time: records in this order
        graph.add_items(vector[None, :], np.array([label]), num_threads=1)
    for label in deleted:
        graph.mark_deleted(label)
    graph.save_index(str(path))


def test_stamp_writes_each_row_into_the_record_hnswlib_gave_it(tmp_path: Path, make_vectors: MakeVectors) -> None:
    vectors = make_vectors(50, DIM)
    path = tmp_path / "graph.bin"
    raw_graph(path, np.zeros_like(vectors), np.arange(50)[::-1].copy(), deleted=[7])  # row 49 is record 0
    live = np.ones(50, bool)
    live[7] = False
    ours = vectors.copy()
    ours[7] = 0.0
    done = stamp(path, DIM, [ours[:20], ours[20:]], live)
    where, record_of = done.layout, done.record_of
    assert record_of.tolist() == list(range(50))[::-1]
    records = np.frombuffer(path.read_bytes(), np.uint8, where.count * where.per_element, 96)
    saved = records.reshape(where.count, where.per_element)[:, where.data_at : where.label_at].copy().view(np.float32)
    keep = np.flatnonzero(live)
    assert np.array_equal(saved[record_of[keep]], vectors[keep])
    assert saved[record_of[7]].tobytes() != vectors[7].tobytes()  # the tombstone's own vector is not there
    assert read_layout(path, DIM) == where


@pytest.mark.parametrize("problem", ["labels", "deleted", "count"])
def test_stamp_refuses_a_file_that_does_not_hold_the_index_s_rows(
    tmp_path: Path, make_vectors: MakeVectors, problem: str
) -> None:
    vectors = make_vectors(20, DIM)
    path = tmp_path / "graph.bin"
    labels = np.arange(20)
    if problem == "labels":
        labels[3] = 99  # not a row of a 20-row index
    raw_graph(path, vectors, labels, deleted=[2] if problem == "deleted" else [])
    before = path.read_bytes()
    live = np.ones(21 if problem == "count" else 20, bool)
    with pytest.raises(IndexStale, match="rebuild"):
        stamp(path, DIM, [np.zeros((len(live), DIM), np.float32)], live)
    assert path.read_bytes() == before


def rewrite_rows(directory: Path, edit: Callable[[bytearray, int], None]) -> None:
    """Apply ``edit(data, n)`` to the rows file and checksum it as written (a save that wrote it so)."""
    body = json.loads((directory / MANIFEST_NAME).read_text())
    data = bytearray((directory / body["files"]["rows"]["name"]).read_bytes())
    edit(data, len(data) // 18)
    entry = persist.write_content_file(directory, "rows", ".bin", lambda p: p.write_bytes(bytes(data)))
    body["files"]["rows"] = {"name": entry.name, "sha256": entry.sha256, "size": entry.size, "crc32": list(entry.crc32)}
    (directory / MANIFEST_NAME).write_text(json.dumps(body))


def test_the_restored_graph_is_the_one_load_index_reads(tmp_path: Path, make_vectors: MakeVectors) -> None:
    index = built(make_vectors, 4000)  # a few hundred elements with upper levels
    index.save(tmp_path)
    loaded = HnswIndex(DIM, exact_below=0)
    loaded.load(tmp_path)
    manifest = read_manifest(tmp_path)
    assert manifest is not None
    reference = hnswlib.Index(space="ip", dim=DIM)
    reference.load_index(str(tmp_path / manifest.files["index"].name), max_elements=loaded._state.graph.max_elements)
    ours, theirs = loaded._state.graph.__getstate__()[0], reference.__getstate__()[0]
    assert int((ours["element_levels"] > 0).sum()) > 100
    assert set(ours) == set(theirs)
    for key in set(ours) - {"seed", "num_threads", "ef"}:
        if isinstance(ours[key], np.ndarray):
            assert np.array_equal(ours[key], theirs[key]), key
        else:
            assert ours[key] == theirs[key], key
    same(index, loaded, make_vectors(30, DIM, seed=5))


def test_levels_that_do_not_match_the_graph_s_link_lists_are_refused(tmp_path: Path, make_vectors: MakeVectors) -> None:
    built(make_vectors, 4000).save(tmp_path)

    def shift(data: bytearray, n: int) -> None:
        levels = np.frombuffer(bytes(data[17 * n :]), np.uint8).copy()
        first = int(np.flatnonzero(levels)[0])
        levels[first], levels[first + 1] = 0, levels[first] + levels[first + 1]  # same total, wrong places
        data[17 * n :] = levels.tobytes()

    rewrite_rows(tmp_path, shift)
    with pytest.raises(IndexStale, match="link lists"):
        HnswIndex(DIM).load(tmp_path)


def test_a_state_hnswlib_refuses_is_read_with_load_index(
    tmp_path: Path, make_vectors: MakeVectors, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    index = built(make_vectors)
    index.save(tmp_path)
    monkeypatch.setattr(hnsw_state, "SER_VERSION", 99)  # as if hnswlib had changed its pickled state
    loaded = HnswIndex(DIM, exact_below=0)
    with caplog.at_level(logging.WARNING, logger="mempager.hnsw"):
        loaded.load(tmp_path)
    assert "refused the saved graph's state" in caplog.text
    same(index, loaded, make_vectors(30, DIM, seed=5))
