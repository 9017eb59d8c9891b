"""The PostgreSQL store: the Store protocol for many processes and hosts sharing one memory.

Every write is one transaction, durable (the server's WAL) and visible to every other process
when the call returns. Dedup is the UNIQUE (actor, type, dedup_key) constraint with
``INSERT ... ON CONFLICT DO UPDATE``: concurrent writers of the same words reinforce one memory
instead of racing to insert two. Nothing is cached in the process except what the lanes derive.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import threading
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any

import psycopg
from psycopg import errors as pg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from mempager.errors import ConfigError, InvalidInput, MemoryNotFound, StoreError
from mempager.store.duckdb import dedup_key_of
from mempager.store.pg.db import AuditRow, Conn, Db
from mempager.store.pg.errors import reject_nul
from mempager.store.pg.journal import JournalMixin
from mempager.store.pg.options import PgOptions, describe, password_of, scrub, split_options, typed_options
from mempager.store.pg.reads import ReadsMixin
from mempager.store.pg.rows import MEMORY_COLUMNS, row_to_memory, utc
from mempager.store.pg.rows import maybe_utc as _maybe_utc
from mempager.store.pg.upsert import BUMP, UPSERT, Key, plan
from mempager.store.pg.vectors import VectorsMixin
from mempager.types import Memory, NewMemory, PutResult, Source
from mempager.validate import content_hash

log = logging.getLogger("mempager.pgstore")
ChangeListener = Callable[[Sequence[Memory], Sequence[int]], None]
_UPDATABLE = frozenset(
    {
        "text",
        "strength",
        "confidence",
        "importance",
        "metadata",
        "tags",
        "superseded_by",
        "valid_until",
        "dedup_key",
        "access_count",
        "last_accessed_at",
        "source",
    }
)
_OPEN: dict[tuple[str, PgOptions], PostgresStore] = {}
_OPEN_LOCK = threading.Lock()


class PostgresStore(JournalMixin, ReadsMixin, VectorsMixin):
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
        self._listen_lock = threading.RLock()
        self._change_listeners: dict[str, list[ChangeListener]] = {}
        self._audit_listeners: list[Callable[[Any], None]] = []
        self._dims: dict[str, int] = {}
        self._dims_lock = threading.Lock()
        self._grown, self._analyzed_rows = 0, 0
        self._key: tuple[str, PgOptions] | None = None  # set when shared through open_pg_store

    def __repr__(self) -> str:
        return f"PostgresStore({self._location!r})"

    @property
    def location(self) -> str:
        """The password-free URL of the store: postgresql://user@host:port/db?schema=name."""
        return self._location

    @property
    def closed(self) -> bool:
        return self._closed

    # -- writes ---------------------------------------------------------------------------
    def put(self, item: NewMemory) -> PutResult:
        return self.put_many([item])[0]

    def put_many(self, items: Sequence[NewMemory]) -> list[PutResult]:
        """All or nothing, in one transaction; repeats (in the batch or the store) reinforce."""
        if not items:
            return []
        keys, payload = self._put_args(items)
        results, entries = self._db.write(lambda conn, audit: self._put_tx(conn, audit, items, keys, payload))
        self._after(entries, _unique([r.memory for r in results]))
        return results

    @staticmethod
    def _put_args(items: Sequence[NewMemory]) -> tuple[list[str], dict[str, list[str]]]:
        """Dedup keys and serialised fields, built once outside the retry loop: a retried body must
        send the same thing."""
        for item in items:
            reject_nul("text", [item.text])
            reject_nul("tags", list(item.tags))
        keys = [dedup_key_of(it) for it in items]
        return keys, {
            "metadata": [json.dumps(dict(it.metadata), sort_keys=True) for it in items],
            "tags": [json.dumps(list(it.tags)) for it in items],
        }

    def _put_tx(
        self,
        conn: Conn,
        audit: list[AuditRow],
        items: Sequence[NewMemory],
        keys: list[str],
        payload: dict[str, list[str]],
    ) -> list[PutResult]:
        now = datetime.now(timezone.utc)
        firsts, rounds = plan(items, keys)
        order = list(firsts.values())
        ids = [secrets.token_hex(8) for _ in order]
        params: dict[str, Any] = {
            "n": len(order),
            "now": now,
            "id": ids,
            "actor": [items[i].actor for i in order],
            "scope": [items[i].scope.value for i in order],
            "type": [items[i].type.value for i in order],
            "text": [items[i].text for i in order],
            "source": [items[i].source.value for i in order],
            "confidence": [float(items[i].confidence) for i in order],
            "importance": [float(items[i].importance) for i in order],
            "strength": [float(items[i].strength) for i in order],
            "created": [_maybe_utc(items[i].created_at) for i in order],
            "tags": [payload["tags"][i] for i in order],
            "metadata": [payload["metadata"][i] for i in order],
            "chash": [content_hash(items[i].text) for i in order],
            "dkey": [keys[i] for i in order],
        }
        final: dict[Key, Memory] = {}
        fresh = set(ids)
        created: set[Key] = set()
        for row in conn.execute(UPSERT, params).fetchall():
            memory = row_to_memory(row)
            k = (memory.actor, memory.type.value, row[19])
            final[k] = memory
            if memory.id in fresh:
                created.add(k)
        for repeat in rounds:
            bump = {
                "now": now,
                "actor": [items[i].actor for i in repeat],
                "type": [items[i].type.value for i in repeat],
                "dkey": [keys[i] for i in repeat],
                "importance": [float(items[i].importance) for i in repeat],
                "confidence": [float(items[i].confidence) for i in repeat],
            }
            for row in conn.execute(BUMP, bump).fetchall():
                memory = row_to_memory(row)
                final[(memory.actor, memory.type.value, row[19])] = memory
        results = []
        for i, (item, key) in enumerate(zip(items, keys, strict=True)):
            k = (item.actor, item.type.value, key)
            results.append(PutResult(memory=final[k], created=firsts[k] == i and k in created))
        audit.extend(
            (
                r.memory.actor,
                "remember" if r.created else "reinforce",
                r.memory.uri,
                r.memory.content_hash,
                r.memory.label,
            )
            for r in results
        )
        return results

    def update(self, actor: str, memory_id: str, op: str = "update", **changes: object) -> Memory:
        got, entries = self._db.write(lambda conn, audit: self._update_tx(conn, audit, actor, memory_id, op, changes))
        self._after(entries, [got])
        return got

    def _update_tx(
        self, conn: Conn, audit: list[AuditRow], actor: str, memory_id: str, op: str, changes: dict[str, object]
    ) -> Memory:
        """The update inside an open transaction; the caller tells the listeners after commit."""
        unknown = set(changes) - _UPDATABLE
        if unknown:
            raise InvalidInput(f"cannot update {sorted(unknown)}; updatable fields: {sorted(_UPDATABLE)}")
        sets: list[sql.Composable] = [sql.SQL("updated_at = %s")]
        params: list[Any] = [datetime.now(timezone.utc)]
        for name, value in changes.items():
            sets.append(sql.SQL("{} = %s").format(sql.Identifier(name)))
            params.append(_column_value(name, value))
        if "text" in changes:
            sets += [sql.SQL("content_hash = %s"), sql.SQL("rev = nextval('memory_rev_seq')")]
            params.append(content_hash(str(changes["text"])))
        query = sql.SQL("UPDATE memories SET {} WHERE actor = %s AND id = %s RETURNING {}").format(
            sql.SQL(", ").join(sets), sql.SQL(MEMORY_COLUMNS)
        )
        before = None
        if "text" in changes:
            before = conn.execute(
                "SELECT content_hash FROM memories WHERE actor = %s AND id = %s FOR UPDATE", [actor, memory_id]
            ).fetchone()
        try:
            row = conn.execute(query, [*params, actor, memory_id]).fetchone()
        except pg.UniqueViolation as exc:
            raise InvalidInput(f"another {actor!r} memory of this type already has that dedup_key") from exc
        if row is None:
            raise MemoryNotFound(f"no memory {memory_id!r} for actor {actor!r}")
        got = row_to_memory(row)
        if before is not None and before[0] != got.content_hash:  # old vectors describe text that is gone
            self._requeue(conn, [got.label], got.actor)
        audit.append((actor, op, got.uri, got.content_hash, got.label))
        return got

    def delete(self, actor: str, memory_id: str) -> Memory | None:
        """Delete the memory and every vector made from it (bytes stay until ``compact``)."""
        gone = self.delete_many(actor, [memory_id])
        return gone[0] if gone else None

    def delete_many(self, actor: str, memory_ids: Sequence[str]) -> list[Memory]:
        """Delete these memories of ``actor`` in one transaction; unknown ids are skipped."""
        if not memory_ids:
            return []

        def body(conn: Conn, audit: list[AuditRow]) -> list[Memory]:
            rows = conn.execute(
                f"DELETE FROM memories WHERE actor = %s AND id = ANY(%s) RETURNING {MEMORY_COLUMNS}",
                [actor, list(memory_ids)],
            ).fetchall()  # vectors and queued jobs go with them (ON DELETE CASCADE)
            gone = sorted((row_to_memory(r) for r in rows), key=lambda m: m.label)
            audit.extend((actor, "forget", m.uri, m.content_hash, m.label) for m in gone)
            self._forget_journal(conn, audit, actor, gone)  # queued text and injection records go with them
            return gone

        gone, entries = self._db.write(body)
        if gone:
            self._after(entries, [], [m.label for m in gone], actor)
        return gone

    def touch(self, actor: str, labels: Sequence[int], when: datetime) -> None:
        if not len(labels):
            return

        def body(conn: Conn, audit: list[AuditRow]) -> list[Memory]:
            rows = conn.execute(
                "UPDATE memories SET access_count = access_count + 1, last_accessed_at = %s"
                f" WHERE actor = %s AND label = ANY(%s) RETURNING {MEMORY_COLUMNS}",
                [utc(when), actor, [int(x) for x in labels]],
            ).fetchall()
            return [row_to_memory(r) for r in rows]

        touched, entries = self._db.write(body)
        self._after(entries, touched)

    def compact(self) -> None:
        """Rewrite the tables that held deleted memories' text and vectors, so their bytes are gone.

        VACUUM FULL writes fresh table and index files from the live rows and drops the old ones
        (it locks each table while it runs). A CHECKPOINT follows when the role may run one, so the
        write-ahead log holding the old rows can be recycled; WAL archives and replicas are the
        server operator's to manage.
        """
        tables = ("memories", "vectors", "embed_queue", "review_queue", "injections", "feedback_log")
        self._db.maintenance([sql.SQL("VACUUM (FULL, ANALYZE) {}").format(sql.Identifier(t)) for t in tables])
        self._checkpoint()

    # -- listeners ------------------------------------------------------------------------
    def _after(
        self, entries: Sequence[Any], changed: Sequence[Memory], removed: Sequence[int] = (), actor: str = ""
    ) -> None:
        """Tell this process's listeners about a committed change (other processes poll the audit)."""
        with self._listen_lock:
            by_actor: dict[str, list[Memory]] = {}
            for memory in changed:
                by_actor.setdefault(memory.actor, []).append(memory)
            if removed:
                by_actor.setdefault(actor, [])
            for who, memories in by_actor.items():
                for listener in list(self._change_listeners.get(who, ())):
                    listener(memories, removed if who == actor else ())
        self._publish(entries)

    def add_change_listener(self, actor: str, listener: ChangeListener) -> None:
        """``listener(upserted, removed_labels)`` after every change this process commits for ``actor``."""
        with self._listen_lock:
            self._change_listeners.setdefault(actor, []).append(listener)

    def remove_change_listener(self, actor: str, listener: ChangeListener) -> None:
        with self._listen_lock:
            listeners = self._change_listeners.get(actor, [])
            if listener in listeners:
                listeners.remove(listener)

    # -- lanes and lifecycle ----------------------------------------------------------------
    def native_lanes(self, actor: str, embedder: Any) -> tuple[Any, Any]:
        """The pager's semantic lane (pgvector in this database) and lexical lane (BM25 fed from it)."""
        from mempager.store.pg.lanes import PgLexicalLane, PgSemanticLane

        return PgSemanticLane(self, actor, embedder), PgLexicalLane(self, actor)

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

    def _checkpoint(self) -> None:
        try:
            self._db.maintenance(["CHECKPOINT"])
        except StoreError as exc:
            if not isinstance(exc.__cause__, pg.InsufficientPrivilege):
                raise
            log.info(
                "compacted %s; this role may not CHECKPOINT, so old WAL segments are recycled at the "
                "server's next checkpoint",
                self._location,
            )


def open_pg_store(url: str, **options: Any) -> PostgresStore:
    """The process-wide store for ``url`` (and options): opened once, shared, closed by its last user.

    ``url`` is a libpq URL (``postgresql://user:password@host:5432/db``); ``?schema=name`` picks
    the PostgreSQL schema that holds the store (default ``mempager``). ``options`` are PgOptions
    fields (pool_max=, statement_timeout_ms=, ef_search=, ...); each may also be a URL parameter
    (``?schema=team&pool_max=16``), which is how the CLI and the MCP server are configured.
    """
    conninfo, in_url = split_options(url)
    secret = password_of(conninfo)
    unknown = set(options) - PgOptions.names()
    if unknown:
        raise ConfigError(f"unknown PostgreSQL store options {sorted(unknown)}; known: {sorted(PgOptions.names())}")
    for name, value in typed_options(in_url).items():
        if options.setdefault(name, value) != value:
            raise ConfigError(f"{name} given twice: {value!r} in the URL and {options[name]!r} as an option")
    opts = PgOptions(**options)
    try:
        parts = {k: str(v) for k, v in conninfo_to_dict(conninfo).items()}
    except psycopg.Error as exc:
        # not chained: the parser's message quotes the URL, password included
        raise ConfigError(
            f"the PostgreSQL URL could not be parsed ({scrub(str(exc), secret)}); expected "
            "postgresql://user:password@host:5432/dbname?schema=name"
        ) from None
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


def _unique(memories: Sequence[Memory]) -> list[Memory]:
    return list({m.label: m for m in memories}.values())


def _column_value(name: str, value: object) -> object:
    """A changed field as the column stores it."""
    if name == "metadata":
        return json.dumps(dict(value), sort_keys=True)  # type: ignore[call-overload]
    if name == "tags":
        tags = [str(t) for t in value]  # type: ignore[attr-defined]
        reject_nul("tags", tags)
        return tags
    if name == "text":
        reject_nul("text", [str(value)])
    if name == "source" and isinstance(value, Source):
        return value.value
    if isinstance(value, datetime):
        return utc(value)
    return value
