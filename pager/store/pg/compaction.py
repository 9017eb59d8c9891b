"""Compaction: rewrite the tables so the bytes of deleted memories' text and vectors are gone;
and the marks (store/erasure_marks.py) that say an actor still has such bytes to erase."""

from __future__ import annotations

import logging
from typing import Any

from psycopg import errors as pg
from psycopg import sql

from mempager.errors import StoreError
from mempager.store import erasure_marks
from mempager.store.pg.db import Db

log = logging.getLogger("mempager.pgstore")
_TABLES = (
    "memories",
    "vectors",
    "embed_queue",
    "review_queue",
    "injections",
    "feedback_log",
    "associations",  # a forgotten memory's links (deleted with it by the foreign key)
    "crystals",  # forgotten crystals and dropped or cleaned spores (store/pg/tiers.py)
    "spores",
)


def compact(db: Db) -> None:
    """Rewrite the tables that held deleted memories' text and vectors, so their bytes are gone.

    VACUUM FULL writes fresh table and index files from the live rows and drops the old ones
    (it locks each table while it runs). A CHECKPOINT follows when the role may run one, so the
    write-ahead log holding the old rows can be recycled; WAL archives and replicas are the
    server operator's to manage.
    """
    db.maintenance([sql.SQL("VACUUM (FULL, ANALYZE) {}").format(sql.Identifier(t)) for t in _TABLES])
    try:
        db.maintenance(["CHECKPOINT"])
    except StoreError as exc:
        if not isinstance(exc.__cause__, pg.InsufficientPrivilege):
            raise
        log.info(
            "compacted %s; this role may not CHECKPOINT, so old WAL segments are recycled at the "
            "server's next checkpoint",
            db.location,
        )


def mark_erasure(db: Db, actor: str) -> list[Any]:
    """Write ``actor``'s erasure mark (a fresh token) in its own transaction; the audit entries."""

    def body(conn: Any, audit: list[Any]) -> None:
        conn.execute(
            "INSERT INTO store_meta VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            [erasure_marks.key(actor), erasure_marks.token()],
        )

    _, entries = db.write(body)
    return list(entries)


def erasure_marks_of(db: Db) -> dict[str, str]:
    rows = db.rows("SELECT key, value FROM store_meta WHERE starts_with(key, %s)", [erasure_marks.PREFIX])
    return erasure_marks.by_actor([(str(k), str(v)) for k, v in rows])


def clear_erasure(db: Db, actor: str, token: str) -> tuple[bool, list[Any]]:
    """Drop the mark if it still holds ``token``, with an ``erase`` audit event; (dropped, entries)."""

    def body(conn: Any, audit: list[Any]) -> bool:
        gone = conn.execute(
            "DELETE FROM store_meta WHERE key = %s AND value = %s RETURNING key", [erasure_marks.key(actor), token]
        ).fetchall()
        if gone:
            audit.append((actor, "erase", f"erasure:{actor}", token, None))
        return bool(gone)

    dropped, entries = db.write(body)
    return bool(dropped), list(entries)
