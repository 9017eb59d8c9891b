"""Recall of HNSW against brute force on real MiniLM vectors of real conversation turns (LoCoMo)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mempager.config import PagerConfig
from mempager.index.exact import ExactIndex
from mempager.index.hnsw import HnswIndex

pytestmark = pytest.mark.slow
K = 10


def recall_at_k(index: HnswIndex, ref: ExactIndex, queries: np.ndarray, allow: frozenset[int] | None = None) -> float:
    hits = total = 0
    for query in queries:
        want = {label for label, _ in ref.search(query, K, allow=allow)}
        got = {label for label, _ in index.search(query, K, allow=allow)}
        hits += len(want & got)
        total += len(want)
    return hits / total


# The lane's default M (32), and the old one (16) that graphs saved before keep: each searched at the
# width measured for its M (``hnsw_graph.MEASURED_WIDTH``), as the lane does.
@pytest.fixture(scope="module", params=[32, 16], ids=["M32-default", "M16-saved-before"])
def indexes(minilm_vectors: tuple[np.ndarray, np.ndarray], request: pytest.FixtureRequest) -> tuple[HnswIndex, ExactIndex]:
    docs, _ = minilm_vectors
    labels = np.arange(len(docs), dtype=np.int64) * 13 + 5
    cfg = PagerConfig()
    index = HnswIndex(
        docs.shape[1],
        M=request.param,
        ef_construction=cfg.hnsw_ef_construction,
        ef=cfg.hnsw_ef,
        ef_per_million=cfg.hnsw_ef_per_million,
    )
    index.add(labels, docs)
    ref = ExactIndex(docs.shape[1])
    ref.add(labels, docs)
    return index, ref


def test_recall_at_10_vs_exact(
    indexes: tuple[HnswIndex, ExactIndex], minilm_vectors: tuple[np.ndarray, np.ndarray]
) -> None:
    index, ref = indexes
    widths = {32: 96, 16: 128}  # the lane's defaults, not tuned here
    assert (index.search_ef, index.ef_construction) == (widths[index.M], 200) and PagerConfig().hnsw_m == 32
    assert len(index) == len(minilm_vectors[0]) == 3000  # LoCoMo's first 3,000 turns
    assert len(index) > 2 * 1024  # well above exact_below: the graph is walked, not scanned
    assert recall_at_k(index, ref, minilm_vectors[1]) >= 0.95


def test_filtered_recall_at_10_vs_exact(
    indexes: tuple[HnswIndex, ExactIndex], minilm_vectors: tuple[np.ndarray, np.ndarray]
) -> None:
    index, ref = indexes
    allow = frozenset(index.labels()[::2].tolist())  # another actor's half of a shared index
    assert recall_at_k(index, ref, minilm_vectors[1][:250], allow=allow) >= 0.95


def test_recall_survives_save_and_load(
    indexes: tuple[HnswIndex, ExactIndex], tmp_path: Path, minilm_vectors: tuple[np.ndarray, np.ndarray]
) -> None:
    index, ref = indexes
    index.save(tmp_path, meta={"model": "st:all-MiniLM-L6-v2"})
    again = HnswIndex(index.dim)
    again.load(tmp_path, expect_meta={"model": "st:all-MiniLM-L6-v2"})
    queries = minilm_vectors[1][:200]
    assert [again.search(q, K) for q in queries] == [index.search(q, K) for q in queries]
