"""Writes to the memories table: put (dedup by ``ON CONFLICT``), update, delete, touch.

Each write is one transaction; this process's listeners hear about it after commit. The
transaction bodies (``put_tx``, ``update_tx``) are public so a review acceptance can run them
inside its own transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from psycopg import errors as pg
from psycopg import sql

from mempager.errors import InvalidInput, MemoryNotFound
from mempager.store.pg.db import AuditRow, Conn, Db
from mempager.store.pg.errors import reject_nul
from mempager.store.pg.journal_tx import forget_journal
from mempager.store.pg.listeners import PgListeners
from mempager.store.pg.models import requeue
from mempager.store.pg.rows import MEMORY_COLUMNS, maybe_utc, row_to_memory, utc
from mempager.store.pg.upsert import BUMP, UPSERT, Key, plan
from mempager.store.writes import dedup_key_of
from mempager.types import Memory, NewMemory, PutResult, Source
from mempager.validate import content_hash, new_ids

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


class PgWrites:
    """Memory writes over ``db``; each committed change is handed to ``listeners``."""

    def __init__(self, db: Db, listeners: PgListeners) -> None:
        self._db = db
        self._listeners = listeners

    def put(self, item: NewMemory) -> PutResult:
        """Write one memory (or reinforce the one with the same words)."""
        return self.put_many([item])[0]

    def put_many(self, items: Sequence[NewMemory]) -> list[PutResult]:
        """All or nothing, in one transaction; repeats (in the batch or the store) reinforce."""
        if not items:
            return []
        keys, payload = self.put_args(items)
        results, entries = self._db.write(lambda conn, audit: self.put_tx(conn, audit, items, keys, payload))
        self._listeners.after(entries, _unique([r.memory for r in results]))
        return results

    @staticmethod
    def put_args(items: Sequence[NewMemory]) -> tuple[list[str], dict[str, list[str]]]:
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

    @staticmethod
    def put_tx(
        conn: Conn,
        audit: list[AuditRow],
        items: Sequence[NewMemory],
        keys: list[str],
        payload: dict[str, list[str]],
    ) -> list[PutResult]:
        """The put inside an open transaction; the caller tells the listeners after commit."""
        now = datetime.now(timezone.utc)
        firsts, rounds = plan(items, keys)
        order = list(firsts.values())
        ids = new_ids(len(order))
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
            "created": [maybe_utc(items[i].created_at) for i in order],
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
        """Change the named fields of one memory; re-wording it re-queues it for every model."""
        got, entries = self._db.write(lambda conn, audit: self.update_tx(conn, audit, actor, memory_id, op, changes))
        self._listeners.after(entries, [got])
        return got

    @staticmethod
    def update_tx(
        conn: Conn, audit: list[AuditRow], actor: str, memory_id: str, op: str, changes: dict[str, object]
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
            requeue(conn, [got.label], got.actor)
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
            forget_journal(conn, audit, actor, gone)  # queued text and injection records go with them
            return gone

        gone, entries = self._db.write(body)
        if gone:
            self._listeners.after(entries, [], [m.label for m in gone], actor)
        return gone

    def touch(self, actor: str, labels: Sequence[int], when: datetime) -> None:
        """Count an access to each labelled memory, at ``when``."""
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
        self._listeners.after(entries, touched)


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
