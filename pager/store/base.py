"""Connection handling, error translation and row decoding shared by the DuckDB store's collaborators."""

from __future__ import annotations

import errno
import json
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

import duckdb

from mempager.errors import StoreError, StoreFull, StoreLocked
from mempager.store.audit import GENESIS, chain
from mempager.store.audit import insert as insert_audit
from mempager.types import AuditEntry, Memory, MemoryType, Scope, Source
from mempager.validate import make_uri

log = logging.getLogger("mempager.store")

MEMORY_COLUMNS = (
    "label, id, actor, scope, type, text, source, confidence, importance, strength, created_at, "
    "updated_at, last_accessed_at, access_count, tags, metadata, content_hash, superseded_by, "
    "valid_until"
)


def one_of(column: str, values: Sequence[Any]) -> tuple[str, Any]:
    """``column`` among ``values`` as a DuckDB condition and its parameter.

    One value is ``column = ?``: a plain filter (an index lookup where the column has one), where
    ``IN (SELECT unnest(?))`` plans a join against the table. On a 4k-memory store a forget's
    statements took 0.6-0.8 ms instead of 1.0-2.5 ms each this way; a forget is nearly always
    of one memory.
    """
    if len(values) == 1:
        return f"{column} = ?", values[0]
    return f"{column} IN (SELECT unnest(?))", list(values)


def naive_utc(value: datetime) -> datetime:
    """DuckDB TIMESTAMP columns hold naive UTC."""
    if value.tzinfo is None:
        return value
    if value.tzinfo is not timezone.utc:
        value = value.astimezone(timezone.utc)
    # date and time (time() drops the zone) make the value replace(tzinfo=None) makes, at a sixth of
    # its cost (0.09 us against 0.53 us): a bulk write calls this once or twice a memory
    return datetime.combine(value.date(), value.time())


def aware(value: datetime | None) -> datetime | None:
    return None if value is None else value.replace(tzinfo=timezone.utc)


def row_to_memory(row: tuple[Any, ...]) -> Memory:
    (
        label,
        mid,
        actor,
        scope,
        type_,
        text,
        source,
        confidence,
        importance,
        strength,
        created,
        updated,
        accessed,
        access_count,
        tags,
        metadata,
        chash,
        superseded,
        valid_until,
    ) = row
    mtype = MemoryType(type_)
    return Memory(
        label=int(label),
        id=mid,
        uri=make_uri(actor, mtype, mid),
        actor=actor,
        scope=Scope(scope),
        type=mtype,
        text=text,
        source=Source(source),
        confidence=float(confidence),
        importance=float(importance),
        strength=float(strength),
        created_at=created.replace(tzinfo=timezone.utc),
        updated_at=updated.replace(tzinfo=timezone.utc),
        last_accessed_at=accessed.replace(tzinfo=timezone.utc),
        access_count=int(access_count),
        tags=tuple(tags or ()),
        metadata=json.loads(metadata),
        content_hash=chash,
        superseded_by=superseded,
        valid_until=aware(valid_until),
    )


def translate(exc: Exception, location: str) -> StoreError:
    """One place where DuckDB's errors become ours."""
    text = str(exc)
    if "Could not set lock" in text or "Conflicting lock" in text:
        return StoreLocked(
            f"{location} is open for writing in another process ({text.split('held in')[-1].strip()}); "
            "close that process (or its Pager) first, or give this one its own store file"
        )
    no_space = isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
    markers = ("No space left on device", "ENOSPC", "File too large", "Disk quota exceeded")
    if no_space or any(m in text for m in markers):
        return StoreFull(
            f"the disk under {location} is full; free space and retry the write. "
            "Every write acknowledged before this one is kept"
        )
    return StoreError(f"store {location} failed: {text}")


def fsync_path(path: str | os.PathLike[str]) -> None:
    """fsync a file, or a directory (so a name created or moved in it is durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _Gate:
    """Many SQL readers at once, or one compaction swapping the file under them."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._exclusive = False

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            while self._exclusive:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            while self._exclusive or self._readers:
                self._cond.wait()
            self._exclusive = True
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()


# DuckDB's cap on its buffer pool and working memory. Its default is 80% of the machine's RAM, and it
# keeps the blocks that reads touched up to that cap; this process holds the store's hot data in its own
# mirror already. Above the cap DuckDB evicts cached blocks and spills large sorts and joins to disk.
MEMORY_LIMIT = "1GB"
# The write-ahead log's size at which a commit checkpoints. DuckDB's default (16 MiB) checkpointed
# every ~25k memories written, and each checkpoint rewrites the store's indexes whole: at 1M
# memories, bulk ingest ran at 12.6k/s instead of 20.5k/s. After a crash, opening replays the log:
# 0.38 s for 127 MB (200k memories) on the 1M store, so at most ~1 s at this size.
CHECKPOINT_AT = "256MiB"


class DuckDb:
    """Owns the DuckDB database object; one cursor per thread; writes serialised by one lock.

    Every collaborator of the DuckDB store (reads, writes, vectors, journal, mirrors) is given
    this object and nothing else of the store's state: it is the one place a cursor, a
    transaction or an audit entry comes from.
    """

    def __init__(self, path: str, read_only: bool = False, memory_limit: str = MEMORY_LIMIT) -> None:
        self._path = path
        self._read_only = read_only
        self._config: dict[str, str | bool | int | float | list[str]] = {
            "memory_limit": memory_limit,
            "checkpoint_threshold": CHECKPOINT_AT,
        }
        self._local = threading.local()
        self.write_lock = threading.RLock()
        self._gate = _Gate()
        self._generation = 0  # bumped when compaction reopens the file; stale cursors are replaced
        self._closed = False
        self._audit_tail: tuple[int, str] = (0, GENESIS)
        self._audit_pending: list[AuditEntry] = []
        self._audit_listeners: list[Callable[[AuditEntry], None]] = []
        try:
            self._db = duckdb.connect(path, read_only=read_only, config=self._config)
        except duckdb.Error as exc:
            raise translate(exc, path) from exc

    @property
    def location(self) -> str:
        return self._path

    def con(self) -> Any:
        if self._closed:
            raise StoreError(f"store {self._path} is closed; open it again with mempager.open()")
        held = getattr(self._local, "con", None)
        if held is None or held[0] != self._generation:
            held = (self._generation, self._db.cursor())
            self._local.con = held
        return held[1]

    def fetch(self, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        with self._gate.shared():
            try:
                return self.con().execute(sql, params or []).fetchall()  # type: ignore[no-any-return]
            except duckdb.Error as exc:
                raise translate(exc, self._path) from exc

    def release_cache(self) -> None:
        """Let DuckDB drop the blocks it cached for the reads so far (a bulk load's), keeping its cap:
        the cap is lowered for a moment (evicting what is not in use), then put back."""
        with self._gate.exclusive():
            con = self.con()
            try:
                con.execute("SET memory_limit = '16MB'")
            except duckdb.Error:  # more than that is in use: what could be evicted was
                pass
            finally:
                con.execute("SET memory_limit = ?", [self._config["memory_limit"]])

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Several reads under one hold of the gate (a compaction waits for them), errors translated.
        Take the cursor (``con()``) inside: a compaction before it replaces the connection."""
        with self._gate.shared():
            try:
                yield
            except duckdb.Error as exc:
                raise translate(exc, self._path) from exc

    def compact(self) -> None:
        """Rewrite the database file from its live rows, so nothing deleted survives in it.

        DuckDB leaves deleted rows' bytes in freed blocks (and in the WAL); copying the live
        database into a new file and swapping it in (atomically, fsynced) is the only way to
        really erase them. Writes wait for the whole pass (nothing may change between the copy
        and the swap); reads go on during the copy and wait only for the swap.
        """
        with self.write_lock:
            target = self._path + ".compact"
            for leftover in (target, target + ".wal"):
                if os.path.exists(leftover):
                    os.remove(leftover)
            with self._gate.shared():
                con = self.con()
                try:
                    name = con.execute("SELECT current_database()").fetchone()[0]
                    con.execute(f"ATTACH '{target}' AS mempager_compact")
                    try:
                        con.execute(f'COPY FROM DATABASE "{name}" TO mempager_compact')
                    finally:
                        con.execute("DETACH mempager_compact")
                except duckdb.Error as exc:
                    raise translate(exc, self._path) from exc
            fsync_path(target)
            with self._gate.exclusive():
                self._swap_in(target)

    def _swap_in(self, target: str) -> None:
        """Replace the store file with ``target`` and reopen; the caller holds every lock."""
        self._db.close()
        os.replace(target, self._path)
        if os.path.exists(self._path + ".wal"):
            os.remove(self._path + ".wal")
        fsync_path(os.path.dirname(os.path.abspath(self._path)))
        try:
            self._db = duckdb.connect(self._path, read_only=self._read_only, config=self._config)
        except duckdb.Error as exc:
            raise translate(exc, self._path) from exc
        self._generation += 1

    @contextmanager
    def tx(self) -> Iterator[Any]:
        """A write transaction; rolls back and re-raises the original error untouched."""
        with self.write_lock, self._gate.shared():
            con = self.con()
            try:
                con.execute("BEGIN TRANSACTION")
            except duckdb.Error as exc:
                raise translate(exc, self._path) from exc
            try:
                yield con
            except BaseException as exc:
                self._audit_pending.clear()
                try:
                    con.execute("ROLLBACK")
                except duckdb.Error as rollback_exc:
                    raise translate(rollback_exc, self._path) from exc
                if isinstance(exc, duckdb.Error):
                    raise translate(exc, self._path) from exc
                raise
            try:
                con.execute("COMMIT")
            except duckdb.Error as exc:
                self._audit_pending.clear()
                raise translate(exc, self._path) from exc
            self._publish_audit()

    def audit(self, con: Any, rows: Sequence[tuple[str, str, str, str]]) -> None:
        """Append (actor, op, uri, content_hash) entries inside the current transaction."""
        last = self._audit_pending[-1] if self._audit_pending else None
        tail = (last.seq, last.hash) if last else self._audit_tail
        entries = chain(tail, datetime.now(timezone.utc), rows)
        insert_audit(con, entries)
        self._audit_pending.extend(entries)

    def _publish_audit(self) -> None:
        entries, self._audit_pending = self._audit_pending, []
        if not entries:
            return
        self._audit_tail = (entries[-1].seq, entries[-1].hash)
        for listener in list(self._audit_listeners):
            for entry in entries:
                try:
                    listener(entry)
                except Exception:  # noqa: BLE001 - the write is durable; a broken listener must not undo it
                    log.exception("on_audit_event listener failed for audit entry %d", entry.seq)

    def add_audit_listener(self, listener: Callable[[AuditEntry], None]) -> None:
        self._audit_listeners.append(listener)

    def remove_audit_listener(self, listener: Callable[[AuditEntry], None]) -> None:
        if listener in self._audit_listeners:
            self._audit_listeners.remove(listener)

    def load_audit_tail(self) -> None:
        rows = self.fetch("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1")
        self._audit_tail = (int(rows[0][0]), rows[0][1]) if rows else (0, GENESIS)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        if self._closed:
            return
        with self.write_lock:
            self._closed = True
            try:
                self._db.close()
            except duckdb.Error as exc:
                raise translate(exc, self._path) from exc
