"""Reads answered by SQL: filtered listings, dedup look-ups, and the reference salience query.

The hot path (get, get_many, salience) is served by the in-process mirror in ``store.mirror``;
these are the slower, exhaustive reads and the references the mirror is tested against.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from mempager.errors import InvalidInput
from mempager.protocols import SalienceParams
from mempager.store.base import MEMORY_COLUMNS, DuckDb, naive_utc, row_to_memory
from mempager.types import Memory, MemoryType, Source


class SqlReads:
    def __init__(self, db: DuckDb) -> None:
        self.db = db

    def sql_get(self, actor: str, memory_id: str) -> Memory | None:
        rows = self.db.fetch(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE actor = ? AND id = ?", [actor, memory_id])
        return row_to_memory(rows[0]) if rows else None

    def find(self, actor: str, type_: MemoryType, dedup_key: str) -> Memory | None:
        rows = self.db.fetch(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE dedup_key = ? AND actor = ? AND type = ?"
            " ORDER BY label LIMIT 1",
            [dedup_key, actor, type_.value],
        )
        return row_to_memory(rows[0]) if rows else None

    def sql_get_many(self, actor: str, labels: Sequence[int]) -> dict[int, Memory]:
        if not len(labels):
            return {}
        rows = self.db.fetch(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE actor = ? AND label IN (SELECT unnest(?))",
            [actor, [int(x) for x in labels]],
        )
        return {int(r[0]): row_to_memory(r) for r in rows}

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
        where: list[str] = ["actor = ?"]
        params: list[Any] = [actor]
        if types:
            where.append("type IN (SELECT unnest(?))")
            params.append([t.value for t in types])
        if since is not None:
            where.append("created_at >= ?")
            params.append(naive_utc(since))
        if until is not None:
            where.append("created_at < ?")
            params.append(naive_utc(until))
        if sources:
            where.append("source IN (SELECT unnest(?))")
            params.append([s.value for s in sources])
        if tags:
            where.append("list_has_all(tags, ?)")
            params.append(list(tags))
        if labels is not None:
            where.append("label IN (SELECT unnest(?))")
            params.append([int(x) for x in labels])
        orders = {
            "newest": "created_at DESC, label DESC",
            "oldest": "created_at ASC, label ASC",
            "strongest": "strength DESC, confidence DESC, created_at DESC, label DESC",
        }
        if order not in orders:
            raise InvalidInput(f"order must be one of {sorted(orders)}, got {order!r}")
        rows = self.db.fetch(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE {' AND '.join(where)} "
            f"ORDER BY {orders[order]} LIMIT ? OFFSET ?",
            [*params, int(limit), int(offset)],
        )
        return [row_to_memory(r) for r in rows]

    def sql_salience(
        self, actor: str, types: Sequence[MemoryType], params: SalienceParams, limit: int
    ) -> list[tuple[int, float]]:
        """The same salience score computed in SQL (the reference the mirror is tested against)."""
        half = " ".join(
            f"WHEN '{t.value}' THEN {float(params.half_life_days.get(t, params.default_half_life_days))}"
            for t in MemoryType
        )
        rows = self.db.fetch(
            "SELECT label, "
            f"? * pow(0.5, greatest(0, date_diff('second', created_at, ?::TIMESTAMP)) / 86400.0"
            f" / (CASE type {half} ELSE {float(params.default_half_life_days)} END))"
            " + ? * importance + ? * strength * confidence"
            " + ? * access_count / (access_count + 5.0) AS score "
            "FROM memories WHERE actor = ? AND type IN (SELECT unnest(?)) AND superseded_by IS NULL"
            " AND (valid_until IS NULL OR valid_until > ?::TIMESTAMP) "
            "ORDER BY score DESC, label DESC LIMIT ?",
            [
                params.w_recency,
                naive_utc(params.now),
                params.w_importance,
                params.w_strength,
                params.w_access,
                actor,
                [t.value for t in types],
                naive_utc(params.now),
                int(limit),
            ],
        )
        return [(int(label), float(score)) for label, score in rows]

    def counts(self, actor: str) -> dict[str, int]:
        rows = self.db.fetch("SELECT type, count(*) FROM memories WHERE actor = ? GROUP BY type ORDER BY type", [actor])
        return {t: int(c) for t, c in rows}

    def actors(self) -> list[str]:
        return [r[0] for r in self.db.fetch("SELECT DISTINCT actor FROM memories ORDER BY actor")]

    def texts_since(self, actor: str, rev: int) -> tuple[list[int], list[str]]:
        """(labels, texts) of the actor's memories written or re-worded after revision ``rev``."""
        rows = self.db.fetch(
            "SELECT label, text FROM memories WHERE actor = ? AND rev > ? ORDER BY label", [actor, int(rev)]
        )
        return [int(r[0]) for r in rows], [r[1] for r in rows]

    def max_rev(self, actor: str) -> int:
        return int(self.db.fetch("SELECT coalesce(max(rev), 0) FROM memories WHERE actor = ?", [actor])[0][0])
