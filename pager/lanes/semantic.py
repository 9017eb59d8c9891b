"""The semantic lane: one HNSW index per (actor, model), a cache derived from the store.

The index only ever holds vectors of the active model, so a query never compares vectors of
two models. It is saved beside the store with a manifest (store id, actor, model, dim, the last
vector sequence it holds); on open it is verified before it is trusted, caught up from the store
when it is merely behind, and rebuilt from the store when it is wrong. Adds and removes go
through one lock so a forget cannot be undone by an embedding worker racing it.
"""

from __future__ import annotations

import hashlib
import logging
import re
import shutil
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from mempager.errors import EmbedderError, IndexStale, PagerError
from mempager.index.labelmap import LabelRows
from mempager.protocols import Embedder, Store
from mempager.types import FloatMatrix, LabelArray
from mempager.validate import content_digest as digest
from mempager.validate import content_digests as digests

log = logging.getLogger("mempager.semantic")
# From this many vectors the search runs beside the lexical lane's. Measured side by side (retrieve
# p50): at 10k the search takes ~0.08 ms and the hand-over to a helper cost more than it saved (0.78
# -> 0.82-0.86 ms); at 100k (search 0.12-0.24 ms) it saves up to 0.1 ms (1.09 -> 0.98-1.01 ms); at 1M
# (ef 600, search ~1.2 ms) ~1.1 ms.
ASIDE_FROM = 50_000


def slug(text: str) -> str:
    """A file-name-safe, injective name: readable prefix plus a hash of the exact text."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:60] or "_"
    return f"{readable}-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:12]}"


class _Unbuilt:
    """The index of a lane whose vector width is not known yet: empty, and nothing to save.

    A forced embedder that is down at open (and has no configured width) leaves the lane here
    until its first vectors arrive; the salience and lexical lanes serve meanwhile.
    """

    def __len__(self) -> int:
        return 0

    def __contains__(self, label: object) -> bool:
        return False

    def labels(self) -> LabelArray:
        return np.zeros(0, dtype=np.int64)

    def search(self, vector: FloatMatrix, k: int, allow: frozenset[int] | None = None) -> list[tuple[int, float]]:
        return []

    def remove(self, labels: Iterable[int]) -> None:
        return None  # nothing was ever added

    def needs_rebuild(self) -> bool:
        return False

    def rebuild(self) -> None:
        return None


class SemanticLane:
    def __init__(
        self,
        store: Store,
        actor: str,
        embedder: Embedder,
        directory: Path | None,
        *,
        M: int = 16,  # noqa: N803 - hnswlib's name for it
        ef_construction: int = 200,
        ef: int | None = 128,  # the least search width (PagerConfig.hnsw_ef)
        max_deleted_share: float = 0.2,
        store_id: str = "",
        ef_per_million: int | None = 0,  # ef grows with the graph (PagerConfig.hnsw_ef_per_million)
    ) -> None:
        self._graph = (M, ef_construction, ef, ef_per_million)
        self._max_deleted_share = max_deleted_share
        self.store = store
        self.actor = actor
        self.embedder = embedder
        self.directory = None if directory is None else directory / slug(actor) / slug(embedder.name)
        self.store_id = store_id
        self.index: Any = self._make(self._known_dim())
        self.lock = threading.RLock()
        self.opened_how = "new"
        self.added_since_save = 0
        self.changed = True  # anything since the last save (or load) that the saved files lack
        # What the lane cannot see yet: memories without a current vector of this model. The
        # salience lane covers them, so a fresh write is reachable before it is embedded.
        self.unembedded: set[int] = set()
        # label -> digest of the content hash its indexed vector was made from (8 bytes a label)
        self.indexed_hash = LabelRows(np.int64)
        # A leaf lock for the two structures above: ``track`` runs under the store's write lock,
        # so it must never wait for ``self.lock`` (held by workers while they wait for the store).
        self._track_lock = threading.Lock()

    def _make(self, dim: int | None) -> Any:
        if dim is None:
            return _Unbuilt()
        from mempager.index.hnsw import HnswIndex  # lazily: `import mempager` stays free of hnswlib

        m, ef_construction, ef, per_million = self._graph
        return HnswIndex(
            dim,
            M=m,
            ef_construction=ef_construction,
            ef=ef,
            ef_per_million=per_million,
            max_deleted_share=self._max_deleted_share,
        )

    def _known_dim(self) -> int | None:
        """The embedder's width, or None while a forced embedder that is down has not told it yet."""
        try:
            return int(self.embedder.dim)
        except EmbedderError as exc:  # not fatal: the width arrives with the first vectors
            log.info("semantic lane of %s/%s waits for its embedder: %s", self.actor, self.model, exc)
            return None

    @property
    def model(self) -> str:
        return self.embedder.name

    def _meta(self) -> dict[str, Any]:
        return {"store_id": self.store_id, "actor": self.actor, "model": self.model, "dim": self.index.dim}

    def open(self) -> str:
        """Load the saved index if it is ours and intact, catch it up, else rebuild. Says which."""
        with self.lock:
            how = self._open()
            live = self.store.live_labels(self.actor)
            indexed = self.index.labels()
            known = self._digests_of(indexed)
            hashed = LabelRows(np.int64)
            hashed.set_many(indexed[known >= 0], known[known >= 0])
            with self._track_lock:
                self.unembedded = set(np.setdiff1d(live, indexed, assume_unique=True).tolist())
                self.indexed_hash = hashed
            return how

    def _digests_of(self, labels: LabelArray) -> npt.NDArray[np.int64]:
        """The digest of each label's current content hash in the store (-1: not a live memory)."""
        digests_of = getattr(self.store, "content_digests_of", None)  # the embedded store: no string of each
        if digests_of is not None:
            found: npt.NDArray[np.int64] = digests_of(self.actor, labels)
            return found
        hashes = self.store.content_hashes(self.actor)
        return digests([hashes.get(label) for label in labels.tolist()])

    def _open(self) -> str:
        if self.directory is None or not self.directory.exists():
            return self._rebuild("no saved index")
        if isinstance(self.index, _Unbuilt):  # no width to check the saved one against: the store has it
            return self._rebuild("the embedder is down and has not told its width")
        try:
            self.index.load(self.directory, expect_meta=self._meta())
        except IndexStale as exc:
            log.warning("saved index for %s/%s is stale, rebuilding from the store: %s", self.actor, self.model, exc)
            return self._rebuild(f"stale: {exc}")
        return self._catch_up(int(self.index.meta.get("vector_seq", 0)))

    def track(self, upserted: Iterable[Any], removed: Iterable[int]) -> None:
        """Keep the unembedded set exact as memories are written, re-worded and deleted."""
        with self._track_lock:
            stale = []
            for memory in upserted:
                known = self.indexed_hash.get(memory.label)
                if known is None:
                    self.unembedded.add(memory.label)
                elif known != digest(memory.content_hash):  # re-worded: its old vector must not answer
                    stale.append(memory.label)
                    self.unembedded.add(memory.label)
            for label in stale:
                self.indexed_hash.pop(label, None)
            for label in removed:
                self.unembedded.discard(label)
        if stale:  # the index has its own reader-writer lock
            self.index.remove(stale)
            self.changed = True

    def pending_hint(self) -> int:
        """Memories without a vector in this lane: exact, and free to ask (no SQL)."""
        with self._track_lock:
            return len(self.unembedded)

    def unembedded_labels(self) -> list[int]:
        with self._track_lock:
            return list(self.unembedded)

    def _rebuild(self, why: str) -> str:
        labels, vectors = self.store.vectors(self.actor, self.model)
        dim = self._known_dim() if isinstance(self.index, _Unbuilt) else self.index.dim
        self.index = self._make(int(vectors.shape[1]) if dim is None and len(labels) else dim)
        if len(labels):
            self.index.add(labels, vectors)
        self.opened_how = f"rebuilt ({why}): {len(labels)} vectors"
        self.added_since_save = len(labels)
        return self.opened_how

    def _catch_up(self, saved_seq: int) -> str:
        labels, vectors = self.store.vectors_since(self.actor, self.model, saved_seq)
        if len(labels):
            self.index.add(labels, vectors)
        current = self.store.vector_labels(self.actor, self.model)
        extra = np.setdiff1d(self.index.labels(), current, assume_unique=True)
        if len(extra):
            self.index.remove(extra.tolist())
        if len(self.index) != len(current):  # something we cannot explain: trust the store
            return self._rebuild(f"{len(self.index)} indexed vs {len(current)} stored after catch-up")
        self.opened_how = f"loaded: +{len(labels)} caught up, -{len(extra)} removed"
        self.added_since_save = len(labels) + len(extra)
        self.changed = bool(len(labels) or len(extra))
        return self.opened_how

    def save(self) -> None:
        """Persist the index atomically with the store sequence it is current to (if it changed)."""
        if self.directory is None or not self.changed or isinstance(self.index, _Unbuilt):
            return
        with self.lock:
            _, seq = self.store.vector_state(self.actor, self.model)
            self.directory.mkdir(parents=True, exist_ok=True)
            self.index.save(self.directory, meta={**self._meta(), "vector_seq": seq})
            self.added_since_save = 0
            self.changed = False

    def purge(self) -> None:
        """Make removed vectors' bytes disappear from memory and disk (after a hard forget)."""
        with self.lock:
            self.index.rebuild()
            self.changed = True
            self.save()

    def drop_saved(self) -> None:
        if self.directory is not None and self.directory.exists():
            shutil.rmtree(self.directory)

    def add(self, labels: LabelArray, vectors: FloatMatrix, content_hashes: Sequence[str] = ()) -> None:
        with self.lock:
            if len(labels):
                if isinstance(self.index, _Unbuilt):  # the first vectors of a late embedder set the width
                    self.index = self._make(int(np.shape(vectors)[1]))
                self.index.add(labels, vectors)
                self.added_since_save += len(labels)
                self.changed = True
                with self._track_lock:
                    done = np.asarray(labels, np.int64)[: len(content_hashes)]
                    values = digests(list(content_hashes)[: len(done)])
                    self.indexed_hash.set_many(done[values >= 0], values[values >= 0])
                    self.unembedded.difference_update(done.tolist())

    def remove(self, labels: Iterable[int]) -> None:
        with self.lock:
            labels = list(labels)
            self.index.remove(labels)
            self.changed = True
            with self._track_lock:
                for label in labels:
                    self.indexed_hash.pop(label, None)
                    self.unembedded.discard(label)
            if self.index.needs_rebuild():
                self.index.rebuild()

    def embed_query(self, query: str) -> FloatMatrix:
        """The query's vector. Any failure is an ``EmbedderError``: retrieval then goes on without
        this lane, so a foreign exception from a custom embedder must not escape untranslated."""
        try:
            vectors = self.embedder.embed([query], role="query")
        except PagerError:
            raise
        except Exception as exc:
            raise EmbedderError(f"{self.model} failed to embed the query: {type(exc).__name__}: {exc}") from exc
        return np.asarray(vectors[0], dtype=np.float32)

    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        return self.search_vector(self.embed_query(query), k)

    def scores_for(self, vector: FloatMatrix, labels: Sequence[int]) -> dict[int, float]:
        """Cosine of ``vector`` with each indexed label's vector (labels without one are left out)."""
        present = list(labels)
        if not present:
            return {}
        try:  # the common case: every label has a vector (one vectorised look-up, no test per label)
            scores = self.index.get_vectors(present) @ vector
        except KeyError:  # some have none (not embedded yet, or removed meanwhile): score the rest
            present = [label for label in present if label in self.index]
            scores = self.index.get_vectors(present) @ vector if present else np.zeros(0)
        return dict(zip(present, scores.tolist(), strict=True))

    def search_vector(self, vector: FloatMatrix, k: int) -> list[tuple[int, float]]:
        result: list[tuple[int, float]] = self.index.search(vector, k)
        return result

    @property
    def searches_aside(self) -> bool:
        """Whether its search is worth a helper thread beside the lexical lane's (``lanes.aside``): it
        is thread-safe, waits on nothing outside the index, and hnswlib releases the GIL meanwhile.
        Below ``ASIDE_FROM`` vectors the search is too short to pay for the hand-over."""
        return len(self.index) >= ASIDE_FROM

    def search_snapshot(self, vector: FloatMatrix, k: int) -> tuple[list[tuple[int, float]], list[int]]:
        """The search, and what was unembedded before *or* after it: a memory the worker indexes
        meanwhile is in the first snapshot, one a re-wording pulls out is in the second."""
        before = self.unembedded_labels()
        hits = self.search_vector(vector, k)
        return hits, list(set(before).union(self.unembedded_labels()))

    def __contains__(self, label: object) -> bool:
        return label in self.index

    def __len__(self) -> int:
        return len(self.index)
