"""Durable bookkeeping beside the memories: what each page injected, feedback, the review queue.

The review queue holds text that is not (yet) a memory, so it follows the memory's erasure rules:

- deciding an item (accept or reject) redacts its payload to :data:`KEPT_WHEN_DECIDED` plus the
  text's content hash: an accepted text now lives in its memory, a rejected one was refused. The
  row keeps the decision (status, time, result uri); the old row version's bytes leave the file
  at the next compaction (every hard forget runs one; so does ``Pager.compact()``);
- deleting a memory deletes, in the same transaction, every review row that refers to it (result
  uri, the pattern an inversion is about, or the same text by content hash) and the page
  injection records of its uri.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from mempager.errors import InvalidInput, MemoryNotFound
from mempager.store.audit import verify as verify_chain
from mempager.store.base import DuckDb, aware, naive_utc, one_of
from mempager.types import AuditEntry, AuditReport, Memory
from mempager.validate import content_hash


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
# What a decided review item keeps: no text, tags or metadata (they may carry the content).
KEPT_WHEN_DECIDED = ("type", "source", "confidence", "importance", "scope", "uri", "content_hash")
# (memory id, changes) applied with an accepted item, superseded_by set to the new memory's uri
Deprecate = tuple[str, Mapping[str, Any]]


def redact(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The payload of a decided item: its text replaced by the text's content hash."""
    out = {k: payload[k] for k in KEPT_WHEN_DECIDED if k in payload}
    if isinstance(payload.get("text"), str):
        out["content_hash"] = content_hash(payload["text"])
    return out


def refers_to(payload: Mapping[str, Any], result_uri: str | None, uris: set[str], hashes: set[str]) -> bool:
    """Whether a review row holds (or points at) one of these memories."""
    text = payload.get("text")
    held = content_hash(text) if isinstance(text, str) else payload.get("content_hash")
    return result_uri in uris or payload.get("uri") in uris or held in hashes


def referring(rows: Sequence[tuple[Any, ...]], gone: Sequence[Memory]) -> list[tuple[str, str]]:
    """The (id, payload) of the review rows ``(id, payload json, result_uri)`` that hold or point at ``gone``."""
    uris, hashes = {m.uri for m in gone}, {m.content_hash for m in gone}
    return [(r[0], r[1]) for r in rows if refers_to(json.loads(r[1]), r[2], uris, hashes)]


def purge_audit(actor: str, rows: Sequence[tuple[str, str]]) -> list[tuple[str, str, str, str]]:
    """Audit rows for deleted review items (id, payload json): the hash of what they held."""
    return [(actor, "forget", f"review:{rid}", content_hash(payload)) for rid, payload in rows]


def _now() -> datetime:
    return naive_utc(datetime.now(timezone.utc))


class Journal:
    """Page injections, feedback claims, the review queue and the audit trail's reads.

    ``close_in`` and ``forget_in`` run inside another's transaction: the write path
    (``store.writes``) calls them so a review item closes, or a forgotten memory's rows go, in
    the same transaction as the write.
    """

    def __init__(self, db: DuckDb) -> None:
        self.db = db

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
        rows = self.db.fetch(
            f"SELECT {_AUDIT_COLUMNS} FROM audit WHERE {' AND '.join(where)} ORDER BY seq LIMIT ?",
            [*params, int(limit)],
        )
        return [AuditEntry(r[0], r[1].replace(tzinfo=timezone.utc), *r[2:]) for r in rows]

    def verify_audit(self) -> AuditReport:
        """Walk the whole chain (every actor: the chain is one per store)."""
        rows = self.db.fetch(f"SELECT {_AUDIT_COLUMNS} FROM audit ORDER BY seq")
        return verify_chain(rows)

    def record_injections(self, actor: str, turn: str, items: Sequence[tuple[str, str]]) -> None:
        """Remember which (uri, kind) a page injected for ``turn`` (re-recording is harmless)."""
        if not items:
            return
        with self.db.tx() as con:
            for uri, kind in items:
                con.execute(
                    "INSERT INTO injections VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    [actor, turn, uri, kind, _now()],
                )

    def injections(self, actor: str, turn: str) -> list[tuple[str, str]]:
        rows = self.db.fetch(
            "SELECT uri, kind FROM injections WHERE actor = ? AND turn = ? ORDER BY uri", [actor, turn]
        )
        return [(r[0], r[1]) for r in rows]

    def claim_feedback(self, actor: str, turn: str, outcome: str) -> bool:
        """True the first time feedback for ``turn`` is recorded; False for an exact repeat."""
        with self.db.tx() as con:
            row = con.execute("SELECT outcome FROM feedback_log WHERE actor = ? AND turn = ?", [actor, turn]).fetchall()
            if row:
                if row[0][0] != outcome:
                    raise InvalidInput(
                        f"turn {turn!r} already has feedback {row[0][0]!r}; feedback is applied once per "
                        "turn — record a new turn id for a new outcome"
                    )
                return False
            con.execute("INSERT INTO feedback_log VALUES (?, ?, ?, ?)", [actor, turn, outcome, _now()])
            self.db.audit(con, [(actor, "feedback", f"turn:{turn}", content_hash(outcome))])
        return True

    def review_add(self, actor: str, kind: str, payload: Mapping[str, Any]) -> str:
        review_id = secrets.token_hex(8)
        with self.db.tx() as con:
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
        rows = self.db.fetch(
            f"SELECT id, actor, kind, payload, status, created_at, decided_at, result_uri FROM review_queue "
            f"WHERE {where} ORDER BY created_at, id",
            params,
        )
        return [
            ReviewItem(r[0], r[1], r[2], json.loads(r[3]), r[4], r[5].replace(tzinfo=timezone.utc), aware(r[6]), r[7])
            for r in rows
        ]

    def review_get(self, actor: str, review_id: str) -> ReviewItem:
        for item in self.review_list(actor, status=None):
            if item.id == review_id:
                return item
        raise MemoryNotFound(f"no review item {review_id!r} for actor {actor!r}; list them with `mempager review`")

    def review_close(self, actor: str, review_id: str, status: str, result_uri: str | None) -> None:
        """Decide an item; its payload keeps no text (see the module docstring)."""
        with self.db.tx() as con:
            self.close_in(con, actor, review_id, status, result_uri)

    def close_in(self, con: Any, actor: str, review_id: str, status: str, result_uri: str | None) -> None:
        rows = con.execute(  # the write lock is held: nobody closes it between this read and the update
            "SELECT payload FROM review_queue WHERE actor = ? AND id = ? AND status = 'pending'", [actor, review_id]
        ).fetchall()
        if not rows:
            raise InvalidInput(f"review item {review_id!r} is not pending; it was decided already")
        con.execute(
            "UPDATE review_queue SET status = ?, decided_at = ?, result_uri = ?, payload = ?"
            " WHERE actor = ? AND id = ?",
            [status, _now(), result_uri, json.dumps(redact(json.loads(rows[0][0])), sort_keys=True), actor, review_id],
        )
        self.db.audit(con, [(actor, "review", result_uri or f"review:{review_id}", content_hash(status))])

    def review_purge(self, actor: str, ids: Sequence[str] | None = None) -> int:
        """Delete the actor's review items (all of them when ``ids`` is None); returns how many."""
        with self.db.tx() as con:
            rows = con.execute("SELECT id, payload FROM review_queue WHERE actor = ? ORDER BY id", [actor]).fetchall()
            wanted = None if ids is None else set(ids)
            doomed = [(r[0], r[1]) for r in rows if wanted is None or r[0] in wanted]
            if doomed:
                con.execute(
                    "DELETE FROM review_queue WHERE actor = ? AND id IN (SELECT unnest(?))",
                    [actor, [rid for rid, _ in doomed]],
                )
                self.db.audit(con, purge_audit(actor, doomed))
        return len(doomed)

    def forget_in(self, con: Any, actor: str, gone: Sequence[Memory]) -> None:
        """Inside the delete's transaction: the review rows and injection records of ``gone``."""
        by_uri, uris = one_of("uri", sorted({m.uri for m in gone}))
        con.execute(f"DELETE FROM injections WHERE actor = ? AND {by_uri}", [actor, uris])
        rows = con.execute(
            "SELECT id, payload, result_uri FROM review_queue WHERE actor = ? ORDER BY id", [actor]
        ).fetchall()
        doomed = referring(rows, gone)
        if doomed:
            con.execute(
                "DELETE FROM review_queue WHERE actor = ? AND id IN (SELECT unnest(?))",
                [actor, [rid for rid, _ in doomed]],
            )
            self.db.audit(con, purge_audit(actor, doomed))
