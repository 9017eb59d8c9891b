"""Journal statements that run inside a caller's open transaction.

Deleting memories (``writes``) and accepting a review item (``journal``) both touch the review
queue in the same transaction as their own rows; these bodies are shared by both without either
importing the other.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timezone

from mempager.errors import InvalidInput
from mempager.store.journal import purge_audit, redact, referring
from mempager.store.pg.db import AuditRow, Conn
from mempager.types import Memory
from mempager.validate import content_hash


def close_review(
    conn: Conn, audit: list[AuditRow], actor: str, review_id: str, status: str, result_uri: str | None
) -> None:
    """Decide a pending review item (its payload keeps no text); InvalidInput if it is not pending."""
    row = conn.execute(  # FOR UPDATE: a concurrent decision waits, then finds it decided
        "SELECT payload FROM review_queue WHERE actor = %s AND id = %s AND status = 'pending' FOR UPDATE",
        [actor, review_id],
    ).fetchone()
    if row is None:
        raise InvalidInput(f"review item {review_id!r} is not pending; it was decided already")
    conn.execute(
        "UPDATE review_queue SET status = %s, decided_at = %s, result_uri = %s, payload = %s"
        " WHERE actor = %s AND id = %s",
        [
            status,
            datetime.now(timezone.utc),
            result_uri,
            json.dumps(redact(json.loads(row[0])), sort_keys=True),
            actor,
            review_id,
        ],
    )
    audit.append((actor, "review", result_uri or f"review:{review_id}", content_hash(status), None))


def forget_journal(conn: Conn, audit: list[AuditRow], actor: str, gone: Sequence[Memory]) -> None:
    """Inside the delete's transaction: the review rows and injection records of ``gone``."""
    conn.execute("DELETE FROM injections WHERE actor = %s AND uri = ANY(%s)", [actor, sorted({m.uri for m in gone})])
    rows = conn.execute(
        "SELECT id, payload, result_uri FROM review_queue WHERE actor = %s ORDER BY id FOR UPDATE", [actor]
    ).fetchall()
    doomed = referring(rows, gone)
    if doomed:
        conn.execute("DELETE FROM review_queue WHERE actor = %s AND id = ANY(%s)", [actor, [rid for rid, _ in doomed]])
        audit.extend((*row, None) for row in purge_audit(actor, doomed))
