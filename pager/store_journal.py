"""Durable bookkeeping beside the memories: what each page injected, feedback, the review queue."""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from .audit import AuditEntry, AuditReport
from .audit import verify as verify_chain
from .errors import InvalidInput, MemoryNotFound
from .store_base import aware, naive_utc
from .validate import content_hash


@dataclass(frozen=True, slots=True)
class ReviewItem:
    id: str
    actor: str
    kind: str  # "memory" (encoding gate) | "inversion" (anti-pattern proposal)
    payload: Mapping[str, Any]
    status: str  # pending | accepted | rejected
    created_at: datetime
    decided_at: datetime | None
    result_uri: str | None


_AUDIT_COLUMNS = "seq, recorded_at, actor, op, uri, content_hash, prev_hash, hash"


def _now() -> datetime:
    return naive_utc(datetime.now(timezone.utc))


class JournalMixin:
    _fetch: Any
    _tx: Any
    _audit: Any

    def audit_entries(
        self, actor: str | None = None, since: datetime | None = None, limit: int = 1000
    ) -> list[AuditEntry]:
        where: list[str] = ["TRUE"]
        params: list[Any] = []
        if actor is not None:
            where.append("actor = ?")
            params.append(actor)
        if since is not None:
            where.append("recorded_at >= ?")
            params.append(naive_utc(since))
        rows = self._fetch(
            f"SELECT {_AUDIT_COLUMNS} FROM audit WHERE {' AND '.join(where)}"
            " ORDER BY seq LIMIT ?",
            [*params, int(limit)],
        )
        return [AuditEntry(r[0], r[1].replace(tzinfo=timezone.utc), *r[2:]) for r in rows]

    def verify_audit(self) -> AuditReport:
        """Walk the whole chain (every actor: the chain is one per store)."""
        rows = self._fetch(f"SELECT {_AUDIT_COLUMNS} FROM audit ORDER BY seq")
        return verify_chain(rows)

    def record_injections(self, actor: str, turn: str, items: Sequence[tuple[str, str]]) -> None:
        """Remember which (uri, kind) a page injected for ``turn`` (re-recording is harmless)."""
        if not items:
            return
        with self._tx() as con:
            for uri, kind in items:
                con.execute(
                    "INSERT INTO injections VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    [actor, turn, uri, kind, _now()],
                )

    def injections(self, actor: str, turn: str) -> list[tuple[str, str]]:
        rows = self._fetch(
            "SELECT uri, kind FROM injections WHERE actor = ? AND turn = ? ORDER BY uri", [actor, turn]
        )
        return [(r[0], r[1]) for r in rows]

    def claim_feedback(self, actor: str, turn: str, outcome: str) -> bool:
        """True the first time feedback for ``turn`` is recorded; False for an exact repeat."""
        with self._tx() as con:
            row = con.execute(
                "SELECT outcome FROM feedback_log WHERE actor = ? AND turn = ?", [actor, turn]
            ).fetchall()
            if row:
                if row[0][0] != outcome:
                    raise InvalidInput(
                        f"turn {turn!r} already has feedback {row[0][0]!r}; feedback is applied once per "
                        "turn — record a new turn id for a new outcome"
                    )
                return False
            con.execute("INSERT INTO feedback_log VALUES (?, ?, ?, ?)", [actor, turn, outcome, _now()])
            self._audit(con, [(actor, "feedback", f"turn:{turn}", content_hash(outcome))])
        return True

    def review_add(self, actor: str, kind: str, payload: Mapping[str, Any]) -> str:
        review_id = secrets.token_hex(8)
        with self._tx() as con:
            con.execute(
                "INSERT INTO review_queue VALUES (?, ?, ?, ?, 'pending', ?, NULL, NULL)",
                [review_id, actor, kind, json.dumps(dict(payload), sort_keys=True), _now()],
            )
        return review_id

    def review_find(self, actor: str, kind: str, key: str, value: str) -> ReviewItem | None:
        """A pending item of ``kind`` whose payload[key] == value (avoids duplicate proposals)."""
        for item in self.review_list(actor, status="pending"):
            if item.kind == kind and item.payload.get(key) == value:
                return item
        return None

    def review_list(self, actor: str, status: str | None = "pending") -> list[ReviewItem]:
        where, params = "actor = ?", [actor]
        if status is not None:
            where += " AND status = ?"
            params.append(status)
        rows = self._fetch(
            f"SELECT id, actor, kind, payload, status, created_at, decided_at, result_uri FROM review_queue "
            f"WHERE {where} ORDER BY created_at, id",
            params,
        )
        return [
            ReviewItem(r[0], r[1], r[2], json.loads(r[3]), r[4], r[5].replace(tzinfo=timezone.utc),
                       aware(r[6]), r[7])
            for r in rows
        ]

    def review_get(self, actor: str, review_id: str) -> ReviewItem:
        for item in self.review_list(actor, status=None):
            if item.id == review_id:
                return item
        raise MemoryNotFound(f"no review item {review_id!r} for actor {actor!r}; list them with `mempager review`")

    def review_close(self, actor: str, review_id: str, status: str, result_uri: str | None) -> None:
        with self._tx() as con:
            rows = con.execute(
                "UPDATE review_queue SET status = ?, decided_at = ?, result_uri = ? "
                "WHERE actor = ? AND id = ? AND status = 'pending' RETURNING id",
                [status, _now(), result_uri, actor, review_id],
            ).fetchall()
            if rows:
                self._audit(con, [(actor, "review", result_uri or f"review:{review_id}", content_hash(status))])
        if not rows:
            raise InvalidInput(f"review item {review_id!r} is not pending; it was decided already")
