"""One contract, every VectorIndex: the exact reference and HNSW (scan path and graph path)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from mempager.errors import DimensionMismatch, IndexStale, InvalidInput
from mempager.index.exact import ExactIndex
from mempager.index.hnsw import HnswIndex
from mempager.protocols import VectorIndex

DIM = 16
Factory = Callable[[int], VectorIndex]
FACTORIES: dict[str, Factory] = {
    "exact": lambda dim: ExactIndex(dim),
    "hnsw": lambda dim: HnswIndex(dim),  # small indexes are answered by an exact scan
    "hnsw-graph": lambda dim: HnswIndex(dim, exact_below=0, ef=256, initial_capacity=8),  # walks the graph
}


@pytest.fixture(params=list(FACTORIES))
def factory(request: pytest.FixtureRequest) -> Factory:
    return FACTORIES[request.param]


@pytest.fixture
def data(make_vectors: Callable[..., np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    labels = np.arange(500, dtype=np.int64) * 3 + 1000  # store labels: sparse, never positions
    return labels, make_vectors(500, DIM, seed=3)


@pytest.fixture
def filled(factory: Factory, data: tuple[np.ndarray, np.ndarray]) -> VectorIndex:
    index = factory(DIM)
    index.add(*data)
    return index


def reference(labels: np.ndarray, vectors: np.ndarray) -> ExactIndex:
    ref = ExactIndex(DIM)
    ref.add(labels, vectors)
    return ref


def test_is_a_vector_index(factory: Factory) -> None:
    assert isinstance(factory(DIM), VectorIndex)
    assert factory(DIM).dim == DIM


def test_empty_index(factory: Factory) -> None:
    index = factory(DIM)
    assert len(index) == 0
    assert 1 not in index
    assert index.search(np.ones(DIM, np.float32), 5) == []
    index.remove([1, 2])  # unknown labels: no-op
    assert len(index) == 0


def test_every_vector_finds_itself_first(filled: VectorIndex, data: tuple[np.ndarray, np.ndarray]) -> None:
    labels, vectors = data
    assert len(filled) == 500
    for label, vector in zip(labels[::25], vectors[::25], strict=True):
        best_label, best_score = filled.search(vector, 1)[0]
        assert best_label == label
        assert best_score == pytest.approx(1.0, abs=1e-5)
        assert label in filled
    assert 999 not in filled and "1000" not in filled


def test_results_match_the_exact_reference(
    filled: VectorIndex, data: tuple[np.ndarray, np.ndarray], make_vectors: Callable[..., np.ndarray]
) -> None:
    ref = reference(*data)
    for query in make_vectors(20, DIM, seed=99):
        got, want = filled.search(query, 10), ref.search(query, 10)
        assert [label for label, _ in got] == [label for label, _ in want]
        assert [score for _, score in got] == pytest.approx([score for _, score in want], abs=1e-5)
        assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)


def test_add_of_an_existing_label_replaces_its_vector(filled: VectorIndex, data: tuple[np.ndarray, np.ndarray]) -> None:
    labels, vectors = data
    filled.add(labels[:1], vectors[1:2])  # label 0 now carries vector 1
    assert len(filled) == 500
    top = filled.search(vectors[1], 2)
    assert {label for label, _ in top} == {int(labels[0]), int(labels[1])}
    assert all(score == pytest.approx(1.0, abs=1e-5) for _, score in top)
    assert filled.search(vectors[0], 1)[0][0] != labels[0]


def test_remove_hides_labels_and_ignores_unknown_ones(filled: VectorIndex, data: tuple[np.ndarray, np.ndarray]) -> None:
    labels, vectors = data
    gone = set(labels[:250].tolist())
    filled.remove(list(gone) + [7, 8])
    filled.remove(list(gone)[:10])  # twice: still a no-op
    assert len(filled) == 250
    assert not any(label in filled for label in gone)
    for query in vectors[:250:10]:
        assert gone.isdisjoint(label for label, _ in filled.search(query, 20))
    filled.add(labels[:1], vectors[:1])  # and a removed label can come back
    assert filled.search(vectors[0], 1)[0][0] == labels[0]


def test_allow_filters_labels(filled: VectorIndex, data: tuple[np.ndarray, np.ndarray]) -> None:
    labels, vectors = data
    allow = frozenset(labels[1::2].tolist()) | {5, 6}  # unknown labels in allow are ignored
    ref = reference(*data)
    for query in vectors[:40:4]:
        got = filled.search(query, 10, allow=allow)
        assert len(got) == 10 and all(label in allow for label, _ in got)
        assert [lab for lab, _ in got] == [lab for lab, _ in ref.search(query, 10, allow=allow)]
    assert filled.search(vectors[0], 10, allow=frozenset()) == []
    assert filled.search(vectors[0], 10, allow=frozenset({5})) == []
    few = frozenset(labels[:3].tolist())
    assert {label for label, _ in filled.search(vectors[0], 10, allow=few)} == few  # k clamped to allow


def test_k_is_clamped(filled: VectorIndex, data: tuple[np.ndarray, np.ndarray]) -> None:
    query = data[1][0]
    assert len(filled.search(query, 10_000)) == 500
    assert filled.search(query, 0) == []
    assert filled.search(query, -3) == []


def test_equal_scores_rank_the_lower_label_first(factory: Factory) -> None:
    index = factory(DIM)
    same = np.tile(np.eye(DIM, dtype=np.float32)[:1], (40, 1))
    index.add(np.arange(40, 0, -1, dtype=np.int64), same)
    assert [label for label, _ in index.search(same[0], 3)] == [1, 2, 3]


def test_save_and_load_round_trip(
    factory: Factory, filled: VectorIndex, data: tuple[np.ndarray, np.ndarray], tmp_path: Path
) -> None:
    labels, vectors = data
    filled.remove(labels[:100].tolist())
    before = [filled.search(q, 10) for q in vectors[::50]]
    filled.save(tmp_path / "idx")
    again = factory(DIM)
    again.load(tmp_path / "idx")
    assert len(again) == 400
    assert labels[0] not in again and labels[100] in again
    assert [again.search(q, 10) for q in vectors[::50]] == before


def test_load_of_a_missing_index_raises_index_stale(factory: Factory, tmp_path: Path) -> None:
    with pytest.raises(IndexStale):
        factory(DIM).load(tmp_path)


def test_dimension_mismatch(factory: Factory) -> None:
    index = factory(DIM)
    with pytest.raises(DimensionMismatch):
        index.add(np.array([1]), np.ones((1, DIM + 1), np.float32))
    with pytest.raises(DimensionMismatch):
        index.add(np.array([1]), np.ones(DIM, np.float32))  # 1-d: ambiguous, rejected
    index.add(np.array([1]), np.ones((1, DIM), np.float32))
    with pytest.raises(DimensionMismatch):
        index.search(np.ones(DIM - 1, np.float32), 1)


def test_labels_and_vectors_must_pair_up(factory: Factory) -> None:
    with pytest.raises(InvalidInput):
        factory(DIM).add(np.array([1, 2, 3]), np.ones((2, DIM), np.float32))
