"""HnswIndex behaviours beyond the shared contract: config, inputs, fallbacks, labels, meta."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable
from pathlib import Path

import hnswlib
import numpy as np
import pytest

from mempager.errors import ConfigError, IndexStale, InvalidInput, NonFiniteVector
from mempager.index.exact import ExactIndex
from mempager.index.hnsw import HnswIndex
from mempager.index.hnsw_graph import measured_floor, measured_per_million
from mempager.index.manifest import MANIFEST_NAME, Manifest, read_manifest, write_manifest

MakeVectors = Callable[..., np.ndarray]


@pytest.mark.parametrize(
    ("kwargs", "quoted"),
    [
        ({"M": 1}, "1"),
        ({"ef": 0}, "0"),
        ({"ef_construction": -5}, "-5"),
        ({"initial_capacity": 0}, "0"),
        ({"max_deleted_share": 1.5}, "1.5"),
        ({"exact_below": -1}, "-1"),
        ({"M": 2.5}, "2.5"),
    ],
)
def test_bad_config_is_rejected_quoting_the_value(kwargs: dict[str, float], quoted: str) -> None:
    with pytest.raises(ConfigError, match=quoted):
        HnswIndex(8, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        HnswIndex(0)


def test_non_finite_vectors_are_rejected() -> None:
    index = HnswIndex(4)
    with pytest.raises(NonFiniteVector):
        index.add(np.array([1, 2]), np.array([[1, 0, 0, 0], [np.nan, 0, 0, 0]], np.float32))
    assert len(index) == 0
    index.add(np.array([1]), np.eye(4, dtype=np.float32)[:1])
    with pytest.raises(NonFiniteVector):
        index.search(np.array([np.inf, 0, 0, 0], np.float32), 1)


def test_last_duplicate_in_a_batch_wins_and_identical_re_adds_are_free(make_vectors: MakeVectors) -> None:
    index = HnswIndex(8)
    vectors = make_vectors(3, 8)
    index.add(np.array([7, 7, 8]), vectors)
    assert len(index) == 2
    np.testing.assert_allclose(index.get_vectors([7]), vectors[1:2], atol=1e-6)
    index.add(np.array([7, 8]), index.get_vectors([7, 8]))
    assert index.deleted_share() == 0.0  # nothing changed, so nothing was tombstoned


def test_labels_and_get_vectors(make_vectors: MakeVectors) -> None:
    extremes = np.array([-(2**63), -1, 0, 2**63 - 1], dtype=np.int64)  # any int64, not only positions
    vectors = make_vectors(4, 8)
    index = HnswIndex(8)
    index.add(extremes, vectors)
    assert index.labels().tolist() == sorted(extremes.tolist())
    np.testing.assert_allclose(index.get_vectors(extremes[::-1]), vectors[::-1], atol=1e-6)
    assert index.search(vectors[0], 1)[0][0] == -(2**63)
    index.remove([-1])
    with pytest.raises(KeyError, match="-1"):
        index.get_vectors([0, -1])
    assert np.int64(0) in index and -1 not in index


def test_stored_vectors_are_unit_length() -> None:
    index = HnswIndex(3)
    index.add(np.array([1, 2]), np.array([[3, 4, 0], [0, 0, 0]], np.float32))
    np.testing.assert_allclose(index.get_vectors([1, 2]), np.array([[0.6, 0.8, 0], [0, 0, 0]], np.float32), atol=1e-6)
    [(label, score)] = index.search(np.array([6, 8, 0], np.float32), 1)
    assert label == 1 and score == pytest.approx(1.0)


def test_capacity_grows_from_one(make_vectors: MakeVectors) -> None:
    vectors = make_vectors(3000, 16, seed=5)
    index = HnswIndex(16, initial_capacity=1, exact_below=0)
    for start in range(0, 3000, 700):  # batches that cross several resizes
        index.add(np.arange(start, min(start + 700, 3000)), vectors[start : start + 700])
    assert len(index) == 3000
    probes = range(0, 3000, 30)
    assert sum(index.search(vectors[i], 1)[0][0] == i for i in probes) >= 0.98 * len(probes)


def test_k_above_ef_still_returns_k_good_neighbours(make_vectors: MakeVectors) -> None:
    vectors = make_vectors(2000, 16, seed=2)
    index = HnswIndex(16, ef=4, exact_below=0)
    index.add(np.arange(2000), vectors)
    ref = ExactIndex(16)
    ref.add(np.arange(2000), vectors)
    got = index.search(vectors[0], 300)
    want = {label for label, _ in ref.search(vectors[0], 300)}
    assert len(got) == 300
    assert len(want & {label for label, _ in got}) >= 0.95 * 300


def test_exact_answer_when_hnswlib_finds_fewer_than_k() -> None:
    # Many duplicates and a tiny graph: hnswlib cannot reach k of them and raises.
    base = np.random.default_rng(0).standard_normal((20, 8)).astype(np.float32)
    vectors = np.repeat(base, 100, axis=0)
    raw = hnswlib.Index(space="cosine", dim=8)
    raw.init_index(max_elements=2000, M=2, ef_construction=4)
    raw.add_items(vectors, np.arange(2000), num_threads=1)
    raw.set_ef(1)
    with pytest.raises(RuntimeError, match="contiguous"):
        raw.knn_query(base[0], k=200, num_threads=1)

    index = HnswIndex(8, M=2, ef_construction=4, ef=1, exact_below=0)
    index.add(np.arange(2000), vectors)
    ref = ExactIndex(8)
    ref.add(np.arange(2000), vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
    got = [label for label, _ in index.search(base[0], 200)]
    assert got == [label for label, _ in ref.search(base[0], 200)]
    assert got[:100] == list(range(100))  # base[0]'s 100 copies, tied, lowest label first


def test_selective_filter_is_answered_exactly(make_vectors: MakeVectors) -> None:
    vectors = make_vectors(4000, 16, seed=4)
    index = HnswIndex(16, exact_below=0)
    index.add(np.arange(4000), vectors)
    ref = ExactIndex(16)
    ref.add(np.arange(4000), vectors)
    allow = frozenset(range(0, 4000, 97))  # 42 labels: ~1 % of the index
    for query in make_vectors(10, 16, seed=8):
        got, want = index.search(query, 10, allow=allow), ref.search(query, 10, allow=allow)
        assert [label for label, _ in got] == [label for label, _ in want]
        assert [score for _, score in got] == pytest.approx([score for _, score in want], abs=1e-5)


def test_ef_can_be_tuned_and_survives_a_load(tmp_path: Path, make_vectors: MakeVectors) -> None:
    index = HnswIndex(8, ef=32)
    index.add(np.arange(10), make_vectors(10, 8))
    index.ef = 100
    assert index.ef == 100
    with pytest.raises(ConfigError):
        index.ef = 0
    index.save(tmp_path)
    again = HnswIndex(8, ef=77)
    again.load(tmp_path)
    assert again.ef == 77 and again.M == 16 and again.ef_construction == 200


def test_search_width_grows_with_the_live_rows_and_reaches_hnswlib(tmp_path: Path, make_vectors: MakeVectors) -> None:
    """ef_per_million: a large graph searches wider (recall falls as a graph of fixed M grows),
    rounded up, never below ef; it follows adds, removes, a new floor, a rebuild and a load."""
    index = HnswIndex(8, ef=10, ef_per_million=200_000)  # 0.2 per live row
    assert index.search_ef == 10
    index.add(np.arange(101), make_vectors(101, 8))
    assert index.search_ef == 21 == index._state.graph.ef  # ceil(101 * 0.2), set in hnswlib itself
    index.remove(range(60))
    assert index.search_ef == 10  # 41 live rows: the floor
    index.ef = 5
    assert index.search_ef == 9  # ceil(41 * 0.2)
    index.add(np.arange(200, 300), make_vectors(100, 8, seed=3))
    index.rebuild()
    assert index.search_ef == 29 == index._state.graph.ef  # 141 live rows
    index.save(tmp_path)
    again = HnswIndex(8, ef=10, ef_per_million=1_000_000)
    again.load(tmp_path)
    assert again.search_ef == 141 == again._state.graph.ef  # the loader's own setting, for the rows it read
    again.ef_per_million = 0
    assert again.search_ef == 10 == again._state.graph.ef
    with pytest.raises(ConfigError, match="ef_per_million"):
        HnswIndex(8, ef_per_million=-1)


@pytest.mark.parametrize("m", [2, 16, 24, 32, 48])
def test_the_default_search_width_follows_the_graphs_own_m(tmp_path: Path, make_vectors: MakeVectors, m: int) -> None:
    """ef / ef_per_million None: the width measured for the graph's M (benchmarks/results/hnsw_m_before_after.md),
    also for a graph loaded into an index that would build another M."""
    floor, per_million = (96, 240) if m >= 32 else (128, 600)
    assert (measured_floor(m), measured_per_million(m)) == (floor, per_million)
    small = HnswIndex(8, M=m, ef=None, ef_per_million=None)
    small.add(np.arange(50), make_vectors(50, 8))
    assert (small.ef, small.search_ef) == (floor, floor) == (floor, small._state.graph.ef)
    index = HnswIndex(8, M=m, ef=1, ef_per_million=None)
    index.add(np.arange(5_000), make_vectors(5_000, 8))
    assert index.ef_per_million == per_million
    assert index.search_ef == -(-per_million * 5_000 // 1_000_000) == index._state.graph.ef
    index.save(tmp_path)
    other = HnswIndex(8, M=64 if m < 32 else 16, ef=1, ef_per_million=None)
    other.load(tmp_path)
    assert (other.M, other.ef_per_million, other.search_ef) == (m, per_million, index.search_ef)
    other.ef_per_million = 1_000_000  # one set explicitly wins over the measured one
    assert other.search_ef == 5_000


def test_meta_is_saved_checked_and_adopted(tmp_path: Path, make_vectors: MakeVectors) -> None:
    index = HnswIndex(8, meta={"model": "st:all-MiniLM-L6-v2", "actor": "neo"})
    index.add(np.arange(5), make_vectors(5, 8))
    index.save(tmp_path)  # meta defaults to index.meta
    index.save(tmp_path, meta={**index.meta, "generation": 3, "shape": (1, 2)})
    assert index.meta["generation"] == 3 and index.meta["shape"] == [1, 2]

    loaded = HnswIndex(8, meta={"model": "st:all-MiniLM-L6-v2"})  # checked against its own meta
    loaded.load(tmp_path)
    assert loaded.meta == {"model": "st:all-MiniLM-L6-v2", "actor": "neo", "generation": 3, "shape": [1, 2]}
    HnswIndex(8).load(tmp_path, expect_meta={"shape": (1, 2), "generation": 3})  # tuples read back as lists

    with pytest.raises(IndexStale, match="'generation' is 3, expected 4"):
        HnswIndex(8).load(tmp_path, expect_meta={"generation": 4})
    with pytest.raises(IndexStale, match="'actor' is 'neo', expected 'trinity'"):
        HnswIndex(8, meta={"actor": "trinity"}).load(tmp_path)
    with pytest.raises(IndexStale, match="'store' missing"):
        HnswIndex(8).load(tmp_path, expect_meta={"store": "a.duckdb"})
    with pytest.raises(InvalidInput):
        index.save(tmp_path, meta={"when": object()})


def test_manifest_records_the_index(tmp_path: Path, make_vectors: MakeVectors) -> None:
    assert read_manifest(tmp_path) is None
    index = HnswIndex(8, M=12, ef_construction=50)
    index.add(np.array([5, 9, 40]), make_vectors(3, 8))
    index.remove([9])
    index.add(np.array([5]), make_vectors(1, 8, seed=7))
    index.save(tmp_path, meta={"generation": 1})
    manifest = read_manifest(tmp_path)
    assert isinstance(manifest, Manifest)
    assert (manifest.kind, manifest.dim, manifest.M, manifest.ef_construction) == ("hnsw", 8, 12, 50)
    assert (manifest.count, manifest.rows, manifest.deleted, manifest.max_label) == (2, 4, 2, 40)
    assert dict(manifest.meta) == {"generation": 1} and set(manifest.files) == {"index", "rows"}
    for entry in manifest.files.values():
        assert (tmp_path / entry.name).stat().st_size == entry.size

    with pytest.raises(IndexStale, match="dim is 8, expected 9"):
        HnswIndex(9, M=12, ef_construction=50).load(tmp_path)


def test_a_saved_graph_keeps_its_own_m_until_it_is_rebuilt(
    tmp_path: Path, make_vectors: MakeVectors, caplog: pytest.LogCaptureFixture
) -> None:
    """M and ef_construction are fixed in a graph: a load keeps the saved graph's (no rebuild at
    open when the default changes), saves record them, and a rebuild builds with the index's own."""
    vectors = make_vectors(300, 8)
    old = HnswIndex(8, M=12, ef_construction=50, exact_below=0)
    old.add(np.arange(300), vectors)
    old.save(tmp_path)
    queries = make_vectors(20, 8, seed=5)
    before = [old.search(q, 5) for q in queries]

    index = HnswIndex(8, M=20, ef_construction=60, exact_below=0)
    with caplog.at_level(logging.INFO, logger="mempager.hnsw"):
        index.load(tmp_path)
    assert "keeps M=12, ef_construction=50 until it is rebuilt (then M=20" in caplog.text
    assert (index.M, index.ef_construction) == (12, 50) == (index._state.graph.M, index._state.graph.ef_construction)
    assert [index.search(q, 5) for q in queries] == before
    index.add(np.array([300]), make_vectors(1, 8, seed=9))
    index.save(tmp_path)
    manifest = read_manifest(tmp_path)
    assert manifest is not None and (manifest.M, manifest.ef_construction) == (12, 50)

    index.rebuild()
    assert (index.M, index.ef_construction) == (20, 60) == (index._state.graph.M, index._state.graph.ef_construction)
    assert len(index) == 301
    index.save(tmp_path)
    manifest = read_manifest(tmp_path)
    assert manifest is not None and (manifest.M, manifest.ef_construction) == (20, 60)


def test_a_manifest_that_misstates_the_graphs_m_is_refused(tmp_path: Path, make_vectors: MakeVectors) -> None:
    index = HnswIndex(8, M=12, ef_construction=50)
    index.add(np.arange(40), make_vectors(40, 8))
    index.save(tmp_path)
    manifest = read_manifest(tmp_path)
    assert manifest is not None
    write_manifest(tmp_path, dataclasses.replace(manifest, M=16))
    with pytest.raises(IndexStale, match="built with M=12, ef_construction=50, the manifest says M=16"):
        HnswIndex(8, M=12, ef_construction=50).load(tmp_path)


def test_repeated_saves_leave_one_set_of_files(tmp_path: Path, make_vectors: MakeVectors) -> None:
    index = HnswIndex(8)
    for generation in range(4):
        index.add(np.array([generation]), make_vectors(1, 8, seed=generation))
        index.save(tmp_path, meta={"generation": generation})
    (tmp_path / ".hnsw-leftover.tmp").write_bytes(b"from a killed save")
    index.save(tmp_path)
    manifest = read_manifest(tmp_path)
    assert manifest is not None
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [MANIFEST_NAME, *(entry.name for entry in manifest.files.values())]
    )


@pytest.mark.parametrize(
    "body",
    [b"", b"{not json", b"[]", b'{"format_version": 1}', json.dumps({"format_version": 99}).encode()],
    ids=["empty", "garbage", "list", "missing-keys", "future-version"],
)
def test_a_malformed_manifest_raises_index_stale(tmp_path: Path, body: bytes, make_vectors: MakeVectors) -> None:
    index = HnswIndex(8)
    index.add(np.arange(3), make_vectors(3, 8))
    index.save(tmp_path)
    (tmp_path / MANIFEST_NAME).write_bytes(body)
    with pytest.raises(IndexStale, match="malformed"):
        read_manifest(tmp_path)
    with pytest.raises(IndexStale):
        HnswIndex(8).load(tmp_path)


def test_a_manifest_cannot_point_outside_its_directory(tmp_path: Path, make_vectors: MakeVectors) -> None:
    index = HnswIndex(8)
    index.add(np.arange(3), make_vectors(3, 8))
    index.save(tmp_path)
    body = json.loads((tmp_path / MANIFEST_NAME).read_text())
    body["files"]["index"]["name"] = "../elsewhere.bin"
    (tmp_path / MANIFEST_NAME).write_text(json.dumps(body))
    with pytest.raises(IndexStale, match="plain file name"):
        HnswIndex(8).load(tmp_path)
