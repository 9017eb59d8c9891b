"""The PostgreSQL side of the crystallized tier and of spores: the contract of ``store/tiers.py``.

Many processes may share the store: the ``UNIQUE (actor, key)`` constraint keeps one crystal per
pattern whoever inserts it, and completing a spore locks its row (``FOR UPDATE``), so two
processes completing it at once record one ``spore.done``. Deleted rows' bytes leave the files
when the erasure pass's ``VACUUM FULL`` rewrites these tables (pg/compaction.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from mempager.errors import InvalidInput, MemoryNotFound
from mempager.store.pg.db import AuditRow, Conn, Db
from mempager.store.pg.journal_tx import close_review
from mempager.store.pg.listeners import PgListeners
from mempager.store.tier_types import (
    CRYSTAL_COLUMNS,
    SPORE_COLUMNS,
    Crystal,
    Spore,
    crystal_of,
    evidence_json,
    spore_of,
)
from mempager.validate import content_hash, to_utc


class PgTiers:
    """``TierStore`` in the PostgreSQL schema (``PostgresStore.tiers``)."""

    def __init__(self, db: Db, listeners: PgListeners) -> None:
        self._db = db
        self._listeners = listeners

    # -- crystals -------------------------------------------------------------------------------
    def crystals(self, actor: str) -> list[Crystal]:
        rows = self._db.rows(
            f"SELECT {CRYSTAL_COLUMNS} FROM crystals WHERE actor = %s ORDER BY created_at, id", [actor]
        )
        return [crystal_of(r) for r in rows]

    def add_crystal(self, crystal: Crystal, review_id: str | None = None) -> Crystal:
        c = crystal

        def body(conn: Conn, audit: list[AuditRow]) -> None:
            inserted = conn.execute(
                "INSERT INTO crystals VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (actor, key) DO NOTHING"
                " RETURNING id",
                [c.actor, c.id, c.key, c.name, c.body, evidence_json(c.evidence), c.source, c.created_at],
            ).fetchall()
            if not inserted:
                raise InvalidInput(f"the pattern {c.name!r} is crystallized already; `mempager crystal list` shows it")
            if review_id is not None:
                close_review(conn, audit, c.actor, review_id, "accepted", c.uri)
            audit.append((c.actor, "crystallize", c.uri, content_hash(f"{c.name}\n{c.body}"), None))

        _, entries = self._db.write(body)
        self._listeners.publish(entries)
        return c

    def delete_crystals(self, actor: str, ids: Sequence[str] | None) -> list[Crystal]:
        def body(conn: Conn, audit: list[AuditRow]) -> list[Crystal]:
            rows = _delete(conn, "crystals", CRYSTAL_COLUMNS, actor, ids)
            gone = sorted((crystal_of(r) for r in rows), key=lambda c: c.id)
            audit.extend((actor, "forget", c.uri, content_hash(f"{c.name}\n{c.body}"), None) for c in gone)
            return gone

        gone, entries = self._db.write(body)
        self._listeners.publish(entries)
        return gone

    # -- spores ---------------------------------------------------------------------------------
    def spores(self, actor: str, status: str | None = None) -> list[Spore]:
        if status is None:
            rows = self._db.rows(
                f"SELECT {SPORE_COLUMNS} FROM spores WHERE actor = %s ORDER BY created_at, id", [actor]
            )
        else:
            rows = self._db.rows(
                f"SELECT {SPORE_COLUMNS} FROM spores WHERE actor = %s AND status = %s ORDER BY created_at, id",
                [actor, status],
            )
        return [spore_of(r) for r in rows]

    def add_spore(self, spore: Spore) -> Spore:
        s = spore

        def body(conn: Conn, audit: list[AuditRow]) -> None:
            conn.execute(
                "INSERT INTO spores VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                [s.actor, s.id, s.text, s.cue, s.due_at, s.status, s.created_at, s.done_at],
            )
            audit.append((s.actor, "spore", s.uri, content_hash(f"{s.text}\n{s.cue or ''}"), None))

        _, entries = self._db.write(body)
        self._listeners.publish(entries)
        return s

    def complete_spore(self, actor: str, spore_id: str, when: datetime) -> Spore:
        def body(conn: Conn, audit: list[AuditRow]) -> Spore:
            row = conn.execute(
                f"SELECT {SPORE_COLUMNS} FROM spores WHERE actor = %s AND id = %s FOR UPDATE", [actor, spore_id]
            ).fetchone()
            if row is None:
                raise MemoryNotFound(
                    f"no spore {spore_id!r} for actor {actor!r}; `mempager spore list --all` shows them"
                )
            found = spore_of(row)
            if found.status != "open":
                return found
            conn.execute(
                "UPDATE spores SET status = 'done', done_at = %s WHERE actor = %s AND id = %s", [when, actor, spore_id]
            )
            audit.append((actor, "spore.done", found.uri, content_hash(found.text), None))
            return replace(found, status="done", done_at=to_utc(when))

        done, entries = self._db.write(body)
        self._listeners.publish(entries)
        return done

    def delete_spores(self, actor: str, ids: Sequence[str] | None, op: str = "forget") -> list[Spore]:
        def body(conn: Conn, audit: list[AuditRow]) -> list[Spore]:
            rows = _delete(conn, "spores", SPORE_COLUMNS, actor, ids)
            gone = sorted((spore_of(r) for r in rows), key=lambda s: s.id)
            audit.extend((actor, op, s.uri, content_hash(f"{s.text}\n{s.cue or ''}"), None) for s in gone)
            return gone

        gone, entries = self._db.write(body)
        self._listeners.publish(entries)
        return gone

    # -- import ---------------------------------------------------------------------------------
    def import_tiers(self, crystals: Sequence[Crystal], spores: Sequence[Spore]) -> tuple[list[Crystal], list[Spore]]:
        def body(conn: Conn, audit: list[AuditRow]) -> tuple[list[Crystal], list[Spore]]:
            added_c: list[Crystal] = []
            added_s: list[Spore] = []
            # No conflict target: the primary key (actor, id) and UNIQUE (actor, key) both leave a row
            # out, whoever inserted the other one (another process importing the same file at once).
            for c in crystals:
                if conn.execute(
                    "INSERT INTO crystals VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING id",
                    [c.actor, c.id, c.key, c.name, c.body, evidence_json(c.evidence), c.source, c.created_at],
                ).fetchall():
                    added_c.append(c)
                    audit.append((c.actor, "import", c.uri, content_hash(f"{c.name}\n{c.body}"), None))
            for s in spores:
                if conn.execute(
                    "INSERT INTO spores VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING id",
                    [s.actor, s.id, s.text, s.cue, s.due_at, s.status, s.created_at, s.done_at],
                ).fetchall():
                    added_s.append(s)
                    audit.append((s.actor, "import", s.uri, content_hash(f"{s.text}\n{s.cue or ''}"), None))
            return added_c, added_s

        added, entries = self._db.write(body)
        self._listeners.publish(entries)
        return added


def _delete(conn: Conn, table: str, columns: str, actor: str, ids: Sequence[str] | None) -> list[tuple[Any, ...]]:
    """Delete the actor's rows of ``table`` (all of them, or those with ``ids``), returning them."""
    where = "actor = %s" if ids is None else "actor = %s AND id = ANY(%s)"
    params: list[Any] = [actor] if ids is None else [actor, list(ids)]
    return conn.execute(f"DELETE FROM {table} WHERE {where} RETURNING {columns}", params).fetchall()
