"""A bounded cache of recent query vectors, and an embedder wrapper that consults it.

An agent asks the same things again (a retried turn, the same goal every turn, a page and its
``retrieve`` for one question), and a local model spends milliseconds on each: more than the rest
of a page fault. A query's vector depends only on the model and the exact text, so it is safe to
reuse. Documents are never cached: the background workers embed each one once, and their texts
would only push the queries out.

The cache belongs to one embedder (one pager), never to the process: a cache shared between
actors would let one tell from a fast answer what another asked.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from mempager.embedders.base import check_role, check_texts
from mempager.errors import ConfigError
from mempager.protocols import Embedder
from mempager.types import FloatMatrix, Role

DEFAULT_SIZE = 1024  # 1024 × 384 float32 ≈ 1.5 MiB for MiniLM

# (model name, exact query text, role): the role is part of the key so a model whose query and
# document prompts differ could never answer one with the other's vector.
Key = tuple[str, str, Role]


class QueryCache:
    """A thread-safe LRU of ``(model, text, role) -> vector``, at most ``size`` entries.

    Stored vectors are private read-only copies and every hit returns a fresh copy, so no caller
    can change what a later caller gets.
    """

    def __init__(self, size: int = DEFAULT_SIZE) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ConfigError(f"query cache size must be an integer >= 0 (0 disables it), got {size!r}")
        self._size = size
        self._entries: OrderedDict[Key, FloatMatrix] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def size(self) -> int:
        return self._size

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def get(self, key: Key) -> FloatMatrix | None:
        """A copy of the vector stored under ``key``, now the most recently used, or None."""
        with self._lock:
            vector = self._entries.get(key)
            if vector is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
        return vector.copy()

    def put(self, key: Key, vector: FloatMatrix) -> None:
        """Store a copy of ``vector``, evicting the least recently used entry beyond ``size``."""
        if self._size == 0:
            return
        stored = np.array(vector, dtype=np.float32, copy=True)
        stored.flags.writeable = False
        with self._lock:
            self._entries[key] = stored
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


class CachedQueryEmbedder:
    """``inner`` with its query vectors cached; same ``name`` and ``dim``, same vectors.

    ``embed(..., role="query")`` looks each text up and embeds only the ones not cached, in one
    call to ``inner``; ``role="document"`` always goes straight to ``inner``.
    """

    def __init__(self, inner: Embedder, size: int = DEFAULT_SIZE) -> None:
        self._inner = inner
        self.cache = QueryCache(size)

    @property
    def inner(self) -> Embedder:
        return self._inner

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def dim(self) -> int:
        return self._inner.dim

    def __repr__(self) -> str:
        return f"CachedQueryEmbedder({self._inner!r}, size={self.cache.size})"

    def embed(self, texts: Sequence[str], role: Role = "document") -> FloatMatrix:
        items, role = check_texts(texts), check_role(role)
        if role != "query" or self.cache.size == 0 or not items:
            return self._inner.embed(items, role=role)
        name = self._inner.name  # read per call: a deferred or down embedder may learn it late
        found = [self.cache.get((name, text, role)) for text in items]
        missing = [i for i, vector in enumerate(found) if vector is None]
        if not missing:
            return np.stack([v for v in found if v is not None])
        # the same text twice in one call is embedded once
        unique = list(dict.fromkeys(items[i] for i in missing))
        fresh = self._inner.embed(unique, role=role)
        by_text = dict(zip(unique, fresh, strict=True))
        for text, vector in by_text.items():
            self.cache.put((name, text, role), vector)
        rows = [by_text[text] if vector is None else vector for vector, text in zip(found, items, strict=True)]
        # np.stack copies, so the rows handed back are never the cache's own arrays
        return np.stack(rows).astype(np.float32, copy=False)
