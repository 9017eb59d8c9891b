"""The DuckDB side of consolidation: wraps, continuity versions, pattern history, associations.

Every write is one transaction under the store's write lock with its audit entries inside it,
so a crash between ``prepare_wrap`` and ``save_continuity`` leaves the open wrap (and nothing
half-saved): the next ``prepare_wrap`` hands the same wrap back. A save replaces the actor's
pattern history and association graph as a whole (every unused link decays each wrap, so every
row changes anyway) and keeps only links whose two memories still exist: a forget that ran
meanwhile is never undone. ``forget_in`` runs inside the delete's transaction (store/writes.py).
``apply_merge`` writes one merge group (the merged memory and the supersession of its originals)
in one transaction through the store's ``Writes``, so a failure leaves none of it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import date, datetime, timedelta, timezone
from typing import Any, Protocol

from mempager.errors import ConsolidationError, InvalidInput, MemoryNotFound, WrapNotOpen
from mempager.protocols import (
    AssociationLink,
    ConsolidationState,
    ContinuityVersion,
    PatternRecord,
    WrapCommit,
    WrapRecord,
)
from mempager.store.base import DuckDb, naive_utc, one_of
from mempager.types import Memory, NewMemory, PutResult
from mempager.validate import content_hash

WRAP_COLUMNS = "actor, number, status, opened_at, saved_at, labels, session_id, metrics"
LINK_COLUMNS = "a, b, strength, last_wrap, affect_tag, affect_intensity"
PATTERN_COLUMNS = "key, name, level, max_level, grounded_on, explanations, in_continuity"


def wrap_uri(actor: str, number: int) -> str:
    return f"wrap:{actor}/{number}"


def wrap_of(row: Sequence[Any]) -> WrapRecord:
    actor, number, status, opened, saved, labels, session_id, metrics = row
    return WrapRecord(
        actor=actor,
        number=int(number),
        status=status,
        opened_at=_aware(opened),
        saved_at=None if saved is None else _aware(saved),
        labels=tuple(int(x) for x in labels or ()),
        session_id=session_id,
        metrics=json.loads(metrics),
    )


def link_of(row: Sequence[Any]) -> AssociationLink:
    a, b, strength, last_wrap, tag, intensity = row
    return AssociationLink(
        int(a), int(b), float(strength), int(last_wrap), tag, None if intensity is None else float(intensity)
    )


def pattern_of(row: Sequence[Any]) -> PatternRecord:
    key, name, level, max_level, grounded, explanations, present = row
    return PatternRecord(
        key=key,
        name=name,
        level=int(level),
        max_level=int(max_level),
        grounded_on=grounded if isinstance(grounded, date) or grounded is None else date.fromisoformat(str(grounded)),
        explanations=tuple(json.loads(explanations)),
        in_continuity=bool(present),
    )


class _Mirrors(Protocol):
    def apply(self, memories: Sequence[Memory], removed: Sequence[int] = (), actor: str = "") -> None: ...


class _Journal(Protocol):
    def close_in(self, con: Any, actor: str, review_id: str, status: str, result_uri: str | None) -> None: ...


class MemoryWrites(Protocol):
    """What ``apply_merge`` uses of the store's ``Writes`` (store/writes.py, which imports this module)."""

    @property
    def mirrors(self) -> _Mirrors: ...

    @property
    def journal(self) -> _Journal: ...

    def put_many_in(
        self, items: Sequence[NewMemory], then: Callable[[Any, list[PutResult]], None] | None = None
    ) -> list[PutResult]: ...

    def update_in(self, con: Any, actor: str, memory_id: str, op: str, changes: dict[str, object]) -> Memory: ...


def merge_args(item: NewMemory | None, by: str | None) -> None:
    if (item is None) == (by is None):
        raise InvalidInput("a merge group is written with either a merged item or the uri of the memory kept")


def gone(actor: str, missing: Sequence[str]) -> MemoryNotFound:
    return MemoryNotFound(
        f"memories {sorted(missing)} of actor {actor!r} were forgotten or superseded since the merge was "
        "proposed; nothing of this merge group was written (run merge again)"
    )


def _aware(value: datetime) -> datetime:
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def _now() -> datetime:
    return naive_utc(datetime.now(timezone.utc))


def forget_in(con: Any, actor: str, gone: Sequence[Memory]) -> None:
    """Inside the delete's transaction: every association link of the forgotten memories."""
    labels = [m.label for m in gone]
    (in_a, value), (in_b, _) = one_of("a", labels), one_of("b", labels)
    con.execute(f"DELETE FROM associations WHERE actor = ? AND ({in_a} OR {in_b})", [actor, value, value])


class DuckConsolidation:
    """``ConsolidationStore`` on the DuckDB file (``DuckDBStore.consolidation``)."""

    def __init__(self, db: DuckDb, writes: MemoryWrites) -> None:
        self.db = db
        self.writes = writes
        # actor -> its latest version: every page pins it, and only this process writes the file
        self._latest: dict[str, ContinuityVersion | None] = {}
        self._generation = 0  # bumped by each save: a read that raced one is not cached

    # -- reads ------------------------------------------------------------------------------
    def state(self, actor: str) -> ConsolidationState:
        rows = self.db.fetch(
            "SELECT section_schema, citations_seen, last_label, wraps, baton FROM consolidation_state WHERE actor = ?",
            [actor],
        )
        opened = self.db.fetch(f"SELECT {WRAP_COLUMNS} FROM wraps WHERE actor = ? AND status = 'open'", [actor])
        open_wrap = wrap_of(opened[0]) if opened else None
        if not rows:
            return ConsolidationState(None, False, 0, 0, open_wrap, None)
        schema, seen, last_label, wraps, baton = rows[0]
        return ConsolidationState(schema, bool(seen), int(last_label), int(wraps), open_wrap, baton)

    def continuity(self, actor: str, limit: int = 1) -> list[ContinuityVersion]:
        if limit == 1 and actor in self._latest:
            cached = self._latest[actor]
            return [] if cached is None else [cached]
        generation = self._generation
        rows = self.db.fetch(
            "SELECT version, wrap, text, saved_at FROM continuity WHERE actor = ? ORDER BY version DESC LIMIT ?",
            [actor, int(limit)],
        )
        found = [ContinuityVersion(int(r[0]), int(r[1]), r[2], _aware(r[3])) for r in rows]
        if limit == 1 and generation == self._generation:
            self._latest[actor] = found[0] if found else None
        return found

    def wraps(self, actor: str, limit: int = 20) -> list[WrapRecord]:
        rows = self.db.fetch(
            f"SELECT {WRAP_COLUMNS} FROM wraps WHERE actor = ? ORDER BY number DESC LIMIT ?", [actor, int(limit)]
        )
        return [wrap_of(r) for r in rows]

    def patterns(self, actor: str) -> list[PatternRecord]:
        rows = self.db.fetch(f"SELECT {PATTERN_COLUMNS} FROM pattern_history WHERE actor = ? ORDER BY key", [actor])
        return [pattern_of(r) for r in rows]

    def links(self, actor: str, labels: Sequence[int] | None = None) -> list[AssociationLink]:
        if labels is None:
            rows = self.db.fetch(
                f"SELECT {LINK_COLUMNS} FROM associations WHERE actor = ? ORDER BY strength DESC, a, b", [actor]
            )
        else:
            wanted = [int(x) for x in labels]
            rows = self.db.fetch(
                f"SELECT {LINK_COLUMNS} FROM associations WHERE actor = ?"
                " AND (a IN (SELECT unnest(?)) OR b IN (SELECT unnest(?))) ORDER BY strength DESC, a, b",
                [actor, wanted, wanted],
            )
        return [link_of(r) for r in rows]

    def live_sessions(self, actor: str, since: datetime) -> list[str]:
        rows = self.db.fetch(
            "SELECT session_id FROM wrap_sessions WHERE actor = ? AND seen_at >= ? ORDER BY session_id",
            [actor, naive_utc(since)],
        )
        return [r[0] for r in rows]

    # -- writes -----------------------------------------------------------------------------
    def _ensure_state(self, con: Any, actor: str) -> None:
        con.execute(
            "INSERT INTO consolidation_state VALUES (?, NULL, FALSE, 0, 0, NULL) ON CONFLICT DO NOTHING", [actor]
        )

    def open_wrap(self, actor: str, session_id: str | None, limit: int) -> WrapRecord | None:
        with self.db.tx() as con:
            found = con.execute(
                f"SELECT {WRAP_COLUMNS} FROM wraps WHERE actor = ? AND status = 'open'", [actor]
            ).fetchall()
            if found:
                return wrap_of(found[0])
            self._ensure_state(con, actor)
            last_label, wraps = con.execute(
                "SELECT last_label, wraps FROM consolidation_state WHERE actor = ?", [actor]
            ).fetchone()
            labels = [
                int(r[0])
                for r in con.execute(
                    "SELECT label FROM memories WHERE actor = ? AND label > ? ORDER BY label LIMIT ?",
                    [actor, int(last_label), int(limit)],
                ).fetchall()
            ]
            if not labels:
                return None
            number = int(wraps) + 1
            opened = _now()
            con.execute(
                "INSERT INTO wraps VALUES (?, ?, 'open', ?, NULL, ?, ?, '{}')",
                [actor, number, opened, labels, session_id],
            )
            self.db.audit(con, [(actor, "wrap.prepare", wrap_uri(actor, number), content_hash(json.dumps(labels)))])
        return WrapRecord(actor, number, "open", _aware(opened), None, tuple(labels), session_id, {})

    def commit_wrap(self, actor: str, commit: WrapCommit) -> int:
        with self.db.tx() as con:
            found = con.execute(
                "SELECT labels FROM wraps WHERE actor = ? AND number = ? AND status = 'open'", [actor, commit.number]
            ).fetchall()
            if not found:
                raise WrapNotOpen(
                    f"wrap {commit.number} of actor {actor!r} is not open (already saved, or never prepared); "
                    "call prepare_wrap() for a new wrap before saving again"
                )
            labels = [int(x) for x in found[0][0]]
            now = _now()
            row = con.execute("SELECT coalesce(max(version), 0) FROM continuity WHERE actor = ?", [actor]).fetchone()
            version = int(row[0]) + 1
            con.execute(
                "INSERT INTO continuity VALUES (?, ?, ?, ?, ?)", [actor, version, commit.number, commit.text, now]
            )
            con.execute(
                "UPDATE wraps SET status = 'saved', saved_at = ?, metrics = ? WHERE actor = ? AND number = ?",
                [now, json.dumps(dict(commit.metrics), sort_keys=True), actor, commit.number],
            )
            con.execute(
                "UPDATE consolidation_state SET citations_seen = ?, last_label = greatest(last_label, ?),"
                " wraps = ? WHERE actor = ?",
                [commit.citations_seen, max(labels, default=0), commit.number, actor],
            )
            self._replace_patterns(con, actor, commit.patterns)
            self._replace_links(con, actor, commit.links)
            self.db.audit(
                con,
                [
                    (actor, "wrap.save", wrap_uri(actor, commit.number), content_hash(commit.text)),
                    *((actor, op, uri, chash) for op, uri, chash in commit.audit),
                ],
            )
        self._generation += 1
        self._latest.pop(actor, None)  # after the commit: the next read sees the new version
        return version

    def _replace_patterns(self, con: Any, actor: str, patterns: Sequence[PatternRecord]) -> None:
        con.execute("DELETE FROM pattern_history WHERE actor = ?", [actor])
        for p in patterns:
            con.execute(
                "INSERT INTO pattern_history VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
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

    def _replace_links(self, con: Any, actor: str, links: Sequence[AssociationLink]) -> None:
        con.execute("DELETE FROM associations WHERE actor = ?", [actor])
        if not links:
            return
        live = {
            int(r[0])
            for r in con.execute(
                "SELECT label FROM memories WHERE actor = ? AND label IN (SELECT unnest(?))",
                [actor, sorted({x for link in links for x in (link.a, link.b)})],
            ).fetchall()
        }
        for link in links:
            if link.a in live and link.b in live:  # a memory forgotten since the wrap read it keeps no link
                con.execute(
                    "INSERT INTO associations VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [actor, link.a, link.b, link.strength, link.last_wrap, link.affect_tag, link.affect_intensity],
                )

    def record_event(self, actor: str, op: str, uri: str, content_hash: str) -> None:
        with self.db.tx() as con:
            self.db.audit(con, [(actor, op, uri, content_hash)])

    def set_schema(self, actor: str, schema: str) -> None:
        with self.db.tx() as con:
            if con.execute("SELECT 1 FROM wraps WHERE actor = ? AND status = 'open'", [actor]).fetchall():
                raise ConsolidationError(
                    f"actor {actor!r} has an open wrap; save it (save_continuity) before changing the section schema"
                )
            self._ensure_state(con, actor)
            con.execute("UPDATE consolidation_state SET section_schema = ? WHERE actor = ?", [schema, actor])
            self.db.audit(con, [(actor, "wrap.schema", f"schema:{actor}", content_hash(schema))])

    def session_seen(self, actor: str, session_id: str, now: datetime) -> None:
        with self.db.tx() as con:
            con.execute(
                "INSERT INTO wrap_sessions VALUES (?, ?, ?) ON CONFLICT (actor, session_id)"
                " DO UPDATE SET seen_at = excluded.seen_at",
                [actor, session_id, naive_utc(now)],
            )

    def take_baton(self, actor: str, session_id: str) -> None:
        with self.db.tx() as con:
            self._ensure_state(con, actor)
            con.execute("UPDATE consolidation_state SET baton = ? WHERE actor = ?", [session_id, actor])
            self.db.audit(con, [(actor, "wrap.baton", f"session:{session_id}", content_hash(session_id))])

    # -- the consolidation lock (one LLM step per store at a time) -------------------------------
    def try_lock(self, name: str, holder: str, now: datetime, ttl_seconds: float) -> bool:
        """Take lock ``name`` for ``holder`` unless another holds it unexpired; whether we hold it now."""
        at = naive_utc(now)
        with self.db.tx() as con:  # the write lock serialises the read and the claim
            con.execute("DELETE FROM consolidation_locks WHERE name = ? AND expires_at <= ?", [name, at])
            held = con.execute("SELECT holder FROM consolidation_locks WHERE name = ?", [name]).fetchall()
            if held:
                return bool(held[0][0] == holder)
            con.execute(
                "INSERT INTO consolidation_locks VALUES (?, ?, ?, ?)",
                [name, holder, at, naive_utc(now + timedelta(seconds=ttl_seconds))],
            )
        return True

    def unlock(self, name: str, holder: str) -> None:
        with self.db.tx() as con:
            con.execute("DELETE FROM consolidation_locks WHERE name = ? AND holder = ?", [name, holder])

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
        changed: list[Memory] = []
        in_force: list[str] = []

        def then(con: Any, results: list[PutResult]) -> None:
            uri = results[0].memory.uri if results else str(by)
            keep = uri.rsplit("/", 1)[-1]
            wanted = sorted({*originals, keep})
            live = {
                r[0]
                for r in con.execute(
                    "SELECT id FROM memories WHERE actor = ? AND id IN (SELECT unnest(?)) AND superseded_by IS NULL",
                    [actor, wanted],
                ).fetchall()
            }
            if missing := [i for i in wanted if i not in live]:
                raise gone(actor, missing)
            for memory_id in originals:
                if memory_id != keep:  # the merged text may deduplicate onto one of its originals
                    changed.append(self.writes.update_in(con, actor, memory_id, "supersede", {"superseded_by": uri}))
            if review_id is not None:
                self.writes.journal.close_in(con, actor, review_id, "accepted", uri)
            in_force.append(uri)

        with self.db.write_lock:  # held to the mirrors' update: no reader sees the file ahead of them
            if item is not None:
                (put,) = self.writes.put_many_in([item], then=then)
                changed.append(put.memory)
            else:
                put = None
                with self.db.tx() as con:
                    then(con, [])
            self.writes.mirrors.apply(changed)
        return in_force[0], put
