"""The M=16 / M=32 benchmark's own plumbing (benchmarks/bench_hnsw_m_before_after.py): its exact
truth must be the true top 10, its recall must be measured at the width asked for, and a sweep must
leave the index searching as it found it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mempager
from benchmarks.bench_hnsw_m_before_after import K, exact_truth, recall_at
from mempager import PagerConfig

N = 1_500  # above the exact-scan limit (1,024 live rows): the graph answers


@pytest.fixture
def pager(store_path: Path) -> Any:
    p = mempager.open(store_path, actor="neo", config=PagerConfig(embedder="hash", hnsw_m=8))
    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(300)]  # random word bags: no two memories tie for a query
    p.remember_many([{"type": "fact", "text": " ".join(rng.choice(words, 6))} for _ in range(N)])
    assert p.sync(timeout=120)
    yield p
    p.close()


def test_the_truth_is_an_exact_scan_and_recall_is_taken_at_the_width_asked(pager: Any) -> None:
    index = pager.semantic.index
    rng = np.random.default_rng(11)
    queries = np.stack([pager.semantic.embed_query(" ".join(rng.choice([f"w{i}" for i in range(300)], 3))) for _ in range(20)])
    truth = exact_truth(pager, queries)
    labels = index.labels()
    vectors = index.get_vectors(labels)
    for query, want in zip(queries, truth, strict=True):
        scores = vectors @ (query / np.linalg.norm(query))
        assert len(want) == K and min(scores[np.isin(labels, list(want))]) >= np.sort(scores)[-K] - 1e-6

    before = (index.ef, index.ef_per_million, index.search_ef)
    narrow = recall_at(pager, queries, truth, 1)
    wide = recall_at(pager, queries, truth, N)
    assert (narrow["ef"], wide["ef"]) == (1, N)  # the width set (hnswlib searches at least k + 1 wide)
    assert narrow["recall_at_10"] < wide["recall_at_10"] == 1.0  # the width asked for is the one searched
    assert (index.ef, index.ef_per_million, index.search_ef) == before
    assert recall_at(pager, queries, truth, None)["ef"] == before[2]
