"""The PostgreSQL store: the Store protocol for many processes and hosts sharing one memory.

Every write is one transaction, durable (the server's WAL) and visible to every other process
when the call returns. Dedup is the UNIQUE (actor, type, dedup_key) constraint with
``INSERT ... ON CONFLICT DO UPDATE``: concurrent writers of the same words reinforce one memory
instead of racing to insert two. Nothing is cached in the process except what the lanes derive.

``PostgresStore`` is a facade over explicit collaborators sharing one ``Db`` (the pool):
``PgWrites`` (memories), ``PgReads``, ``PgJournal`` (audit, injections, feedback, review queue),
``PgModels`` (registration and indexes), ``PgEmbedQueue`` and ``PgVectors``; ``PgListeners``
holds this process's change and audit listeners. Every public method delegates to one of them.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from mempager.protocols import CandidateAsk, CandidateFacts, PendingItem, PendingStats, SalienceParams
from mempager.store.journal import Deprecate, ReviewItem
from mempager.store.pg import compaction
from mempager.store.pg.candidates import Prefetched, candidate_facts
from mempager.store.pg.compaction import compact
from mempager.store.pg.consolidation import PgConsolidation
from mempager.store.pg.db import Db
from mempager.store.pg.embed_queue import PgEmbedQueue
from mempager.store.pg.journal import PgJournal
from mempager.store.pg.listeners import ChangeListener, PgListeners
from mempager.store.pg.models import PgModels
from mempager.store.pg.options import PgOptions, describe, resolve
from mempager.store.pg.reads import PgReads
from mempager.store.pg.rows import ShownRow
from mempager.store.pg.tiers import PgTiers
from mempager.store.pg.vectors import PgVectors
from mempager.store.pg.writes import PgWrites
from mempager.types import (
    AuditEntry,
    AuditReport,
    FloatMatrix,
    LabelArray,
    Memory,
    MemoryType,
    NewMemory,
    PutResult,
    Source,
)

_OPEN: dict[tuple[str, PgOptions], PostgresStore] = {}
_OPEN_LOCK = threading.Lock()


class PostgresStore:
    def __init__(
        self, conninfo: str, parts: dict[str, str], options: PgOptions, location: str, secret: str | None
    ) -> None:
        self.options = options
        self._location = location
        self._db = Db(conninfo, parts, options, location, secret)
        self._db.open()
        self.store_id: str = self._db.store_id
        self.claimer = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._users = 1
        self._closed = False
        self._key: tuple[str, PgOptions] | None = None  # set when shared through open_pg_store
        self._listeners = PgListeners()
        self._writes = PgWrites(self._db, self._listeners)
        self._reads = PgReads(self._db)
        self._shown = Prefetched()  # a retrieve's packing rows, read with its candidates (pg/candidates.py)
        self._journal = PgJournal(self._db, self._listeners, self._writes)
        self._models = PgModels(self._db, options)
        self._queue = PgEmbedQueue(self._db, self._models, self.claimer, options.claim_seconds)
        self._vectors = PgVectors(self._db, self._models, self._listeners)
        self.consolidation = PgConsolidation(self._db, self._listeners)  # session wraps (store/pg/consolidation.py)
        self.tiers = PgTiers(self._db, self._listeners)  # crystals and spores (store/pg/tiers.py)

    def __repr__(self) -> str:
        return f"PostgresStore({self._location!r})"

    @property
    def location(self) -> str:
        """The password-free URL of the store: postgresql://user@host:port/db?schema=name."""
        return self._location

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def commits(self) -> int:
        """How many transactions this process has committed to the store (any thread, any actor)."""
        return self._db.commits

    # -- writes (PgWrites) --------------------------------------------------------------------
    def put(self, item: NewMemory) -> PutResult:
        """Write one memory (or reinforce the one with the same words)."""
        return self._writes.put(item)

    def put_many(self, items: Sequence[NewMemory]) -> list[PutResult]:
        """All or nothing, in one transaction; repeats (in the batch or the store) reinforce."""
        return self._writes.put_many(items)

    def update(self, actor: str, memory_id: str, op: str = "update", **changes: object) -> Memory:
        """Change the named fields of one memory; re-wording it re-queues it for every model."""
        return self._writes.update(actor, memory_id, op, **changes)

    def delete(self, actor: str, memory_id: str) -> Memory | None:
        """Delete the memory and every vector made from it (bytes stay until ``compact``)."""
        return self._writes.delete(actor, memory_id)

    def delete_many(self, actor: str, memory_ids: Sequence[str]) -> list[Memory]:
        """Delete these memories of ``actor`` in one transaction; unknown ids are skipped."""
        return self._writes.delete_many(actor, memory_ids)

    def touch(self, actor: str, labels: Sequence[int], when: datetime) -> None:
        """Count an access to each labelled memory, at ``when``."""
        self._writes.touch(actor, labels, when)

    # -- listeners (PgListeners) ----------------------------------------------------------------
    def add_change_listener(self, actor: str, listener: ChangeListener) -> None:
        """``listener(upserted, removed_labels)`` after every change this process commits for ``actor``."""
        self._listeners.add_change_listener(actor, listener)

    def remove_change_listener(self, actor: str, listener: ChangeListener) -> None:
        """Stop telling ``listener`` about ``actor``'s changes."""
        self._listeners.remove_change_listener(actor, listener)

    def add_audit_listener(self, listener: Callable[[AuditEntry], None]) -> None:
        """``listener(entry)`` after each audit entry this process commits."""
        self._listeners.add_audit_listener(listener)

    def remove_audit_listener(self, listener: Callable[[AuditEntry], None]) -> None:
        """Stop handing audit entries to ``listener``."""
        self._listeners.remove_audit_listener(listener)

    # -- reads (PgReads) -------------------------------------------------------------------------
    def get(self, actor: str, memory_id: str) -> Memory | None:
        """The actor's memory with this id, or None."""
        return self._reads.get(actor, memory_id)

    def get_many(self, actor: str, labels: Sequence[int]) -> dict[int, Memory]:
        """The actor's memories with these labels (unknown labels are left out)."""
        return self._reads.get_many(actor, labels)

    def shown_rows(self, actor: str, labels: Sequence[int]) -> dict[int, ShownRow]:
        """What packing reads of these memories (``lanes.rows``): ``get_many``'s fields, lighter;
        those this thread's retrieve read with its candidates are not read again."""
        held, unread = self._shown.take(actor, self.commits, labels)
        if unread:
            held.update(self._reads.shown_rows(actor, unread))
        return held

    def forget_shown(self) -> None:
        """A retrieve starts in this thread: rows read for the last one serve no other (pg/lanes.py)."""
        self._shown.forget()

    def uris(self, actor: str, labels: Sequence[int]) -> dict[int, str]:
        """The URI of each labelled memory of the actor."""
        return self._reads.uris(actor, labels)

    def find(self, actor: str, type_: MemoryType, dedup_key: str) -> Memory | None:
        """The actor's memory of ``type_`` with this dedup key, or None."""
        return self._reads.find(actor, type_, dedup_key)

    def query(
        self,
        actor: str,
        *,
        types: Sequence[MemoryType] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        sources: Sequence[Source] | None = None,
        tags: Sequence[str] | None = None,
        labels: Sequence[int] | None = None,
        limit: int = 20,
        offset: int = 0,
        order: str = "newest",
    ) -> list[Memory]:
        """The actor's memories matching every filter given, in ``order``."""
        return self._reads.query(
            actor,
            types=types,
            since=since,
            until=until,
            sources=sources,
            tags=tags,
            labels=labels,
            limit=limit,
            offset=offset,
            order=order,
        )

    def salience(
        self,
        actor: str,
        types: Sequence[MemoryType],
        params: SalienceParams,
        limit: int,
        only: Sequence[int] | None = None,
    ) -> list[tuple[int, float]]:
        """The salience score of ``pager.salience`` over current memories (or just ``only``), best first."""
        return self._reads.salience(actor, types, params, limit, only)

    def candidate_facts(self, actor: str, ask: CandidateAsk) -> CandidateFacts:
        """The prior salience and stored-vector cosines of one retrieve's candidates, in one statement
        that also reads their packing rows (kept for this thread's ``shown_rows``)."""
        self._shown.forget()
        commits = self.commits  # before the read: what it is sure to see
        facts, asked, rows = candidate_facts(self._db, actor, ask)
        self._shown.keep(actor, commits, asked, rows)
        return facts

    def of_types(
        self, actor: str, types: Sequence[MemoryType], order: str = "newest", limit: int = 1_000_000
    ) -> list[Memory]:
        """The actor's memories of ``types``, newest (or oldest) first."""
        return self._reads.of_types(actor, types, order, limit)

    def created_span(self, actor: str) -> tuple[float, float] | None:
        """The oldest and newest creation time (epoch seconds) of the actor's memories (lanes.when)."""
        return self._reads.created_span(actor)

    def created_between(self, actor: str, since: float, until: float, limit: int) -> LabelArray:
        """Labels of the actor's memories created in [since, until) (epoch seconds), newest first."""
        return self._reads.created_between(actor, since, until, limit)

    def created_of(self, actor: str, labels: Sequence[int]) -> npt.NDArray[np.float64]:
        """The creation time (epoch seconds) of each of the actor's labels; NaN where none."""
        return self._reads.created_of(actor, labels)

    def live_labels(self, actor: str) -> LabelArray:
        """Every label the actor has, ascending."""
        return self._reads.live_labels(actor)

    def content_hashes(self, actor: str) -> dict[int, str]:
        """label -> content hash of each of the actor's memories."""
        return self._reads.content_hashes(actor)

    def texts_since(self, actor: str, rev: int) -> tuple[list[int], list[str]]:
        """(labels, texts) of the actor's memories written or re-worded after revision ``rev``."""
        return self._reads.texts_since(actor, rev)

    def max_rev(self, actor: str) -> int:
        """The actor's latest text revision (0 when it has none)."""
        return self._reads.max_rev(actor)

    def counts(self, actor: str) -> dict[str, int]:
        """How many memories of each type the actor has."""
        return self._reads.counts(actor)

    def actors(self) -> list[str]:
        """Every actor with at least one memory."""
        return self._reads.actors()

    def texts_at(self, actor: str) -> tuple[int, list[tuple[int, str, str, float]]]:
        """The actor's (label, text, type, created_at epoch) rows and the audit position they reflect."""
        return self._reads.texts_at(actor)

    def text_changes(self, actor: str, seq: int) -> list[tuple[int, int, str | None, str | None, float | None]]:
        """(audit seq, label, text now or None once deleted, type, created_at epoch) of every text
        change after ``seq``."""
        return self._reads.text_changes(actor, seq)

    # -- the journal (PgJournal) ---------------------------------------------------------------
    def audit_entries(
        self, actor: str | None = None, since: datetime | None = None, limit: int = 1000
    ) -> list[AuditEntry]:
        """Audit entries (of ``actor``, recorded at or after ``since``) in chain order."""
        return self._journal.audit_entries(actor, since, limit)

    def meta(self, key: str) -> str | None:
        """A store-wide setting (``store_meta``), e.g. an actor's active embedding model."""
        rows = self._db.rows("SELECT value FROM store_meta WHERE key = %s", [key])
        return str(rows[0][0]) if rows else None

    def set_meta(self, key: str, value: str, *, actor: str) -> None:
        """Set a store-wide setting in one audited transaction (op ``migration``)."""

        def body(conn: Any, audit: list[Any]) -> None:
            conn.execute(
                "INSERT INTO store_meta VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                [key, value],
            )
            audit.append((actor, "migration", f"meta:{key}", f"set:{value}", None))

        _, entries = self._db.write(body)
        self._listeners.publish(entries)

    def verify_audit(self) -> AuditReport:
        """Walk the whole chain (every actor: the chain is one per store)."""
        return self._journal.verify_audit()

    def record_injections(self, actor: str, turn: str, items: Sequence[tuple[str, str]]) -> None:
        """Remember which (uri, kind) a page injected for ``turn`` (re-recording is harmless)."""
        self._journal.record_injections(actor, turn, items)

    def injections(self, actor: str, turn: str) -> list[tuple[str, str]]:
        """The (uri, kind) pairs recorded for ``turn``."""
        return self._journal.injections(actor, turn)

    def claim_feedback(self, actor: str, turn: str, outcome: str) -> bool:
        """True the first time feedback for ``turn`` is recorded; False for an exact repeat."""
        return self._journal.claim_feedback(actor, turn, outcome)

    def review_add(self, actor: str, kind: str, payload: Mapping[str, Any]) -> str:
        """Queue an item for review; returns its id."""
        return self._journal.review_add(actor, kind, payload)

    def review_find(self, actor: str, kind: str, key: str, value: str) -> ReviewItem | None:
        """A pending item of ``kind`` whose payload[key] == value (avoids duplicate proposals)."""
        return self._journal.review_find(actor, kind, key, value)

    def review_list(self, actor: str, status: str | None = "pending") -> list[ReviewItem]:
        """The actor's review items with ``status`` (all of them when None), oldest first."""
        return self._journal.review_list(actor, status)

    def review_get(self, actor: str, review_id: str) -> ReviewItem:
        """One review item, or MemoryNotFound."""
        return self._journal.review_get(actor, review_id)

    def review_close(self, actor: str, review_id: str, status: str, result_uri: str | None) -> None:
        """Decide an item; its payload keeps no text."""
        self._journal.review_close(actor, review_id, status, result_uri)

    def review_accept(
        self, actor: str, review_id: str, item: NewMemory, deprecate: Deprecate | None = None
    ) -> PutResult:
        """Write ``item``, optionally deprecate another memory, and close the item: one transaction."""
        return self._journal.review_accept(actor, review_id, item, deprecate)

    def review_purge(self, actor: str, ids: Sequence[str] | None = None) -> int:
        """Delete the actor's review items (all of them when ``ids`` is None); returns how many."""
        return self._journal.review_purge(actor, ids)

    # -- models and the embedding queue (PgModels, PgEmbedQueue) ----------------------------------
    def ensure_model(self, model: str, dim: int | None = None) -> int | None:
        """Register ``model`` (queueing every memory for it) and, once its dim is known, index it."""
        return self._models.ensure_model(model, dim)

    def pending(self, actor: str, model: str, limit: int) -> list[PendingItem]:
        """Jobs for ``model``, claimed for this process for ``claim_seconds`` (its own claims repeat)."""
        return self._queue.pending(actor, model, limit)

    def pending_stats(self, actor: str, model: str) -> PendingStats:
        """How many of the actor's memories wait for a vector of ``model``, and since when."""
        return self._queue.pending_stats(actor, model)

    def record_embed_failure(self, model: str, labels: Sequence[int], error: str) -> None:
        """Count the failure and release the claim, so another process may try (with its backoff)."""
        self._queue.record_embed_failure(model, labels, error)

    def queued_labels(self, actor: str, model: str) -> list[int]:
        """Memories of ``actor`` without a vector of ``model`` yet (what the salience lane covers)."""
        return self._queue.queued_labels(actor, model)

    # -- vectors (PgVectors) ------------------------------------------------------------------------
    def put_vectors(
        self, model: str, labels: LabelArray, vectors: FloatMatrix, content_hashes: Sequence[str]
    ) -> LabelArray:
        """Store vectors for memories whose text is still the text that was embedded; returns those stored."""
        return self._vectors.put_vectors(model, labels, vectors, content_hashes)

    def vectors(self, actor: str, model: str) -> tuple[LabelArray, FloatMatrix]:
        """The actor's vectors of ``model``, by label."""
        return self._vectors.vectors(actor, model)

    def vectors_since(self, actor: str, model: str, seq: int) -> tuple[LabelArray, FloatMatrix]:
        """Vectors written after sequence ``seq``."""
        return self._vectors.vectors_since(actor, model, seq)

    def vector_state(self, actor: str, model: str) -> tuple[int, int]:
        """(count, max sequence) of this actor's vectors of ``model``."""
        return self._vectors.vector_state(actor, model)

    def vector_labels(self, actor: str, model: str) -> LabelArray:
        """Labels of the actor's memories that have a vector of ``model``."""
        return self._vectors.vector_labels(actor, model)

    def vector_models(self, actor: str) -> dict[str, int]:
        """model -> how many vectors of it the actor has."""
        return self._vectors.vector_models(actor)

    def drop_vectors(self, actor: str, model: str) -> int:
        """Delete the actor's vectors of ``model`` (retiring the model once nobody has any); returns how many."""
        return self._vectors.drop_vectors(actor, model)

    def search_vectors(self, actor: str, model: str, vector: FloatMatrix, k: int) -> list[tuple[int, float]]:
        """The actor's k nearest memories by cosine (best first; ties by label)."""
        return self._vectors.search_vectors(actor, model, vector, k)

    def search_with_queue(
        self, actor: str, model: str, vector: FloatMatrix, k: int
    ) -> tuple[list[tuple[int, float]], list[int]]:
        """``search_vectors`` and ``queued_labels`` read in one statement (one snapshot, one round trip)."""
        hits, queued, _ = self._vectors.search_with_queue(actor, model, vector, k)
        return hits, queued

    def search_with_latest(
        self, actor: str, model: str, vector: FloatMatrix, k: int
    ) -> tuple[list[tuple[int, float]], list[int], int | None]:
        """``search_with_queue`` and, in the same statement, the seq of the actor's latest text
        change (the last entry ``text_changes`` would return; 0 for none, None when not read)."""
        return self._vectors.search_with_queue(actor, model, vector, k, latest=True)

    def vector_scores(self, actor: str, model: str, vector: FloatMatrix, labels: Sequence[int]) -> dict[int, float]:
        """Cosine of ``vector`` with each labelled vector the actor has (labels without one are left out)."""
        return self._vectors.vector_scores(actor, model, vector, labels)

    def has_vector(self, actor: str, model: str, label: int) -> bool:
        """Whether the labelled memory has a vector of ``model``."""
        return self._vectors.has_vector(actor, model, label)

    # -- lanes and lifecycle ----------------------------------------------------------------
    def native_lanes(
        self, actor: str, embedder: Any, context: Any = None, context_types: tuple[Any, ...] = ()
    ) -> tuple[Any, Any]:
        """The pager's semantic lane (pgvector in this database) and lexical lane (BM25 fed from it,
        with ``context`` keys for memories of ``context_types``: index.episodes)."""
        from mempager.store.pg.lanes import PgLexicalLane, PgSemanticLane

        lexical = PgLexicalLane(self, actor, context, context_types)
        return PgSemanticLane(self, actor, embedder, feed=lexical), lexical

    def compact(self) -> None:
        """Rewrite the tables that held deleted memories' text and vectors, so their bytes are gone."""
        compact(self._db)

    def mark_erasure(self, actor: str) -> None:
        """Note durably, before a hard delete, that ``actor`` has bytes to erase (pg/compaction.py)."""
        self._listeners.publish(compaction.mark_erasure(self._db, actor))

    def erasure_marks(self) -> dict[str, str]:
        return compaction.erasure_marks_of(self._db)

    def clear_erasure(self, actor: str, token: str) -> bool:
        dropped, entries = compaction.clear_erasure(self._db, actor, token)
        self._listeners.publish(entries)
        return dropped

    def close(self) -> None:
        """Release this user's hold; the pool is closed when the last user lets go."""
        with _OPEN_LOCK:
            self._users -= 1
            if self._users > 0:
                return
            if self._key is not None and _OPEN.get(self._key) is self:
                del _OPEN[self._key]
        if self._closed:
            return
        self._closed = True
        self._db.close()


def open_pg_store(url: str, **options: Any) -> PostgresStore:
    """The process-wide store for ``url`` (and options): opened once, shared, closed by its last user.

    ``url`` is a libpq URL (``postgresql://user:password@host:5432/db``); ``?schema=name`` picks
    the PostgreSQL schema that holds the store (default ``mempager``). ``options`` are PgOptions
    fields (pool_max=, statement_timeout_ms=, ef_search=, ...); each may also be a URL parameter
    (``?schema=team&pool_max=16``), which is how the CLI and the MCP server are configured.
    """
    conninfo, parts, opts, secret = resolve(url, options)
    key = (conninfo, opts)
    with _OPEN_LOCK:
        store = _OPEN.get(key)
        if store is not None and not store.closed:
            store._users += 1
            return store
        store = PostgresStore(conninfo, parts, opts, describe(parts, opts.schema), secret)
        store._key = key
        _OPEN[key] = store
        return store
