"""The pager's lanes over a PostgreSQL store, for many processes sharing one memory.

* Semantic: pgvector in the database. Nothing is held in the process, so a vector another
  process stored is searchable the moment its transaction commits (numbers that chose this over
  a per-process hnswlib index: benchmarks/results/postgres.md).
* Lexical: our BM25 (``index.lexical``), built from the database at open and caught up before
  every search by following the audit trail: audit ``seq`` order is commit order, so "every entry
  of this actor after the last one I applied" never misses a write, re-wording or forget, whoever
  made it. PostgreSQL full-text search lost to it on LoCoMo (same results file).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from mempager.errors import EmbedderError
from mempager.patterns import text_for_index
from mempager.protocols import CandidateAsk, CandidateFacts, Embedder
from mempager.types import FloatMatrix, LabelArray, Memory

log = logging.getLogger("mempager.pgstore")
FRESH_S = 0.5  # how long a vector search's "nothing changed" serves the same thread's lexical search
# From this many vectors the search runs in a helper thread beside the lexical search (lanes.aside):
# below, as for the embedded store's hnswlib (lanes.semantic.ASIDE_FROM), it is too short to pay for
# the hand-over and the lexical lane's own catch-up read.
ASIDE_FROM = 50_000


class PgSemanticLane:
    """SemanticLaneLike answered by the store's pgvector index; add/remove/track have nothing to keep.

    ``feed``: the same actor's lexical lane, told by each search whether it missed a text change
    (``search_snapshot``): when it did not, the retrieve's lexical search reads nothing itself.
    That word is kept per thread, so it is given only when the search runs in the retrieving
    thread. Over a large index (``searches_aside``) the search runs in a helper thread instead
    (``lanes.aside``): the pgvector search is server time (~0.5 ms of a retrieve's ~3 at 100k)
    during which the retrieving thread does the lexical search, its catch-up read included.
    """

    def __init__(self, store: Any, actor: str, embedder: Embedder, feed: PgLexicalLane | None = None) -> None:
        self.store = store
        self.actor = actor
        self.embedder = embedder
        self.feed = feed
        self.lock = threading.RLock()
        self.opened_how = "new"
        self.added_since_save = 0
        self.vectors_at_open = 0  # the actor's vectors of the model when opened (another process's since: not counted)

    @property
    def model(self) -> str:
        return self.embedder.name

    def open(self) -> str:
        try:
            dim: int | None = int(self.embedder.dim)
        except EmbedderError as exc:  # a forced embedder that is down: its width comes with its first vectors
            log.info("semantic lane of %s/%s waits for its embedder: %s", self.actor, self.model, exc)
            dim = None
        self.store.ensure_model(self.model, dim)  # registered either way, so writes queue for it
        count, _ = self.store.vector_state(self.actor, self.model)
        self.vectors_at_open = int(count)
        self.opened_how = f"pgvector: {count} vectors of {self.model} in {self.store.location}"
        return self.opened_how

    @property
    def searches_aside(self) -> bool:
        """Whether the search runs beside the lexical search (``lanes.aside``): from ``ASIDE_FROM``
        vectors (those at open and this process's since). A measure of cost, not of correctness:
        either way the lexical lane sees every change committed before the retrieve."""
        return self.vectors_at_open + self.added_since_save >= ASIDE_FROM

    def save(self) -> None:
        """Nothing to save: the index lives in the database."""

    def purge(self) -> None:
        """Nothing held here; ``store.compact()`` rewrites the vector table and its index."""

    def add(self, labels: LabelArray, vectors: FloatMatrix, content_hashes: Sequence[str] = ()) -> None:
        """``put_vectors`` already stored and indexed them."""
        self.added_since_save += len(labels)

    def remove(self, labels: Iterable[int]) -> None:
        """Deleting a memory deletes its vectors (ON DELETE CASCADE)."""

    def track(self, upserted: Iterable[Any], removed: Iterable[int]) -> None:
        """The embedding queue in the database already knows what is unembedded."""

    def unembedded_labels(self) -> list[int]:
        labels: list[int] = self.store.queued_labels(self.actor, self.model)
        return labels

    def embed_query(self, query: str) -> FloatMatrix:
        return np.asarray(self.embedder.embed([query], role="query")[0], dtype=np.float32)

    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        return self.search_vector(self.embed_query(query), k)

    def search_vector(self, vector: FloatMatrix, k: int) -> list[tuple[int, float]]:
        hits: list[tuple[int, float]] = self.store.search_vectors(self.actor, self.model, vector, k)
        return hits

    def search_snapshot(self, vector: FloatMatrix, k: int) -> tuple[list[tuple[int, float]], list[int]]:
        """The search and the queue in one statement: what it did not find is queued, or has no memory.

        The same statement reads the seq of the actor's latest text change: when the lexical
        lane (``feed``) already stands there, the retrieve's lexical search right after this
        needs no catch-up read (a round trip of its own) to know that nothing changed. Not when
        the search runs aside: the word is for this thread, and the lexical search runs in another.
        """
        feed = self.feed
        if feed is None or self.searches_aside:
            found: tuple[list[tuple[int, float]], list[int]] = self.store.search_with_queue(
                self.actor, self.model, vector, k
            )
            return found
        commits, seq = self.store.commits, feed.seq  # both before the read: what it is sure to see
        try:
            hits, queued, latest = self.store.search_with_latest(self.actor, self.model, vector, k)
        except BaseException:
            feed.searched(seq, commits, None)
            raise
        feed.searched(seq, commits, latest)
        return hits, queued

    def scores_for(self, vector: FloatMatrix, labels: Sequence[int]) -> dict[int, float]:
        scores: dict[int, float] = self.store.vector_scores(self.actor, self.model, vector, labels)
        return scores

    def facts_with_scores(self, vector: FloatMatrix, ask: CandidateAsk) -> CandidateFacts:
        """``ask`` and ``scores_for(vector, ask.cosine)`` in the store's one statement: this lane's
        scores are the store's stored-vector cosines (``lanes.candidates``)."""
        facts: CandidateFacts = self.store.candidate_facts(self.actor, replace(ask, model=self.model, vector=vector))
        return facts

    def __contains__(self, label: object) -> bool:
        if not isinstance(label, (int, np.integer)):
            return False
        return bool(self.store.has_vector(self.actor, self.model, int(label)))

    def __len__(self) -> int:
        return int(self.store.vector_state(self.actor, self.model)[0])


class PgLexicalLane:
    """LexicalLaneLike: BM25 in this process, fed from the database (own and others' writes alike)."""

    def __init__(self, store: Any, actor: str, context: Any = None, context_types: tuple[Any, ...] = ()) -> None:
        from mempager.index.lexical import LexicalIndex  # lazily: `import mempager` stays light

        def make() -> Any:
            return LexicalIndex(context=context)

        self._make = make
        self.store = store
        self.actor = actor
        # memories of these types are scored with their episode's neighbours (index.episodes)
        self.context_types = frozenset(str(t) for t in context_types) if context is not None else frozenset()
        self.index: Any = make()
        self.lock = threading.RLock()
        self.seq = 0  # the last audit entry of this actor the index reflects
        self.opened_how = "new"
        # per thread: (this process's commit count, when) of its last vector search that found
        # the index up to date (``searched``), which its next ``search_scored`` stands on
        self._fresh = threading.local()

    def open(self) -> str:
        return self.rebuild("opened")

    def rebuild(self, why: str) -> str:
        """A fresh index from the actor's memories, and the audit position it is current to."""
        with self.lock:
            seq, texts = self.store.texts_at(self.actor)
            index = self._make()
            if texts:
                index.add(
                    [row[0] for row in texts],
                    [text_for_index(row[1]) for row in texts],
                    [self._time(row[2], row[3]) for row in texts],
                )
            self.index, self.seq = index, seq
            self.opened_how = f"rebuilt ({why}): {len(texts)} documents from {self.store.location}"
            return self.opened_how

    def catch_up(self) -> int:
        """Apply every change to this actor committed since the last call; returns how many."""
        with self.lock:
            found = self.store.text_changes(self.actor, self.seq)
            if not found:
                return 0
            latest: dict[int, tuple[str | None, str | None, float | None]] = {}
            for _, label, text, type_, when in found:
                latest[int(label)] = (text, type_, when)  # the row as it is now; text None once deleted
            upserts = [(label, row) for label, row in latest.items() if row[0] is not None]
            if upserts:
                self.index.add(
                    [label for label, _ in upserts],
                    [text_for_index(str(row[0])) for _, row in upserts],
                    [self._time(row[1], row[2]) for _, row in upserts],
                )
            gone = [label for label, row in latest.items() if row[0] is None]
            if gone:
                self.index.remove(gone)
            self.seq = int(found[-1][0])
            return len(latest)

    def searched(self, seq: int, commits: int, latest: int | None) -> None:
        """What this thread's vector search read: ``latest``, the seq of the actor's latest text
        change (None: not read), when the index stood at ``seq`` and this process had committed
        ``commits`` transactions.

        When nothing changed after ``seq``, this thread's next ``search_scored`` reads nothing
        itself, if the process has committed nothing since (its own writes are always seen)
        and it comes within ``FRESH_S``: a retrieve's lexical search follows its vector search
        by well under a millisecond, and sees what a read of its own would have seen but for
        commits racing the retrieve. Anything else: it catches up as always.
        """
        fresh = latest is not None and latest <= seq <= self.seq
        self._fresh.mark = (commits, time.monotonic()) if fresh else None

    def _read_with_search(self) -> bool:
        """Whether this thread's last vector search found the index up to date for this search (used once)."""
        mark = getattr(self._fresh, "mark", None)
        if mark is None:
            return False
        self._fresh.mark = None
        return bool(mark[0] == self.store.commits and time.monotonic() - mark[1] < FRESH_S)

    def _time(self, type_: str | None, when: float | None) -> float:
        """A memory's place in its episode (epoch seconds), NaN when its type has no context keys."""
        return float(when) if when is not None and type_ in self.context_types else math.nan

    def save(self) -> None:
        """Nothing to save: the next process builds its index from the database."""

    def apply(self, upserted: Sequence[Memory], removed: Sequence[int]) -> None:
        """Changes arrive through the audit trail at the next search, whoever made them."""

    def search_scored(
        self, query: str, k: int, also: Sequence[int] | Callable[[], Sequence[int]]
    ) -> tuple[list[tuple[int, float]], dict[int, float]]:
        self.store.forget_shown()  # every ranking starts here: the last retrieve's packing rows are not this one's
        if not self._read_with_search():
            self.catch_up()
        top, extra = self.index.search_scored(query, k, also)
        return list(top), dict(extra)

    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        self.catch_up()
        result: list[tuple[int, float]] = self.index.search(query, k)
        return result

    def spoken_by(self, query: str, labels: Iterable[int]) -> list[int]:
        """No catch-up (a round trip): ``labels`` come from lanes the same rank() just caught up."""
        said: list[int] = self.index.spoken_by(query, labels)
        return said

    def match(self, query: str) -> list[tuple[int, float]]:
        self.catch_up()
        result: list[tuple[int, float]] = self.index.match(query)
        return result

    def __len__(self) -> int:
        return len(self.index)
