"""The store contract, vectors and the embedding queue: every test runs on DuckDB and on PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import numpy as np
import pytest

from mempager.errors import DimensionMismatch, InvalidInput, NonFiniteVector
from mempager.types import MemoryType, NewMemory


def put(store: Any, *texts: str, actor: str = "a") -> list[Any]:
    return [r.memory for r in store.put_many([NewMemory(actor=actor, type=MemoryType.FACT, text=t) for t in texts])]


def unit(n: int, dim: int = 4, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(n, dim)).astype(np.float32)
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def store_vectors(store: Any, memories: list[Any], model: str = "m", seed: int = 0) -> np.ndarray:
    vectors = unit(len(memories), seed=seed)
    stored = store.put_vectors(
        model, np.array([m.label for m in memories], dtype=np.int64), vectors, [m.content_hash for m in memories]
    )
    assert stored.tolist() == sorted(m.label for m in memories)
    return vectors


def test_vectors_round_trip_per_actor_and_model(store: Any) -> None:
    ms = put(store, "one", "two", "three")
    other = put(store, "elsewhere", actor="b")
    vectors = store_vectors(store, ms)
    store_vectors(store, other, seed=1)
    labels, matrix = store.vectors("a", "m")
    assert labels.tolist() == [m.label for m in ms] and labels.dtype == np.int64
    assert matrix.dtype == np.float32 and np.array_equal(matrix, vectors)
    assert store.vector_labels("a", "m").tolist() == labels.tolist()
    assert store.vector_models("a") == {"m": 3} and store.vector_models("b") == {"m": 1}
    assert store.vector_state("a", "m")[0] == 3
    empty_labels, empty = store.vectors("a", "unknown-model")
    assert len(empty_labels) == 0 and empty.shape[0] == 0


def test_a_label_repeated_in_one_call_is_stored_once(store: Any) -> None:
    m = put(store, "twice")[0]
    rows = np.array([[1, 0, 0], [0, 1, 0]], np.float32)
    assert store.put_vectors("m", np.array([m.label, m.label]), rows, [m.content_hash] * 2).tolist() == [m.label]
    labels, matrix = store.vectors("a", "m")
    assert labels.tolist() == [m.label] and matrix.tolist() == [[1, 0, 0]]


def test_vectors_since_a_sequence(store: Any) -> None:
    ms = put(store, "one", "two", "three")
    store_vectors(store, ms[:2])
    count, seq = store.vector_state("a", "m")
    assert count == 2
    store_vectors(store, ms[2:], seed=3)
    labels, _ = store.vectors_since("a", "m", seq)
    assert labels.tolist() == [ms[2].label]
    assert store.vector_state("a", "m")[1] > seq


def test_vectors_reject_bad_shapes_and_values(store: Any) -> None:
    m = put(store, "x")[0]
    label, chash = np.array([m.label]), [m.content_hash]
    with pytest.raises(NonFiniteVector):
        store.put_vectors("m", label, np.array([[np.nan, 0, 0]], np.float32), chash)
    with pytest.raises(DimensionMismatch):
        store.put_vectors("m", label, np.ones((1, 3), np.float64), chash)
    with pytest.raises(DimensionMismatch):
        store.put_vectors("m", np.array([m.label, m.label]), np.ones((1, 3), np.float32), chash * 2)
    with pytest.raises(InvalidInput, match="content hashes"):
        store.put_vectors("m", np.array([m.label, m.label]), np.ones((2, 3), np.float32), chash)
    store.put_vectors("m", label, np.ones((1, 3), np.float32), chash)
    with pytest.raises(DimensionMismatch, match="3-d"):
        store.put_vectors("m", label, np.ones((1, 4), np.float32), chash)
    assert store.vectors("a", "m")[1].shape == (1, 3)
    assert store.put_vectors("m", np.zeros(0, np.int64), np.zeros((0, 3), np.float32), []).tolist() == []


def test_stale_and_deleted_vectors_are_not_stored(store: Any) -> None:
    m, gone = put(store, "old words", "soon gone")
    store.update("a", m.id, text="new words")  # re-worded while it was being embedded
    store.delete("a", gone.id)
    stored = store.put_vectors("m", np.array([m.label, gone.label]), unit(2), [m.content_hash, gone.content_hash])
    assert stored.tolist() == []
    assert [p.text for p in store.pending("a", "m", 10)] == ["new words"]


def test_rewording_drops_vectors_and_requeues(store: Any) -> None:
    m = put(store, "first text")[0]
    store_vectors(store, [m])
    assert store.pending("a", "m", 10) == []
    store.update("a", m.id, importance=0.9)  # not a new text: the vector stays
    assert store.vector_state("a", "m")[0] == 1
    new = store.update("a", m.id, text="second text")
    assert store.vector_state("a", "m")[0] == 0
    assert [(p.label, p.content_hash) for p in store.pending("a", "m", 10)] == [(m.label, new.content_hash)]


def test_delete_removes_vectors(store: Any) -> None:
    ms = put(store, "a1", "a2")
    store_vectors(store, ms)
    store.delete_many("a", [ms[0].id])
    assert store.vector_labels("a", "m").tolist() == [ms[1].label]


def test_pending_queue_and_failures(store: Any) -> None:
    ms = put(store, "p0", "p1", "p2", "p3")
    put(store, "other actor", actor="b")
    pend = store.pending("a", "m", 10)
    assert [(p.label, p.actor, p.text, p.content_hash, p.attempts, p.last_error) for p in pend] == [
        (m.label, "a", m.text, m.content_hash, 0, None) for m in ms
    ]
    assert [p.label for p in store.pending("a", "m", 2)] == [ms[0].label, ms[1].label]
    stats = store.pending_stats("a", "m")
    assert (stats.count, stats.failing) == (4, 0)
    assert stats.oldest_created_at is not None and stats.oldest_created_at <= datetime.now(timezone.utc)
    store.record_embed_failure("m", [ms[0].label, ms[1].label], "model down")
    store.record_embed_failure("m", [ms[0].label], "still down")
    pend = store.pending("a", "m", 10)
    assert [p.label for p in pend] == [ms[2].label, ms[3].label, ms[1].label, ms[0].label]  # failures last
    assert (pend[-1].attempts, pend[-1].last_error) == (2, "still down")
    assert store.pending_stats("a", "m").failing == 2
    store_vectors(store, ms[:2])
    assert [p.label for p in store.pending("a", "m", 10)] == [ms[2].label, ms[3].label]
    assert store.pending_stats("a", "m").failing == 0
    store_vectors(store, ms[2:], seed=2)
    empty = store.pending_stats("a", "m")
    assert (empty.count, empty.oldest_created_at, empty.failing) == (0, None, 0)
    assert store.pending("a", "other-model", 10)[0].label == ms[0].label  # pending is per model


def test_drop_vectors(store: Any) -> None:
    ms = put(store, "d0", "d1")
    put(store, "b0", actor="b")
    store_vectors(store, ms, model="old")
    store_vectors(store, ms, model="new", seed=5)
    assert store.vector_models("a") == {"new": 2, "old": 2}
    assert store.drop_vectors("a", "old") == 2
    assert store.vector_models("a") == {"new": 2}
    assert [p.label for p in store.pending("a", "old", 10)] == [m.label for m in ms]  # pending again
    assert store.drop_vectors("a", "old") == 0
    entry = [e for e in store.audit_entries("a") if e.op == "migration"][0]
    assert (entry.uri, entry.content_hash) == ("model:old", "dropped:2")
    # once no vector of a model is left, a new dimension under its name is accepted
    store.drop_vectors("a", "new")
    store.put_vectors("new", np.array([ms[0].label]), np.ones((1, 7), np.float32), [ms[0].content_hash])
    assert store.vectors("a", "new")[1].shape == (1, 7)
