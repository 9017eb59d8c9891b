"""The DuckDB store: the embedded default and the only source of truth.

One file per store. Every write is one transaction, durable (DuckDB's WAL) when the call
returns. Reads never write. Memories of one actor are never returned for another.
"""

from __future__ import annotations

import json
import secrets
import threading
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from mempager.errors import InvalidInput, MemoryNotFound, StoreError, StoreLocked
from mempager.protocols import SalienceParams
from mempager.store.base import MEMORY_COLUMNS, DuckBase, naive_utc, row_to_memory, translate
from mempager.store.journal import JournalMixin
from mempager.store.migrations import migrate
from mempager.store.mirror import ActorTable
from mempager.store.reads import SqlReadsMixin
from mempager.store.vectors import VectorsMixin
from mempager.types import LabelArray, Memory, MemoryType, NewMemory, PutResult, Source
from mempager.validate import content_hash, make_uri, normalize, to_utc

_UPDATABLE = {
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


_NEXTVAL = "SELECT nextval('memory_{}_seq') FROM range(?)"


def dedup_key_of(item: NewMemory) -> str:
    if item.dedup_key is not None:
        return item.dedup_key
    key = normalize(item.text)
    if item.type is MemoryType.EVENT and item.created_at is not None:
        # The same words said at two different times are two events, not one.
        key = f"{key}\x1f{naive_utc(item.created_at).isoformat()}"
    return content_hash(key)


def _object_array(values: Sequence[Any]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    for i, value in enumerate(values):
        out[i] = value
    return out


ChangeListener = Callable[[Sequence[Memory], Sequence[int]], None]
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


class DuckDBStore(JournalMixin, SqlReadsMixin, VectorsMixin, DuckBase):
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
                    f"{path} is already open in this process; share it with pager.store.open_store() "
                    "or open more actors with mempager.open() on the same path"
                )
            super().__init__(str(path), read_only=read_only)
            _OPEN[self._key] = self
        self._users = 1
        self._tables: dict[str, ActorTable] = {}
        self._change_listeners: dict[str, list[ChangeListener]] = {}
        try:
            if not read_only:
                with self._write_lock:
                    migrate(self._con(), self._path)
                    self._ensure_store_id()
            self._load_audit_tail()
            rows = self._fetch("SELECT value FROM store_meta WHERE key = 'store_id'")
        except duckdb.Error as exc:
            self.close()  # a refused store must not stay open and registered
            raise translate(exc, self._path) from exc
        except BaseException:
            self.close()
            raise
        self.store_id: str = rows[0][0] if rows else ""

    def _ensure_store_id(self) -> None:
        with self._tx() as con:
            con.execute("INSERT INTO store_meta VALUES ('store_id', ?) ON CONFLICT DO NOTHING", [uuid.uuid4().hex])

    # -- writes ---------------------------------------------------------------------------
    def put(self, item: NewMemory) -> PutResult:
        return self.put_many([item])[0]

    def put_many(self, items: Sequence[NewMemory]) -> list[PutResult]:
        if not items:
            return []
        with self._write_lock:
            results = self._put_many(items)
            self._mirror([r.memory for r in results])
            return results

    def _put_many(
        self, items: Sequence[NewMemory], then: Callable[[Any, list[PutResult]], None] | None = None
    ) -> list[PutResult]:
        """The write itself (write lock held); ``then(con, results)`` runs in the same transaction."""
        now = naive_utc(datetime.now(timezone.utc))
        keys = [dedup_key_of(it) for it in items]
        # (actor, type, dedup key) of each item, built once: the batch path is per-item Python
        where = [(it.actor, it.type._value_, key) for it, key in zip(items, keys, strict=True)]
        with self._tx() as con:
            slot: dict[tuple[str, str, str], int] = self._existing(con, items, keys)  # dedup key -> label
            fresh: list[int] = []
            for i, at in enumerate(where):
                if at not in slot:
                    slot[at] = -1 - i  # placeholder until inserted
                    fresh.append(i)
            fresh_set = set(fresh)
            ids = [secrets.token_hex(8) for _ in fresh]
            bumps = [(items[i], keys[i]) for i in range(len(items)) if i not in fresh_set]
            new = [items[i] for i in fresh]
            # serialised and hashed once: the row and the returned Memory share them
            metas = [json.dumps(dict(it.metadata), sort_keys=True) if it.metadata else "{}" for it in new]
            hashes = [content_hash(it.text) for it in new]
            labels = self._insert(con, new, [keys[i] for i in fresh], ids, now, metas, hashes)
            stamp = now.replace(tzinfo=timezone.utc)
            loaded = {
                labels[j]: self._as_memory(new[j], labels[j], ids[j], stamp, metas[j], hashes[j])
                for j in range(len(new))
            }
            for j, i in enumerate(fresh):
                slot[where[i]] = labels[j]
            if bumps:
                self._bump(con, bumps, now)
                for actor in {it.actor for it, _ in bumps}:  # read back what the bumps changed
                    changed = [slot[where[i]] for i in range(len(items)) if i not in fresh_set and where[i][0] == actor]
                    loaded.update(self._sql_get_many(actor, changed))
            results = [PutResult(memory=loaded[slot[at]], created=i in fresh_set) for i, at in enumerate(where)]
            self._audit(
                con,
                [
                    (r.memory.actor, "remember" if r.created else "reinforce", r.memory.uri, r.memory.content_hash)
                    for r in results
                ],
            )
            if then is not None:
                then(con, results)
        return results

    @staticmethod
    def _as_memory(item: NewMemory, label: int, mid: str, stamp: datetime, meta: str, chash: str) -> Memory:
        """The Memory a read of the freshly inserted row returns (``stamp``: the write's aware UTC time)."""
        created = to_utc(item.created_at) if item.created_at else stamp
        return Memory(
            label,
            mid,
            make_uri(item.actor, item.type, mid),
            item.actor,
            item.scope,
            item.type,
            item.text,
            item.source,
            float(item.confidence),
            float(item.importance),
            float(item.strength),
            created,
            stamp,
            stamp,
            0,
            tuple(item.tags),
            json.loads(meta) if meta != "{}" else {},  # exactly what a read of the row returns
            chash,
        )

    def _existing(self, con: Any, items: Sequence[NewMemory], keys: list[str]) -> dict[tuple[str, str, str], int]:
        if len(items) == 1:  # a point lookup uses the dedup index; a join would scan
            it = items[0]
            rows = con.execute(
                "SELECT min(label) FROM memories WHERE dedup_key = ? AND actor = ? AND type = ?",
                [keys[0], it.actor, it.type.value],
            ).fetchall()
            found = rows[0][0]
            return {} if found is None else {(it.actor, it.type.value, keys[0]): int(found)}
        batch = {  # noqa: F841 - read by DuckDB's replacement scan
            "actor": np.array([it.actor for it in items], dtype=object),
            "type": np.array([it.type._value_ for it in items], dtype=object),
            "dedup_key": np.array(keys, dtype=object),
        }
        rows = con.execute(
            "SELECT m.actor, m.type, m.dedup_key, min(m.label) FROM memories m "
            "JOIN (SELECT DISTINCT * FROM batch) b "
            "ON m.actor = b.actor AND m.type = b.type AND m.dedup_key = b.dedup_key "
            "GROUP BY ALL"
        ).fetchall()
        return {(a, t, k): int(lab) for a, t, k, lab in rows}

    def _insert(
        self,
        con: Any,
        items: list[NewMemory],
        keys: list[str],
        ids: list[str],
        now: datetime,
        metas: list[str],
        hashes: list[str],
    ) -> list[int]:
        if not items:
            return []
        if len(items) == 1:
            return [self._insert_one(con, items[0], keys[0], ids[0], now, metas[0], hashes[0])]
        n = len(items)
        labels = [int(r[0]) for r in con.execute(_NEXTVAL.format("label"), [n]).fetchall()]
        revs = [int(r[0]) for r in con.execute(_NEXTVAL.format("rev"), [n]).fetchall()]
        created = [naive_utc(it.created_at) if it.created_at else now for it in items]
        batch = {  # noqa: F841 - read by DuckDB's replacement scan
            "label": np.array(labels, dtype=np.int64),
            "id": np.array(ids, dtype=object),
            "actor": np.array([it.actor for it in items], dtype=object),
            "scope": np.array([it.scope._value_ for it in items], dtype=object),
            "type": np.array([it.type._value_ for it in items], dtype=object),
            "text": np.array([it.text for it in items], dtype=object),
            "source": np.array([it.source._value_ for it in items], dtype=object),
            "confidence": np.array([it.confidence for it in items], dtype=np.float64),
            "importance": np.array([it.importance for it in items], dtype=np.float64),
            "strength": np.array([it.strength for it in items], dtype=np.float64),
            "created_at": np.array(created, dtype="datetime64[us]"),
            "tags": _object_array([list(it.tags) for it in items]),
            "metadata": np.array(metas, dtype=object),
            "content_hash": np.array(hashes, dtype=object),
            "dedup_key": np.array(keys, dtype=object),
            "rev": np.array(revs, dtype=np.int64),
        }
        con.execute(
            "INSERT INTO memories (label, id, actor, scope, type, text, source, confidence, importance,"
            " strength, created_at, updated_at, last_accessed_at, written_at, access_count, tags,"
            " metadata, content_hash, dedup_key, superseded_by, valid_until, rev) "
            "SELECT label, id, actor, scope, type, text, source, confidence, importance, strength,"
            " created_at, ?, ?, ?, 0, tags, metadata, content_hash, dedup_key, NULL, NULL, rev FROM batch",
            [now, now, now],
        )
        return labels

    def _insert_one(self, con: Any, it: NewMemory, key: str, mid: str, now: datetime, meta: str, chash: str) -> int:
        row = con.execute(
            "INSERT INTO memories (label, id, actor, scope, type, text, source, confidence, importance,"
            " strength, created_at, updated_at, last_accessed_at, written_at, access_count, tags,"
            " metadata, content_hash, dedup_key, superseded_by, valid_until, rev) VALUES ("
            "nextval('memory_label_seq'), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, NULL, NULL,"
            " nextval('memory_rev_seq')) RETURNING label",
            [
                mid,
                it.actor,
                it.scope.value,
                it.type.value,
                it.text,
                it.source.value,
                it.confidence,
                it.importance,
                it.strength,
                naive_utc(it.created_at) if it.created_at else now,
                now,
                now,
                now,
                list(it.tags),
                meta,
                chash,
                key,
            ],
        ).fetchall()
        return int(row[0][0])

    def _bump(self, con: Any, bumps: list[tuple[NewMemory, str]], now: datetime) -> None:
        """A repeated write reinforces the memory it repeats instead of copying it."""
        for it, key in bumps:
            con.execute(
                "UPDATE memories SET strength = strength + 0.1 * (1 - strength),"
                " importance = greatest(importance, ?), confidence = greatest(confidence, ?),"
                " access_count = access_count + 1, last_accessed_at = ?, updated_at = ?"
                " WHERE actor = ? AND type = ? AND dedup_key = ?",
                [it.importance, it.confidence, now, now, it.actor, it.type.value, key],
            )

    def update(self, actor: str, memory_id: str, op: str = "update", **changes: object) -> Memory:
        with self._write_lock:
            with self._tx() as con:
                got = self._update_in(con, actor, memory_id, op, changes)
            self._mirror([got])
        return got

    def _update_in(self, con: Any, actor: str, memory_id: str, op: str, changes: dict[str, object]) -> Memory:
        """The update inside an open transaction (write lock held); the caller mirrors it after commit."""
        unknown = set(changes) - _UPDATABLE
        if unknown:
            raise InvalidInput(f"cannot update {sorted(unknown)}; updatable fields: {sorted(_UPDATABLE)}")
        now = naive_utc(datetime.now(timezone.utc))
        sets: list[str] = ["updated_at = ?"]
        params: list[Any] = [now]
        for name, value in changes.items():
            if name == "metadata":
                value = json.dumps(dict(value), sort_keys=True)  # type: ignore[call-overload]
            elif name == "tags":
                value = list(value)  # type: ignore[call-overload]
            elif name == "source" and isinstance(value, Source):
                value = value.value
            elif isinstance(value, datetime):
                value = naive_utc(value)
            sets.append(f"{name} = ?")
            params.append(value)
        before = []
        if "text" in changes:
            sets += ["content_hash = ?", "rev = nextval('memory_rev_seq')"]
            params.append(content_hash(str(changes["text"])))
            before = con.execute(
                "SELECT content_hash FROM memories WHERE actor = ? AND id = ?", [actor, memory_id]
            ).fetchall()
        row = con.execute(
            f"UPDATE memories SET {', '.join(sets)} WHERE actor = ? AND id = ? RETURNING label",
            [*params, actor, memory_id],
        ).fetchall()
        if not row:
            raise MemoryNotFound(f"no memory {memory_id!r} for actor {actor!r}")
        if before and before[0][0] != params[-1]:  # the old vectors describe text that no longer exists
            # (the same words keep theirs: the lanes judge by content hash too, and would keep indexing them)
            con.execute("DELETE FROM vectors WHERE label = ?", [row[0][0]])
            con.execute("DELETE FROM embed_failures WHERE label = ?", [row[0][0]])
        got = self._sql_get(actor, memory_id)
        if got is None:  # pragma: no cover - we hold the only writer
            raise StoreError(f"memory {memory_id} vanished during update")
        self._audit(con, [(actor, op, got.uri, got.content_hash)])
        return got

    def delete(self, actor: str, memory_id: str) -> Memory | None:
        """Delete the memory and every vector made from it (bytes stay until ``compact``)."""
        gone = self.delete_many(actor, [memory_id])
        return gone[0] if gone else None

    def delete_many(self, actor: str, memory_ids: Sequence[str]) -> list[Memory]:
        """Delete these memories of ``actor`` in one transaction; unknown ids are skipped."""
        if not memory_ids:
            return []
        with self._write_lock:
            with self._tx() as con:
                rows = con.execute(
                    f"SELECT {MEMORY_COLUMNS} FROM memories WHERE actor = ? AND id IN (SELECT unnest(?))"
                    " ORDER BY label",
                    [actor, list(memory_ids)],
                ).fetchall()
                if not rows:
                    return []
                gone = [row_to_memory(r) for r in rows]
                labels = [m.label for m in gone]
                for table_name in ("vectors", "embed_failures", "memories"):
                    con.execute(f"DELETE FROM {table_name} WHERE label IN (SELECT unnest(?))", [labels])
                self._audit(con, [(actor, "forget", m.uri, m.content_hash) for m in gone])
                self._forget_journal(con, actor, gone)  # queued text and injection records go with them
            self._mirror([], removed=labels, actor=actor)
        return gone

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Release this user's hold; the file is closed when the last user lets go."""
        with _OPEN_LOCK:
            self._users -= 1
            if self._users > 0:
                return
            if _OPEN.get(self._key) is self:
                del _OPEN[self._key]
        super().close()

    def checkpoint(self) -> None:
        with self._write_lock:
            self._fetch("CHECKPOINT")

    # -- reads ----------------------------------------------------------------------------
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

    def get(self, actor: str, memory_id: str) -> Memory | None:
        table = self.table(actor)
        label = table.label_of(memory_id)
        return None if label is None else table.get(label)

    def get_many(self, actor: str, labels: Sequence[int]) -> dict[int, Memory]:
        return self.table(actor).get_many(labels)

    def uris(self, actor: str, labels: Sequence[int]) -> dict[int, str]:
        return self.table(actor).uris(labels)

    def table(self, actor: str) -> ActorTable:
        """The actor's in-process mirror, loaded from the file on first use."""
        table = self._tables.get(actor)
        if table is not None:
            return table
        with self._write_lock:  # no write can land between the load and the registration
            table = self._tables.get(actor)
            if table is None:
                cols = (
                    self._con()
                    .execute(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE actor = ? ORDER BY label", [actor])
                    .fetchnumpy()
                )
                table = ActorTable(actor, capacity=max(1024, 2 * len(cols["label"])))
                table.load(cols)
                self._tables[actor] = table
            return table

    def _mirror(self, memories: Sequence[Memory], removed: Sequence[int] = (), actor: str = "") -> None:
        """Apply committed changes to the loaded mirrors and tell the listeners (write lock held)."""
        by_actor: dict[str, list[Memory]] = {}
        for memory in memories:
            by_actor.setdefault(memory.actor, []).append(memory)
        if removed:
            by_actor.setdefault(actor, [])
        for who, changed in by_actor.items():
            table = self._tables.get(who)
            gone = removed if who == actor else ()
            if table is not None:
                table.upsert(changed)
                table.remove(gone)
            for listener in list(self._change_listeners.get(who, ())):
                listener(changed, gone)

    def add_change_listener(self, actor: str, listener: ChangeListener) -> None:
        """``listener(upserted, removed_labels)`` after every committed change to ``actor``'s memories."""
        with self._write_lock:
            self._change_listeners.setdefault(actor, []).append(listener)

    def remove_change_listener(self, actor: str, listener: ChangeListener) -> None:
        with self._write_lock:
            listeners = self._change_listeners.get(actor, [])
            if listener in listeners:
                listeners.remove(listener)

    def of_types(
        self, actor: str, types: Sequence[MemoryType], order: str = "newest", limit: int = 1_000_000
    ) -> list[Memory]:
        """The actor's memories of ``types``, newest (or oldest) first, from the in-process mirror."""
        if order not in ("newest", "oldest"):
            raise InvalidInput(f"order must be 'newest' or 'oldest', got {order!r}")
        return self.table(actor).of_types(types, order == "newest", limit)

    def live_labels(self, actor: str) -> LabelArray:
        return self.table(actor).live_labels()

    def content_hashes(self, actor: str) -> dict[int, str]:
        return self.table(actor).content_hashes()

    def texts_since(self, actor: str, rev: int) -> tuple[list[int], list[str]]:
        """(labels, texts) of the actor's memories written or re-worded after revision ``rev``."""
        rows = self._fetch(
            "SELECT label, text FROM memories WHERE actor = ? AND rev > ? ORDER BY label", [actor, int(rev)]
        )
        return [int(r[0]) for r in rows], [r[1] for r in rows]

    def max_rev(self, actor: str) -> int:
        return int(self._fetch("SELECT coalesce(max(rev), 0) FROM memories WHERE actor = ?", [actor])[0][0])

    def touch(self, actor: str, labels: Sequence[int], when: datetime) -> None:
        if not labels:
            return
        with self._write_lock:
            with self._tx() as con:
                con.execute(
                    "UPDATE memories SET access_count = access_count + 1, last_accessed_at = ?"
                    " WHERE actor = ? AND label IN (SELECT unnest(?))",
                    [naive_utc(when), actor, [int(x) for x in labels]],
                )
            self._mirror(list(self._sql_get_many(actor, labels).values()))
