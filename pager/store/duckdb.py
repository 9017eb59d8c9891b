"""The DuckDB store: the embedded default and the only source of truth.

One file per store. Every write is one transaction, durable (DuckDB's WAL) when the call
returns. Reads never write. Memories of one actor are never returned for another.

``DuckDBStore`` is a facade over collaborators that share one ``DuckDb`` (connection, write
lock, audit chain) and nothing else:

    SqlReads  store/reads.py    exhaustive SQL reads and the references the mirror is tested against
    Mirrors   store/mirrors.py  the per-actor in-process mirrors (the hot read path) and change listeners
    Writes    store/writes.py   put (dedup), update, delete, touch, accepting a review item
    Vectors   store/vectors.py  vectors per model and the pending-embedding queue
    Journal   store/journal.py  page injections, feedback claims, the review queue, audit reads
    DuckConsolidation  store/consolidation.py  session wraps, continuity, pattern history, associations
    DuckTiers          store/tiers.py          the crystallized tier and spores
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import numpy.typing as npt

from mempager.errors import InvalidInput, StoreError, StoreLocked
from mempager.protocols import CandidateAsk, CandidateFacts, PendingItem, PendingStats, SalienceParams
from mempager.store import damage, erasure_marks
from mempager.store.base import DuckDb, translate
from mempager.store.consolidation import DuckConsolidation
from mempager.store.journal import Deprecate, Journal, ReviewItem
from mempager.store.migrations import migrate
from mempager.store.mirror import ActorTable
from mempager.store.mirrors import ChangeListener, Mirrors
from mempager.store.reads import SqlReads
from mempager.store.tiers import DuckTiers
from mempager.store.vectors import Vectors
from mempager.store.writes import Writes, dedup_key_of
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

__all__ = ["DuckDBStore", "dedup_key_of", "open_store"]

_OPEN: dict[str, DuckDBStore] = {}
_OPEN_LOCK = threading.Lock()


def open_store(path: str | Path) -> DuckDBStore:
    """The process-wide store for ``path``: opened once, shared, closed by its last user.

    One object per file matters: it owns the write lock and the in-process mirrors, and two
    objects on one file would each hold a mirror the other's writes never reach.
    """
    key = str(Path(path).resolve())
    with _OPEN_LOCK:
        store = _OPEN.get(key)
        if store is not None and not store.closed:
            store._users += 1
            return store
    return DuckDBStore(path)


class DuckDBStore:
    def __init__(self, path: str | Path, read_only: bool = False) -> None:
        path = Path(path)
        if not read_only:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"cannot create the store's directory {path.parent}: {exc.strerror or exc}; "
                    "pass a --store path in a directory you can write"
                ) from exc
        self._key = str(path.resolve())
        with _OPEN_LOCK:
            other = _OPEN.get(self._key)
            if other is not None and not other.closed:
                raise StoreLocked(
                    f"{path} is already open in this process; share it with mempager.store.duckdb.open_store() "
                    "or open more actors with mempager.open() on the same path"
                )
            if read_only:  # a reader changes no file: it only refuses what cannot be a store
                refused = damage.main_problem(path)
                if refused is not None:
                    raise refused
            else:  # refuses what cannot be a store; a damaged WAL tail is set aside (store/damage.py)
                damage.prepare(path)
            try:
                self.db = db = DuckDb(str(path), read_only=read_only)
            except StoreError as exc:
                typed = damage.explain(exc, path)
                if typed is None:
                    raise
                raise typed from exc
            _OPEN[self._key] = self
        self._users = 1
        self.reads = SqlReads(db)
        self.mirrors = Mirrors(db)
        self.vector_rows = Vectors(db)
        self.journal = Journal(db)
        self.writes = Writes(db, reads=self.reads, mirrors=self.mirrors, journal=self.journal)
        self.consolidation = DuckConsolidation(db, self.writes)  # a merge group writes memories in its transaction
        self.tiers = DuckTiers(db, self.journal)  # crystals and spores (store/tiers.py)
        try:
            if not read_only:
                with db.write_lock:
                    migrate(db.con(), db.location)
                    self._ensure_store_id()
            db.load_audit_tail()
            rows = db.fetch("SELECT value FROM store_meta WHERE key = 'store_id'")
        except (duckdb.Error, StoreError) as exc:
            self.close()  # a refused store must not stay open and registered
            typed = damage.explain(exc, path)  # a bad block met by the first reads
            if typed is not None:
                raise typed from exc
            if isinstance(exc, StoreError):
                raise
            raise translate(exc, db.location) from exc
        except BaseException:
            self.close()
            raise
        self.store_id: str = rows[0][0] if rows else ""

    def _ensure_store_id(self) -> None:
        with self.db.tx() as con:
            con.execute("INSERT INTO store_meta VALUES ('store_id', ?) ON CONFLICT DO NOTHING", [uuid.uuid4().hex])

    # -- lifecycle --------------------------------------------------------------------------
    @property
    def location(self) -> str:
        return self.db.location

    @property
    def closed(self) -> bool:
        return self.db.closed

    def close(self) -> None:
        """Release this user's hold; the file is closed when the last user lets go."""
        with _OPEN_LOCK:
            self._users -= 1
            if self._users > 0:
                return
            if _OPEN.get(self._key) is self:
                del _OPEN[self._key]
        self.db.close()

    def release_cache(self) -> None:
        """Let DuckDB drop the blocks cached for the reads so far (after opening: the lanes' loads)."""
        self.db.release_cache()

    def checkpoint(self) -> None:
        with self.db.write_lock:
            self.db.fetch("CHECKPOINT")

    def compact(self) -> None:
        """Rewrite the database file from its live rows, so nothing deleted survives in it."""
        self.db.compact()

    def meta(self, key: str) -> str | None:
        """A store-wide setting (``store_meta``), e.g. an actor's active embedding model."""
        rows = self.db.fetch("SELECT value FROM store_meta WHERE key = ?", [key])
        return str(rows[0][0]) if rows else None

    def set_meta(self, key: str, value: str, *, actor: str) -> None:
        """Set a store-wide setting in one audited transaction (op ``migration``)."""
        with self.db.write_lock, self.db.tx() as con:
            con.execute(
                "INSERT INTO store_meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [key, value],
            )
            self.db.audit(con, [(actor, "migration", f"meta:{key}", f"set:{value}")])

    # -- erasure marks (store/erasure_marks.py) ---------------------------------------------
    def mark_erasure(self, actor: str) -> None:
        """Note durably, before the delete it announces, that ``actor`` forgot memories whose
        bytes are still in files: an open after a crash finishes the erasure."""
        with self.db.write_lock, self.db.tx() as con:
            con.execute(
                "INSERT INTO store_meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [erasure_marks.key(actor), erasure_marks.token()],
            )

    def erasure_marks(self) -> dict[str, str]:
        """Actors with forgotten bytes not yet erased, each with the token of its latest forget."""
        rows = self.db.fetch("SELECT key, value FROM store_meta WHERE starts_with(key, ?)", [erasure_marks.PREFIX])
        return erasure_marks.by_actor(rows)

    def clear_erasure(self, actor: str, token: str) -> bool:
        """Drop ``actor``'s mark if it still holds ``token`` (no forget since), with an audit event."""
        with self.db.write_lock, self.db.tx() as con:
            gone = con.execute(
                "DELETE FROM store_meta WHERE key = ? AND value = ? RETURNING key", [erasure_marks.key(actor), token]
            ).fetchall()
            if gone:
                self.db.audit(con, [(actor, "erase", f"erasure:{actor}", token)])
        return bool(gone)

    # -- writes (Writes) ----------------------------------------------------------------------
    def put(self, item: NewMemory) -> PutResult:
        return self.writes.put_many([item])[0]

    def put_many(self, items: Sequence[NewMemory]) -> list[PutResult]:
        return self.writes.put_many(items)

    def update(self, actor: str, memory_id: str, op: str = "update", **changes: object) -> Memory:
        return self.writes.update(actor, memory_id, op, **changes)

    def delete(self, actor: str, memory_id: str) -> Memory | None:
        """Delete the memory and every vector made from it (bytes stay until ``compact``)."""
        gone = self.writes.delete_many(actor, [memory_id])
        return gone[0] if gone else None

    def delete_many(self, actor: str, memory_ids: Sequence[str]) -> list[Memory]:
        """Delete these memories of ``actor`` in one transaction; unknown ids are skipped."""
        return self.writes.delete_many(actor, memory_ids)

    def touch(self, actor: str, labels: Sequence[int], when: datetime) -> None:
        self.writes.touch(actor, labels, when)

    def review_accept(
        self, actor: str, review_id: str, item: NewMemory, deprecate: Deprecate | None = None
    ) -> PutResult:
        """Write ``item``, optionally deprecate another memory, and close the item: one transaction."""
        return self.writes.review_accept(actor, review_id, item, deprecate)

    # -- reads served by the mirror (Mirrors) -------------------------------------------------
    def table(self, actor: str) -> ActorTable:
        """The actor's in-process mirror, loaded from the file on first use."""
        return self.mirrors.table(actor)

    def add_change_listener(self, actor: str, listener: ChangeListener) -> None:
        """``listener(upserted, removed_labels)`` after every committed change to ``actor``'s memories."""
        self.mirrors.add_listener(actor, listener)

    def remove_change_listener(self, actor: str, listener: ChangeListener) -> None:
        self.mirrors.remove_listener(actor, listener)

    def salience(
        self,
        actor: str,
        types: Sequence[MemoryType],
        params: SalienceParams,
        limit: int,
        only: Sequence[int] | None = None,
    ) -> list[tuple[int, float]]:
        """Salience ranking over the actor's current memories (or just ``only`` labels)."""
        return self.table(actor).salience(types, params, limit, only)

    def candidate_facts(self, actor: str, ask: CandidateAsk) -> CandidateFacts:
        """``salience`` and stored-vector cosines, one call each: in process, asking together saves
        nothing (and the pager's semantic lane scores from its own index: ``lanes.candidates``)."""
        if ask.prior and ask.params is None:
            raise InvalidInput("a CandidateAsk with prior labels needs the salience params")
        prior = [] if ask.params is None else self.salience(actor, ask.types, ask.params, len(ask.prior), ask.prior)
        scores = {} if ask.vector is None else self.vector_rows.scores(actor, ask.model, ask.vector, ask.cosine)
        return CandidateFacts(prior, scores)

    def get(self, actor: str, memory_id: str) -> Memory | None:
        table = self.table(actor)
        label = table.label_of(memory_id)
        return None if label is None else table.get(label)

    def get_many(self, actor: str, labels: Sequence[int]) -> dict[int, Memory]:
        return self.table(actor).get_many(labels)

    def uris(self, actor: str, labels: Sequence[int]) -> dict[int, str]:
        return self.table(actor).uris(labels)

    def of_types(
        self, actor: str, types: Sequence[MemoryType], order: str = "newest", limit: int = 1_000_000
    ) -> list[Memory]:
        """The actor's memories of ``types``, newest (or oldest) first, from the in-process mirror."""
        if order not in ("newest", "oldest"):
            raise InvalidInput(f"order must be 'newest' or 'oldest', got {order!r}")
        return self.table(actor).of_types(types, order == "newest", limit)

    def created_of_types(self, actor: str, types: Sequence[MemoryType]) -> tuple[LabelArray, Any]:
        """(labels, created_at epoch seconds) of the actor's live memories of ``types`` (the mirror's
        columns: the lexical lane places a million memories in their episodes without building them)."""
        return self.table(actor).created_of_types(types)

    def created_between(self, actor: str, since: float, until: float, limit: int) -> LabelArray:
        """Labels of the actor's live memories created in [since, until) (epoch s), newest first."""
        return self.table(actor).created_between(since, until, limit)

    def created_of(self, actor: str, labels: Sequence[int]) -> Any:
        """The creation time (epoch seconds) of each of the actor's labels; NaN where none."""
        return self.table(actor).created_of(labels)

    def created_span(self, actor: str) -> tuple[float, float] | None:
        """The oldest and newest creation time (epoch seconds) of the actor's live memories."""
        return self.table(actor).created_span()

    def live_labels(self, actor: str) -> LabelArray:
        return self.table(actor).live_labels()

    def content_hashes(self, actor: str) -> dict[int, str]:
        return self.table(actor).content_hashes()

    def content_digests_of(self, actor: str, labels: LabelArray) -> npt.NDArray[np.int64]:
        """``validate.content_digest`` of each label's content hash (-1 where it is not a live memory)."""
        return self.table(actor).digests_of(labels)

    # -- reads answered by SQL (SqlReads) -----------------------------------------------------
    def find(self, actor: str, type_: MemoryType, dedup_key: str) -> Memory | None:
        return self.reads.find(actor, type_, dedup_key)

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
        return self.reads.query(
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

    def sql_salience(
        self, actor: str, types: Sequence[MemoryType], params: SalienceParams, limit: int
    ) -> list[tuple[int, float]]:
        return self.reads.sql_salience(actor, types, params, limit)

    def counts(self, actor: str) -> dict[str, int]:
        return self.reads.counts(actor)

    def actors(self) -> list[str]:
        return self.reads.actors()

    def texts_since(self, actor: str, rev: int) -> tuple[list[int], list[str]]:
        """(labels, texts) of the actor's memories written or re-worded after revision ``rev``."""
        return self.reads.texts_since(actor, rev)

    def max_rev(self, actor: str) -> int:
        return self.reads.max_rev(actor)

    # -- vectors and the embedding queue (Vectors) --------------------------------------------
    def put_vectors(
        self, model: str, labels: LabelArray, vectors: FloatMatrix, content_hashes: Sequence[str]
    ) -> LabelArray:
        return self.vector_rows.put_vectors(model, labels, vectors, content_hashes)

    def vectors(self, actor: str, model: str) -> tuple[LabelArray, FloatMatrix]:
        return self.vector_rows.vectors(actor, model)

    def vectors_since(self, actor: str, model: str, seq: int) -> tuple[LabelArray, FloatMatrix]:
        return self.vector_rows.vectors_since(actor, model, seq)

    def vector_state(self, actor: str, model: str) -> tuple[int, int]:
        return self.vector_rows.vector_state(actor, model)

    def vector_labels(self, actor: str, model: str) -> LabelArray:
        return self.vector_rows.vector_labels(actor, model)

    def vector_models(self, actor: str) -> dict[str, int]:
        return self.vector_rows.vector_models(actor)

    def drop_vectors(self, actor: str, model: str) -> int:
        return self.vector_rows.drop_vectors(actor, model)

    def pending(self, actor: str, model: str, limit: int) -> list[PendingItem]:
        return self.vector_rows.pending(actor, model, limit)

    def pending_stats(self, actor: str, model: str) -> PendingStats:
        return self.vector_rows.pending_stats(actor, model)

    def record_embed_failure(self, model: str, labels: Sequence[int], error: str) -> None:
        self.vector_rows.record_embed_failure(model, labels, error)

    # -- journal: injections, feedback, review queue, audit (Journal) -------------------------
    def record_injections(self, actor: str, turn: str, items: Sequence[tuple[str, str]]) -> None:
        self.journal.record_injections(actor, turn, items)

    def injections(self, actor: str, turn: str) -> list[tuple[str, str]]:
        return self.journal.injections(actor, turn)

    def claim_feedback(self, actor: str, turn: str, outcome: str) -> bool:
        return self.journal.claim_feedback(actor, turn, outcome)

    def review_add(self, actor: str, kind: str, payload: Mapping[str, Any]) -> str:
        return self.journal.review_add(actor, kind, payload)

    def review_find(self, actor: str, kind: str, key: str, value: str) -> ReviewItem | None:
        return self.journal.review_find(actor, kind, key, value)

    def review_list(self, actor: str, status: str | None = "pending") -> list[ReviewItem]:
        return self.journal.review_list(actor, status)

    def review_get(self, actor: str, review_id: str) -> ReviewItem:
        return self.journal.review_get(actor, review_id)

    def review_close(self, actor: str, review_id: str, status: str, result_uri: str | None) -> None:
        self.journal.review_close(actor, review_id, status, result_uri)

    def review_purge(self, actor: str, ids: Sequence[str] | None = None) -> int:
        return self.journal.review_purge(actor, ids)

    def audit_entries(
        self, actor: str | None = None, since: datetime | None = None, limit: int = 1000
    ) -> list[AuditEntry]:
        return self.journal.audit_entries(actor, since, limit)

    def verify_audit(self) -> AuditReport:
        return self.journal.verify_audit()

    def add_audit_listener(self, listener: Callable[[AuditEntry], None]) -> None:
        self.db.add_audit_listener(listener)

    def remove_audit_listener(self, listener: Callable[[AuditEntry], None]) -> None:
        self.db.remove_audit_listener(listener)
