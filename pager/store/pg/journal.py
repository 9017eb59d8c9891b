"""Durable bookkeeping beside the memories: page injections, feedback, the review queue, the audit trail."""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from mempager.errors import InvalidInput, MemoryNotFound
from mempager.store.audit import verify as verify_chain
from mempager.store.journal import Deprecate, ReviewItem, purge_audit
from mempager.store.pg.db import AuditRow, Conn, Db
from mempager.store.pg.journal_tx import close_review
from mempager.store.pg.listeners import PgListeners
from mempager.store.pg.rows import maybe_utc, utc
from mempager.store.pg.writes import PgWrites
from mempager.types import AuditEntry, AuditReport, Memory, NewMemory, PutResult
from mempager.validate import content_hash

_AUDIT_COLUMNS = "seq, recorded_at, actor, op, uri, content_hash, prev_hash, hash"
_REVIEW_COLUMNS = "id, actor, kind, payload, status, created_at, decided_at, result_uri"


def _entry(row: Sequence[Any]) -> AuditEntry:
    return AuditEntry(int(row[0]), utc(row[1]), *row[2:8])


def _review(row: Sequence[Any]) -> ReviewItem:
    return ReviewItem(row[0], row[1], row[2], json.loads(row[3]), row[4], utc(row[5]), maybe_utc(row[6]), row[7])


class PgJournal:
    """Review items follow the erasure rules described in ``pager.store_journal``.

    ``writes`` runs the memory side of ``review_accept`` inside its transaction; ``listeners``
    hear about every committed entry.
    """

    def __init__(self, db: Db, listeners: PgListeners, writes: PgWrites) -> None:
        self._db = db
        self._listeners = listeners
        self._writes = writes

    # -- audit ----------------------------------------------------------------------------
    def audit_entries(
        self, actor: str | None = None, since: datetime | None = None, limit: int = 1000
    ) -> list[AuditEntry]:
        where: list[str] = ["TRUE"]
        params: list[Any] = []
        if actor is not None:
            where.append("actor = %s")
            params.append(actor)
        if since is not None:
            where.append("recorded_at >= %s")
            params.append(utc(since))
        found = self._db.rows(
            f"SELECT {_AUDIT_COLUMNS} FROM audit WHERE {' AND '.join(where)} ORDER BY seq LIMIT %s",
            [*params, int(limit)],
        )
        return [_entry(r) for r in found]

    def verify_audit(self) -> AuditReport:
        """Walk the whole chain (every actor: the chain is one per store)."""
        found = self._db.rows(f"SELECT {_AUDIT_COLUMNS} FROM audit ORDER BY seq")
        return verify_chain([(int(r[0]), utc(r[1]).replace(tzinfo=None), *r[2:]) for r in found])

    # -- page injections and feedback ---------------------------------------------------------
    def record_injections(self, actor: str, turn: str, items: Sequence[tuple[str, str]]) -> None:
        """Remember which (uri, kind) a page injected for ``turn`` (re-recording is harmless)."""
        if not items:
            return
        now = datetime.now(timezone.utc)
        self._db.write(
            lambda conn, audit: conn.execute(
                "INSERT INTO injections (actor, turn, uri, kind, recorded_at)"
                " SELECT %s, %s, u, k, %s FROM unnest(%s::text[], %s::text[]) AS x(u, k) ON CONFLICT DO NOTHING",
                [actor, turn, now, [u for u, _ in items], [k for _, k in items]],
            )
        )

    def injections(self, actor: str, turn: str) -> list[tuple[str, str]]:
        found = self._db.rows(
            "SELECT uri, kind FROM injections WHERE actor = %s AND turn = %s ORDER BY uri", [actor, turn]
        )
        return [(r[0], r[1]) for r in found]

    def claim_feedback(self, actor: str, turn: str, outcome: str) -> bool:
        """True the first time feedback for ``turn`` is recorded; False for an exact repeat."""

        def body(conn: Conn, audit: list[AuditRow]) -> bool:
            won = conn.execute(
                "INSERT INTO feedback_log VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING outcome",
                [actor, turn, outcome, datetime.now(timezone.utc)],
            ).fetchone()
            if won is not None:
                audit.append((actor, "feedback", f"turn:{turn}", content_hash(outcome), None))
                return True
            row = conn.execute(
                "SELECT outcome FROM feedback_log WHERE actor = %s AND turn = %s", [actor, turn]
            ).fetchone()
            if row is not None and row[0] != outcome:
                raise InvalidInput(
                    f"turn {turn!r} already has feedback {row[0]!r}; feedback is applied once per "
                    "turn — record a new turn id for a new outcome"
                )
            return False

        first, entries = self._db.write(body)
        self._listeners.publish(entries)
        return first

    # -- review queue -------------------------------------------------------------------------
    def review_add(self, actor: str, kind: str, payload: Mapping[str, Any]) -> str:
        review_id = secrets.token_hex(8)
        self._db.write(
            lambda conn, audit: conn.execute(
                "INSERT INTO review_queue VALUES (%s, %s, %s, %s, 'pending', %s, NULL, NULL)",
                [review_id, actor, kind, json.dumps(dict(payload), sort_keys=True), datetime.now(timezone.utc)],
            )
        )
        return review_id

    def review_find(self, actor: str, kind: str, key: str, value: str) -> ReviewItem | None:
        """A pending item of ``kind`` whose payload[key] == value (avoids duplicate proposals)."""
        for item in self.review_list(actor, status="pending"):
            if item.kind == kind and item.payload.get(key) == value:
                return item
        return None

    def review_list(self, actor: str, status: str | None = "pending") -> list[ReviewItem]:
        where, params = "actor = %s", [actor]
        if status is not None:
            where += " AND status = %s"
            params.append(status)
        found = self._db.rows(
            f"SELECT {_REVIEW_COLUMNS} FROM review_queue WHERE {where} ORDER BY created_at, id", params
        )
        return [_review(r) for r in found]

    def review_get(self, actor: str, review_id: str) -> ReviewItem:
        found = self._db.rows(
            f"SELECT {_REVIEW_COLUMNS} FROM review_queue WHERE actor = %s AND id = %s", [actor, review_id]
        )
        if not found:
            raise MemoryNotFound(f"no review item {review_id!r} for actor {actor!r}; list them with `mempager review`")
        return _review(found[0])

    def review_close(self, actor: str, review_id: str, status: str, result_uri: str | None) -> None:
        """Decide an item; its payload keeps no text."""
        _, entries = self._db.write(lambda conn, audit: close_review(conn, audit, actor, review_id, status, result_uri))
        self._listeners.publish(entries)

    def review_accept(
        self, actor: str, review_id: str, item: NewMemory, deprecate: Deprecate | None = None
    ) -> PutResult:
        """Write ``item``, optionally deprecate another memory, and close the item: one transaction.

        An item that is no longer pending raises ``InvalidInput`` and nothing is written.
        """
        keys, payload = self._writes.put_args([item])

        def body(conn: Conn, audit: list[AuditRow]) -> tuple[PutResult, list[Memory]]:
            (result,) = self._writes.put_tx(conn, audit, [item], keys, payload)
            changed = [result.memory]
            if deprecate is not None:
                memory_id, changes = deprecate
                changed.append(
                    self._writes.update_tx(
                        conn, audit, actor, memory_id, "update", {**changes, "superseded_by": result.memory.uri}
                    )
                )
            close_review(conn, audit, actor, review_id, "accepted", result.memory.uri)
            return result, changed

        (result, changed), entries = self._db.write(body)
        self._listeners.after(entries, changed)
        return result

    def review_purge(self, actor: str, ids: Sequence[str] | None = None) -> int:
        """Delete the actor's review items (all of them when ``ids`` is None); returns how many."""

        def body(conn: Conn, audit: list[AuditRow]) -> int:
            if ids is None:
                rows = conn.execute(
                    "DELETE FROM review_queue WHERE actor = %s RETURNING id, payload", [actor]
                ).fetchall()
            else:
                rows = conn.execute(
                    "DELETE FROM review_queue WHERE actor = %s AND id = ANY(%s) RETURNING id, payload",
                    [actor, list(ids)],
                ).fetchall()
            doomed = sorted((r[0], r[1]) for r in rows)
            audit.extend((*row, None) for row in purge_audit(actor, doomed))
            return len(doomed)

        count, entries = self._db.write(body)
        self._listeners.publish(entries)
        return count
