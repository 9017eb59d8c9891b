"""The PostgreSQL side of consolidation: the same contract as ``store/consolidation.py``.

Many processes may share one store, so every write first locks the actor's
``consolidation_state`` row: opening a wrap, saving it and moving the baton are serialised per
actor (and the partial unique index ``wraps_one_open`` holds one open wrap per actor whatever
happens). Links reference their memories with ``ON DELETE CASCADE``: a forget in any process
takes them along, and a save never re-creates a link to a memory deleted meanwhile. A merge group
(``apply_merge``) is one transaction: the merged memory, the supersession of its originals (their
rows locked, so a concurrent forget or merge waits, then finds them changed) and the review item.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

from mempager.errors import ConsolidationError, WrapNotOpen
from mempager.protocols import (
    AssociationLink,
    ConsolidationState,
    ContinuityVersion,
    PatternRecord,
    WrapCommit,
    WrapRecord,
)
from mempager.store.consolidation import (
    LINK_COLUMNS,
    PATTERN_COLUMNS,
    WRAP_COLUMNS,
    gone,
    link_of,
    merge_args,
    pattern_of,
    wrap_of,
)
from mempager.store.consolidation import wrap_uri as wrap_uri
from mempager.store.pg.db import AuditRow, Conn, Db
from mempager.store.pg.journal_tx import close_review
from mempager.store.pg.listeners import PgListeners
from mempager.store.pg.writes import PgWrites
from mempager.types import Memory, NewMemory, PutResult
from mempager.validate import content_hash


def _lock_state(conn: Conn, actor: str) -> tuple[int, int]:
    """The actor's state row, created if missing, locked until the transaction ends: (last_label, wraps)."""
    conn.execute("INSERT INTO consolidation_state VALUES (%s, NULL, FALSE, 0, 0, NULL) ON CONFLICT DO NOTHING", [actor])
    row = conn.execute(
        "SELECT last_label, wraps FROM consolidation_state WHERE actor = %s FOR UPDATE", [actor]
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


class PgConsolidation:
    """``ConsolidationStore`` in the PostgreSQL schema (``PostgresStore.consolidation``)."""

    def __init__(self, db: Db, listeners: PgListeners) -> None:
        self._db = db
        self._listeners = listeners

    # -- reads ------------------------------------------------------------------------------
    def state(self, actor: str) -> ConsolidationState:
        rows = self._db.rows(
            "SELECT section_schema, citations_seen, last_label, wraps, baton FROM consolidation_state WHERE actor = %s",
            [actor],
        )
        opened = self._db.rows(f"SELECT {WRAP_COLUMNS} FROM wraps WHERE actor = %s AND status = 'open'", [actor])
        open_wrap = wrap_of(opened[0]) if opened else None
        if not rows:
            return ConsolidationState(None, False, 0, 0, open_wrap, None)
        schema, seen, last_label, wraps, baton = rows[0]
        return ConsolidationState(schema, bool(seen), int(last_label), int(wraps), open_wrap, baton)

    def continuity(self, actor: str, limit: int = 1) -> list[ContinuityVersion]:
        rows = self._db.rows(
            "SELECT version, wrap, text, saved_at FROM continuity WHERE actor = %s ORDER BY version DESC LIMIT %s",
            [actor, int(limit)],
        )
        return [ContinuityVersion(int(r[0]), int(r[1]), r[2], r[3].astimezone(timezone.utc)) for r in rows]

    def wraps(self, actor: str, limit: int = 20) -> list[WrapRecord]:
        rows = self._db.rows(
            f"SELECT {WRAP_COLUMNS} FROM wraps WHERE actor = %s ORDER BY number DESC LIMIT %s", [actor, int(limit)]
        )
        return [wrap_of(r) for r in rows]

    def patterns(self, actor: str) -> list[PatternRecord]:
        rows = self._db.rows(f"SELECT {PATTERN_COLUMNS} FROM pattern_history WHERE actor = %s ORDER BY key", [actor])
        return [pattern_of(r) for r in rows]

    def links(self, actor: str, labels: Sequence[int] | None = None) -> list[AssociationLink]:
        if labels is None:
            rows = self._db.rows(
                f"SELECT {LINK_COLUMNS} FROM associations WHERE actor = %s ORDER BY strength DESC, a, b", [actor]
            )
        else:
            wanted = [int(x) for x in labels]
            rows = self._db.rows(
                f"SELECT {LINK_COLUMNS} FROM associations WHERE actor = %s AND (a = ANY(%s) OR b = ANY(%s))"
                " ORDER BY strength DESC, a, b",
                [actor, wanted, wanted],
            )
        return [link_of(r) for r in rows]

    def live_sessions(self, actor: str, since: datetime) -> list[str]:
        rows = self._db.rows(
            "SELECT session_id FROM wrap_sessions WHERE actor = %s AND seen_at >= %s ORDER BY session_id",
            [actor, since],
        )
        return [r[0] for r in rows]

    # -- writes -----------------------------------------------------------------------------
    def open_wrap(self, actor: str, session_id: str | None, limit: int) -> WrapRecord | None:
        def body(conn: Conn, audit: list[AuditRow]) -> WrapRecord | None:
            last_label, wraps = _lock_state(conn, actor)
            found = conn.execute(
                f"SELECT {WRAP_COLUMNS} FROM wraps WHERE actor = %s AND status = 'open'", [actor]
            ).fetchall()
            if found:
                return wrap_of(found[0])
            labels = [
                int(r[0])
                for r in conn.execute(
                    "SELECT label FROM memories WHERE actor = %s AND label > %s ORDER BY label LIMIT %s",
                    [actor, last_label, int(limit)],
                ).fetchall()
            ]
            if not labels:
                return None
            number = wraps + 1
            row = conn.execute(
                f"INSERT INTO wraps VALUES (%s, %s, 'open', clock_timestamp(), NULL, %s, %s, '{{}}')"
                f" RETURNING {WRAP_COLUMNS}",
                [actor, number, labels, session_id],
            ).fetchone()
            assert row is not None
            audit.append((actor, "wrap.prepare", wrap_uri(actor, number), content_hash(json.dumps(labels)), None))
            return wrap_of(row)

        wrap, entries = self._db.write(body)
        self._listeners.publish(entries)
        return wrap

    def commit_wrap(self, actor: str, commit: WrapCommit) -> int:
        def body(conn: Conn, audit: list[AuditRow]) -> int:
            _lock_state(conn, actor)
            found = conn.execute(
                "SELECT labels FROM wraps WHERE actor = %s AND number = %s AND status = 'open'",
                [actor, commit.number],
            ).fetchone()
            if found is None:
                raise WrapNotOpen(
                    f"wrap {commit.number} of actor {actor!r} is not open (already saved, or never prepared); "
                    "call prepare_wrap() for a new wrap before saving again"
                )
            labels = [int(x) for x in found[0]]
            row = conn.execute("SELECT coalesce(max(version), 0) FROM continuity WHERE actor = %s", [actor]).fetchone()
            version = int(row[0] if row else 0) + 1
            conn.execute(
                "INSERT INTO continuity VALUES (%s, %s, %s, %s, clock_timestamp())",
                [actor, version, commit.number, commit.text],
            )
            conn.execute(
                "UPDATE wraps SET status = 'saved', saved_at = clock_timestamp(), metrics = %s"
                " WHERE actor = %s AND number = %s",
                [json.dumps(dict(commit.metrics), sort_keys=True), actor, commit.number],
            )
            conn.execute(
                "UPDATE consolidation_state SET citations_seen = %s, last_label = greatest(last_label, %s),"
                " wraps = %s WHERE actor = %s",
                [commit.citations_seen, max(labels, default=0), commit.number, actor],
            )
            self._replace(conn, actor, commit)
            audit.append((actor, "wrap.save", wrap_uri(actor, commit.number), content_hash(commit.text), None))
            audit.extend((actor, op, uri, chash, None) for op, uri, chash in commit.audit)
            return version

        version, entries = self._db.write(body)
        self._listeners.publish(entries)
        return version

    @staticmethod
    def _replace(conn: Conn, actor: str, commit: WrapCommit) -> None:
        conn.execute("DELETE FROM pattern_history WHERE actor = %s", [actor])
        for p in commit.patterns:
            conn.execute(
                "INSERT INTO pattern_history VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                [
                    actor,
                    p.key,
                    p.name,
                    p.level,
                    p.max_level,
                    p.grounded_on,
                    json.dumps(list(p.explanations)),
                    p.in_continuity,
                ],
            )
        conn.execute("DELETE FROM associations WHERE actor = %s", [actor])
        links = commit.links
        if links:  # only links whose two memories still exist (the join), so a forget is never undone
            conn.execute(
                "INSERT INTO associations SELECT %s, x.a, x.b, x.s, x.w, x.t, x.i"
                " FROM unnest(%s::bigint[], %s::bigint[], %s::float8[], %s::int[], %s::text[], %s::float8[])"
                " AS x(a, b, s, w, t, i)"
                " JOIN memories ma ON ma.label = x.a AND ma.actor = %s"
                " JOIN memories mb ON mb.label = x.b AND mb.actor = %s",
                [
                    actor,
                    [k.a for k in links],
                    [k.b for k in links],
                    [k.strength for k in links],
                    [k.last_wrap for k in links],
                    [k.affect_tag for k in links],
                    [k.affect_intensity for k in links],
                    actor,
                    actor,
                ],
            )

    def record_event(self, actor: str, op: str, uri: str, content_hash: str) -> None:
        def body(conn: Conn, audit: list[AuditRow]) -> None:
            audit.append((actor, op, uri, content_hash, None))

        _, entries = self._db.write(body)
        self._listeners.publish(entries)

    def set_schema(self, actor: str, schema: str) -> None:
        def body(conn: Conn, audit: list[AuditRow]) -> None:
            _lock_state(conn, actor)
            if conn.execute("SELECT 1 FROM wraps WHERE actor = %s AND status = 'open'", [actor]).fetchone():
                raise ConsolidationError(
                    f"actor {actor!r} has an open wrap; save it (save_continuity) before changing the section schema"
                )
            conn.execute("UPDATE consolidation_state SET section_schema = %s WHERE actor = %s", [schema, actor])
            audit.append((actor, "wrap.schema", f"schema:{actor}", content_hash(schema), None))

        _, entries = self._db.write(body)
        self._listeners.publish(entries)

    def session_seen(self, actor: str, session_id: str, now: datetime) -> None:
        self._db.write(
            lambda conn, audit: conn.execute(
                "INSERT INTO wrap_sessions VALUES (%s, %s, %s) ON CONFLICT (actor, session_id)"
                " DO UPDATE SET seen_at = EXCLUDED.seen_at",
                [actor, session_id, now],
            )
        )

    def take_baton(self, actor: str, session_id: str) -> None:
        def body(conn: Conn, audit: list[AuditRow]) -> None:
            _lock_state(conn, actor)
            conn.execute("UPDATE consolidation_state SET baton = %s WHERE actor = %s", [session_id, actor])
            audit.append((actor, "wrap.baton", f"session:{session_id}", content_hash(session_id), None))

        _, entries = self._db.write(body)
        self._listeners.publish(entries)

    # -- the consolidation lock (one LLM step per store at a time, across processes) -------------
    def try_lock(self, name: str, holder: str, now: datetime, ttl_seconds: float) -> bool:
        """Take lock ``name`` for ``holder`` unless another holds it unexpired; whether we hold it now.

        One statement, so two processes cannot both win; a retried write finds its own claim.
        """
        until = now + timedelta(seconds=ttl_seconds)

        def body(conn: Conn, audit: list[AuditRow]) -> bool:
            row = conn.execute(
                "INSERT INTO consolidation_locks VALUES (%s, %s, %s, %s) ON CONFLICT (name) DO UPDATE"
                " SET holder = EXCLUDED.holder, acquired_at = EXCLUDED.acquired_at, expires_at = EXCLUDED.expires_at"
                " WHERE consolidation_locks.expires_at <= EXCLUDED.acquired_at"
                " OR consolidation_locks.holder = EXCLUDED.holder RETURNING holder",
                [name, holder, now, until],
            ).fetchone()
            return row is not None

        won, _ = self._db.write(body)
        return won

    def unlock(self, name: str, holder: str) -> None:
        self._db.write(
            lambda conn, audit: conn.execute(
                "DELETE FROM consolidation_locks WHERE name = %s AND holder = %s", [name, holder]
            )
        )

    # -- a merge group (consolidation/merge.py), all or nothing ------------------------------------
    def apply_merge(
        self,
        actor: str,
        originals: Sequence[str],
        *,
        item: NewMemory | None = None,
        by: str | None = None,
        review_id: str | None = None,
    ) -> tuple[str, PutResult | None]:
        """``item`` written (or ``by`` kept), ``originals`` superseded by it, ``review_id`` closed: one transaction."""
        merge_args(item, by)
        keys, payload = PgWrites.put_args([item]) if item is not None else ([], {})

        def body(conn: Conn, audit: list[AuditRow]) -> tuple[str, PutResult | None, list[Memory]]:
            put = PgWrites.put_tx(conn, audit, [item], keys, payload)[0] if item is not None else None
            uri = put.memory.uri if put is not None else str(by)
            keep = uri.rsplit("/", 1)[-1]
            wanted = sorted({*originals, keep})
            live = {
                r[0]
                for r in conn.execute(  # locked to the commit: a concurrent forget waits for this group
                    "SELECT id FROM memories WHERE actor = %s AND id = ANY(%s) AND superseded_by IS NULL"
                    " ORDER BY id FOR UPDATE",
                    [actor, wanted],
                ).fetchall()
            }
            if missing := [i for i in wanted if i not in live]:
                raise gone(actor, missing)
            changed = [] if put is None else [put.memory]
            for memory_id in originals:
                if memory_id != keep:  # the merged text may deduplicate onto one of its originals
                    changed.append(
                        PgWrites.update_tx(conn, audit, actor, memory_id, "supersede", {"superseded_by": uri})
                    )
            if review_id is not None:
                close_review(conn, audit, actor, review_id, "accepted", uri)
            return uri, put, changed

        (uri, put, changed), entries = self._db.write(body)
        self._listeners.after(entries, changed)
        return uri, put
