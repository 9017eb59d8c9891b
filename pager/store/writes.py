"""The DuckDB store's write path: batch insert with dedup, update, delete, touch, review accept.

Every write is one transaction; the mirrors and change listeners hear of it after it commits,
with the write lock still held, so no reader sees a mirror ahead of or behind the file.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np

from mempager.errors import InvalidInput, MemoryNotFound, StoreError
from mempager.hugepages import ADVICE
from mempager.store import consolidation
from mempager.store.base import MEMORY_COLUMNS, DuckDb, naive_utc, one_of, row_to_memory
from mempager.store.journal import Deprecate, Journal
from mempager.store.mirrors import Mirrors
from mempager.store.reads import SqlReads
from mempager.types import Memory, MemoryType, NewMemory, PutResult, Source
from mempager.validate import content_hash, make_uri, new_ids, normalize, to_utc

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


class Writes:
    def __init__(self, db: DuckDb, *, reads: SqlReads, mirrors: Mirrors, journal: Journal) -> None:
        self.db = db
        self.reads = reads
        self.mirrors = mirrors
        self.journal = journal

    def put_many(self, items: Sequence[NewMemory]) -> list[PutResult]:
        if not items:
            return []
        # a batch grows the mirror's and lanes' arrays (each doubling a fresh copy): their pages come
        # without huge-page compaction stalls (mempager.hugepages)
        with self.db.write_lock, ADVICE.off():
            results = self.put_many_in(items)
            self.mirrors.apply([r.memory for r in results])
            return results

    def put_many_in(
        self, items: Sequence[NewMemory], then: Callable[[Any, list[PutResult]], None] | None = None
    ) -> list[PutResult]:
        """The write itself (write lock held); ``then(con, results)`` runs in the same transaction."""
        now = naive_utc(datetime.now(timezone.utc))
        keys = [dedup_key_of(it) for it in items]
        # (actor, type, dedup key) of each item, built once: the batch path is per-item Python
        where = [(it.actor, it.type._value_, key) for it, key in zip(items, keys, strict=True)]
        with self.db.tx() as con:
            slot: dict[tuple[str, str, str], int] = self._existing(con, items, keys)  # dedup key -> label
            fresh: list[int] = []
            for i, at in enumerate(where):
                if at not in slot:
                    slot[at] = -1 - i  # placeholder until inserted
                    fresh.append(i)
            fresh_set = set(fresh)
            ids = new_ids(len(fresh))
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
                    loaded.update(self.reads.sql_get_many(actor, changed))
            results = [PutResult(memory=loaded[slot[at]], created=i in fresh_set) for i, at in enumerate(where)]
            self.db.audit(
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
        with self.db.write_lock:
            with self.db.tx() as con:
                got = self.update_in(con, actor, memory_id, op, changes)
            self.mirrors.apply([got])
        return got

    def update_in(self, con: Any, actor: str, memory_id: str, op: str, changes: dict[str, object]) -> Memory:
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
        got = self.reads.sql_get(actor, memory_id)
        if got is None:  # pragma: no cover - we hold the only writer
            raise StoreError(f"memory {memory_id} vanished during update")
        self.db.audit(con, [(actor, op, got.uri, got.content_hash)])
        return got

    def delete_many(self, actor: str, memory_ids: Sequence[str]) -> list[Memory]:
        """Delete these memories of ``actor`` in one transaction; unknown ids are skipped."""
        if not memory_ids:
            return []
        with self.db.write_lock:
            with self.db.tx() as con:
                by_id, ids = one_of("id", memory_ids)
                rows = con.execute(
                    f"SELECT {MEMORY_COLUMNS} FROM memories WHERE actor = ? AND {by_id} ORDER BY label", [actor, ids]
                ).fetchall()
                if not rows:
                    return []
                gone = [row_to_memory(r) for r in rows]
                labels = [m.label for m in gone]
                by_label, values = one_of("label", labels)
                for table_name in ("vectors", "embed_failures", "memories"):
                    con.execute(f"DELETE FROM {table_name} WHERE {by_label}", [values])
                self.db.audit(con, [(actor, "forget", m.uri, m.content_hash) for m in gone])
                self.journal.forget_in(con, actor, gone)  # queued text and injection records go with them
                consolidation.forget_in(con, actor, gone)  # and every association link they had
            self.mirrors.apply([], removed=labels, actor=actor)
        return gone

    def review_accept(
        self, actor: str, review_id: str, item: NewMemory, deprecate: Deprecate | None = None
    ) -> PutResult:
        """Write ``item``, optionally deprecate another memory, and close the item: one transaction.

        A crash leaves either nothing done (the item still pending) or everything; an item that is
        no longer pending raises ``InvalidInput`` and nothing is written.
        """
        changed: list[Memory] = []

        def then(con: Any, results: list[PutResult]) -> None:
            uri = results[0].memory.uri
            if deprecate is not None:
                memory_id, changes = deprecate
                changed.append(self.update_in(con, actor, memory_id, "update", {**changes, "superseded_by": uri}))
            self.journal.close_in(con, actor, review_id, "accepted", uri)

        with self.db.write_lock:
            results: list[PutResult] = self.put_many_in([item], then=then)
            self.mirrors.apply([results[0].memory, *changed])
        return results[0]

    def touch(self, actor: str, labels: Sequence[int], when: datetime) -> None:
        if not labels:
            return
        with self.db.write_lock:
            with self.db.tx() as con:
                con.execute(
                    "UPDATE memories SET access_count = access_count + 1, last_accessed_at = ?"
                    " WHERE actor = ? AND label IN (SELECT unnest(?))",
                    [naive_utc(when), actor, [int(x) for x in labels]],
                )
            self.mirrors.apply(list(self.reads.sql_get_many(actor, labels).values()))
