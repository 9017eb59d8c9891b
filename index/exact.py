"""Exact (brute-force) cosine index over a numpy matrix.

The reference every approximate index is tested against, and the semantic lane for small stores.
Rows are assumed L2-normalised, so the inner product is the cosine similarity.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from mempager.errors import DimensionMismatch, IndexStale, InvalidInput
from mempager.types import FloatMatrix, LabelArray

_FILE = "exact.npz"


class ExactIndex:
    def __init__(self, dim: int, capacity: int = 1024) -> None:
        self._dim = dim
        self._vectors = np.zeros((max(capacity, 16), dim), dtype=np.float32)
        self._labels = np.full(max(capacity, 16), -1, dtype=np.int64)
        self._rows: dict[int, int] = {}
        self._free: list[int] = []
        self._size = 0  # rows in use at the front of the matrix, live or freed

    @property
    def dim(self) -> int:
        return self._dim

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, label: object) -> bool:
        return label in self._rows

    def labels(self) -> LabelArray:
        return np.fromiter(self._rows.keys(), dtype=np.int64, count=len(self._rows))

    def add(self, labels: LabelArray, vectors: FloatMatrix) -> None:
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self._dim:
            raise DimensionMismatch(
                f"exact index holds {self._dim}-d vectors, got shape {vectors.shape}; "
                "vectors of another model belong in that model's index"
            )
        label_list = np.asarray(labels, dtype=np.int64).reshape(-1).tolist()
        if len(label_list) != len(vectors):
            raise InvalidInput(f"{len(label_list)} labels for {len(vectors)} vectors")
        for label, vector in zip(label_list, vectors, strict=True):
            row = self._rows.get(label)
            if row is None:
                row = self._free.pop() if self._free else self._next_row()
                self._rows[label] = row
                self._labels[row] = label
            self._vectors[row] = vector

    def _next_row(self) -> int:
        if self._size == len(self._labels):
            grow = max(16, len(self._labels))
            self._vectors = np.vstack([self._vectors, np.zeros((grow, self._dim), np.float32)])
            self._labels = np.concatenate([self._labels, np.full(grow, -1, dtype=np.int64)])
        self._size += 1
        return self._size - 1

    def remove(self, labels: Iterable[int]) -> None:
        for label in labels:
            row = self._rows.pop(int(label), None)
            if row is not None:
                self._labels[row] = -1
                self._vectors[row] = 0.0  # forgotten vectors do not linger in memory
                self._free.append(row)

    def search(self, vector: FloatMatrix, k: int, allow: frozenset[int] | None = None) -> list[tuple[int, float]]:
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        if query.shape[0] != self._dim:
            raise DimensionMismatch(f"query has {query.shape[0]} dims, index has {self._dim}")
        if k <= 0 or not self._rows:
            return []
        labels = self._labels[: self._size]
        scores = self._vectors[: self._size] @ query
        live = labels >= 0
        if allow is not None:
            live &= np.isin(labels, np.fromiter(allow, dtype=np.int64, count=len(allow)))
        candidates = np.flatnonzero(live)
        if candidates.size == 0:
            return []
        k = min(k, candidates.size)
        # Keep every candidate tied with the k-th score, so the cut (not only the order) prefers lower labels.
        cut = np.partition(scores[candidates], candidates.size - k)[candidates.size - k]
        part = candidates[scores[candidates] >= cut]
        # deterministic order: score desc, then label asc
        order = np.lexsort((labels[part], -scores[part]))[:k]
        return [(int(labels[part[i]]), float(scores[part[i]])) for i in order]

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        labels = self.labels()
        rows = np.array([self._rows[int(x)] for x in labels], dtype=np.int64)
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                np.savez(fh, labels=labels, vectors=self._vectors[rows], dim=np.int64(self._dim))
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, directory / _FILE)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def load(self, directory: Path) -> None:
        try:
            with np.load(directory / _FILE, allow_pickle=False) as data:
                dim = int(data["dim"])
                labels, vectors = data["labels"], data["vectors"]
        except (OSError, ValueError, KeyError) as exc:
            raise IndexStale(f"exact index in {directory} is unreadable ({exc}); rebuild it") from exc
        if dim != self._dim:
            raise IndexStale(f"exact index in {directory} is {dim}-d, expected {self._dim}-d")
        self.__init__(self._dim, capacity=len(labels) + 16)  # type: ignore[misc]
        self.add(labels, vectors)
