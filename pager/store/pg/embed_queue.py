"""The shared embedding queue: jobs are claimed, so workers in many processes never embed twice.

``pending`` *claims* the jobs it returns (``FOR UPDATE SKIP LOCKED`` plus a lease), so embedding
workers in several processes share the queue without embedding anything twice; a dead process's
lease runs out and its jobs go back to the others.
"""

from __future__ import annotations

from collections.abc import Sequence

from mempager.protocols import PendingItem, PendingStats
from mempager.store.pg.db import Db
from mempager.store.pg.models import PgModels
from mempager.store.pg.rows import maybe_utc

_CLAIM = """
WITH picked AS (
    SELECT model, label FROM embed_queue
    WHERE model = %(model)s AND actor = %(actor)s
        AND (claimed_until IS NULL OR claimed_until < now() OR claimed_by = %(me)s)
    ORDER BY attempts, label LIMIT %(limit)s FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE embed_queue q SET claimed_by = %(me)s, claimed_until = now() + make_interval(secs => %(lease)s)
    FROM picked WHERE q.model = picked.model AND q.label = picked.label
    RETURNING q.label, q.attempts, q.last_error
)
SELECT c.label, m.actor, m.text, m.content_hash, c.attempts, c.last_error
FROM claimed c JOIN memories m ON m.label = c.label ORDER BY c.attempts, c.label
"""


class PgEmbedQueue:
    """Claims jobs as ``claimer`` for ``claim_seconds``; asking about a model registers it first."""

    def __init__(self, db: Db, models: PgModels, claimer: str, claim_seconds: float) -> None:
        self._db = db
        self._models = models
        self._claimer = claimer
        self._lease = float(claim_seconds)

    def pending(self, actor: str, model: str, limit: int) -> list[PendingItem]:
        """Jobs for ``model``, claimed for this process for ``claim_seconds`` (its own claims repeat)."""
        self._models.ensure_model(model)
        params = {
            "model": model,
            "actor": actor,
            "me": self._claimer,
            "limit": int(limit),
            "lease": self._lease,
        }
        found, _ = self._db.write(lambda conn, audit: conn.execute(_CLAIM, params).fetchall())
        return [PendingItem(int(r[0]), r[1], r[2], r[3], int(r[4]), r[5]) for r in found]

    def pending_stats(self, actor: str, model: str) -> PendingStats:
        self._models.ensure_model(model)
        row = self._db.rows(
            "SELECT count(*), min(m.written_at), count(*) FILTER (WHERE q.attempts > 0) FROM embed_queue q"
            " JOIN memories m ON m.label = q.label WHERE q.model = %s AND q.actor = %s",
            [model, actor],
        )[0]
        return PendingStats(count=int(row[0]), oldest_created_at=maybe_utc(row[1]), failing=int(row[2]))

    def record_embed_failure(self, model: str, labels: Sequence[int], error: str) -> None:
        """Count the failure and release the claim, so another process may try (with its backoff)."""
        self._db.write(
            lambda conn, audit: conn.execute(
                "UPDATE embed_queue SET attempts = attempts + 1, last_error = %s, last_at = now(),"
                " claimed_by = NULL, claimed_until = NULL WHERE model = %s AND label = ANY(%s)",
                [error.replace("\x00", "")[:2000], model, [int(x) for x in labels]],
            )
        )

    def queued_labels(self, actor: str, model: str) -> list[int]:
        """Memories of ``actor`` without a vector of ``model`` yet (what the salience lane covers)."""
        return [
            int(r[0])
            for r in self._db.rows("SELECT label FROM embed_queue WHERE model = %s AND actor = %s", [model, actor])
        ]
