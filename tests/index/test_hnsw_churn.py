"""The workload that breaks naive vector stores: insert, delete half, rewrite a third, reopen."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from mempager.index.hnsw import HnswIndex

MakeVectors = Callable[..., np.ndarray]
DIM = 64


def check(index: HnswIndex, live: dict[int, np.ndarray], dead: set[int], allow: frozenset[int]) -> None:
    assert len(index) == len(live)
    assert index.labels().tolist() == sorted(live)
    for label, vector in live.items():
        found = [lab for lab, _ in index.search(vector, 10)]
        assert label in found, f"live label {label} missing from its own top-10"
        assert dead.isdisjoint(found)
        filtered = [lab for lab, _ in index.search(vector, 10, allow=allow)]
        assert set(filtered) <= allow and dead.isdisjoint(filtered)
        if label in allow:
            assert label in filtered


def test_churn_then_reopen(tmp_path: Path, make_vectors: MakeVectors) -> None:
    rng = np.random.default_rng(11)
    labels = rng.choice(10**9, size=4000, replace=False).astype(np.int64)
    vectors = make_vectors(4000, DIM, seed=1)
    index = HnswIndex(DIM, initial_capacity=256)
    index.add(labels, vectors)

    order = rng.permutation(4000)
    dead = set(labels[order[:2000]].tolist())
    index.remove(list(dead))
    survivors = labels[order[2000:]]
    rewritten = survivors[:600]
    new_vectors = make_vectors(600, DIM, seed=2)
    index.add(rewritten, new_vectors)

    live = {int(lab): vec for lab, vec in zip(labels, vectors, strict=True) if int(lab) not in dead}
    live.update({int(lab): vec for lab, vec in zip(rewritten, new_vectors, strict=True)})
    # Another actor's labels, live or not, as the owner would pass them.
    allow = frozenset(rng.choice(labels, size=1200, replace=False).tolist())
    assert index.deleted_share() > 0.5 and index.needs_rebuild()

    check(index, live, dead, allow)
    position = {int(lab): i for i, lab in enumerate(labels)}
    for label in rewritten[:100].tolist():  # a rewritten label no longer answers for its old vector
        old_vector = vectors[position[label]]
        assert all(score < 0.9999 for lab, score in index.search(old_vector, 10) if lab == label)
    index.save(tmp_path / "idx", meta={"generation": 1})
    reopened = HnswIndex(DIM)
    reopened.load(tmp_path / "idx", expect_meta={"generation": 1})
    check(reopened, live, dead, allow)
    np.testing.assert_allclose(reopened.get_vectors(rewritten[:50]), new_vectors[:50], atol=1e-6)

    # The reopened copy is a working index, not a read-only snapshot.
    reopened.remove(rewritten[:100].tolist())
    for label in rewritten[:100].tolist():
        dead.add(label)
        del live[label]
    reopened.rebuild()
    assert reopened.deleted_share() == 0.0
    check(reopened, live, dead, allow)
