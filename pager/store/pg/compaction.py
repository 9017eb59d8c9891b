"""Compaction: rewrite the tables so the bytes of deleted memories' text and vectors are gone."""

from __future__ import annotations

import logging

from psycopg import errors as pg
from psycopg import sql

from mempager.errors import StoreError
from mempager.store.pg.db import Db

log = logging.getLogger("mempager.pgstore")
_TABLES = ("memories", "vectors", "embed_queue", "review_queue", "injections", "feedback_log")


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
