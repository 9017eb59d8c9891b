"""The semantic lane: one vector index per (actor, model), a cache derived from the store.

The index only ever holds vectors of the active model, so a query never compares vectors of
two models. Adds and removes go through one lock so that a forget cannot be undone by an
embedding worker racing it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

import numpy as np

from index.exact import ExactIndex

from .protocols import Embedder, VectorIndex
from .store import DuckDBStore
from .types import FloatMatrix, LabelArray

IndexFactory = Callable[[int], VectorIndex]


class SemanticLane:
    def __init__(
        self,
        store: DuckDBStore,
        actor: str,
        embedder: Embedder,
        index_factory: IndexFactory | None = None,
    ) -> None:
        self.store = store
        self.actor = actor
        self.embedder = embedder
        self._factory: IndexFactory = index_factory or (lambda dim: ExactIndex(dim))
        self.index: VectorIndex = self._factory(embedder.dim)
        self.lock = threading.RLock()

    @property
    def model(self) -> str:
        return self.embedder.name

    def load(self) -> int:
        """Fill the index from the store's vectors of the active model; returns the count."""
        labels, vectors = self.store.vectors(self.actor, self.model)
        with self.lock:
            self.index = self._factory(self.embedder.dim)
            if len(labels):
                self.index.add(labels, vectors)
        return len(labels)

    def add(self, labels: LabelArray, vectors: FloatMatrix) -> None:
        with self.lock:
            if len(labels):
                self.index.add(labels, vectors)

    def remove(self, labels: Iterable[int]) -> None:
        with self.lock:
            self.index.remove(list(labels))

    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        vector = self.embedder.embed([query], role="query")
        return self.index.search(np.asarray(vector[0], dtype=np.float32), k)

    def __len__(self) -> int:
        return len(self.index)
