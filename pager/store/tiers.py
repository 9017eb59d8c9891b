"""The DuckDB side of the crystallized tier and of spores (``TierStore``, store/tier_types.py).

Each write is one transaction under the store's write lock with its audit entries (content
hashes, never text) inside it. A delete only deletes: the bytes leave the file in the erasure
pass that rewrites it (``Eraser``), which the caller asks for (see paging/spores.py).

Every page reads the crystals and the open spores, and this process is the file's only writer,
so reads are kept in memory until the next tier write here (a generation count: a read that
raced a write is not kept). Measured: two DuckDB queries were ~1.5 ms of a 3 ms page at 100k.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from typing import Any

from mempager.errors import InvalidInput, MemoryNotFound
from mempager.store.base import DuckDb, naive_utc
from mempager.store.journal import Journal
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


def _naive(value: datetime | None) -> datetime | None:
    return None if value is None else naive_utc(value)


class DuckTiers:
    """``TierStore`` on the DuckDB file (``DuckDBStore.tiers``)."""

    def __init__(self, db: DuckDb, journal: Journal) -> None:
        self.db = db
        self.journal = journal  # closes an accepted review item inside the crystal's transaction
        self._kept: dict[tuple[str, str, str | None], list[Any]] = {}
        self._generation = 0
        self._guard = threading.Lock()

    def _read(self, key: tuple[str, str, str | None], read: Callable[[], list[Any]]) -> list[Any]:
        with self._guard:
            kept, generation = self._kept.get(key), self._generation
        if kept is not None:
            return list(kept)
        fresh = read()
        with self._guard:
            if generation == self._generation:  # no tier write began or ended meanwhile
                self._kept[key] = fresh
        return list(fresh)

    @contextmanager
    def _write(self) -> Iterator[Any]:
        """A tier write's transaction; what was kept is dropped before and after it (even if it fails)."""
        self._forget_kept()
        try:
            with self.db.tx() as con:
                yield con
        finally:
            self._forget_kept()

    def _forget_kept(self) -> None:
        with self._guard:
            self._generation += 1
            self._kept.clear()

    # -- crystals -------------------------------------------------------------------------------
    def crystals(self, actor: str) -> list[Crystal]:
        def read() -> list[Any]:
            sql = f"SELECT {CRYSTAL_COLUMNS} FROM crystals WHERE actor = ? ORDER BY created_at, id"
            return [crystal_of(r) for r in self.db.fetch(sql, [actor])]

        return self._read(("crystal", actor, None), read)

    def add_crystal(self, crystal: Crystal, review_id: str | None = None) -> Crystal:
        c = crystal
        with self._write() as con:  # the write lock serialises the check and the insert
            if con.execute("SELECT 1 FROM crystals WHERE actor = ? AND key = ?", [c.actor, c.key]).fetchall():
                raise InvalidInput(f"the pattern {c.name!r} is crystallized already; `mempager crystal list` shows it")
            con.execute(
                "INSERT INTO crystals VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [c.actor, c.id, c.key, c.name, c.body, evidence_json(c.evidence), c.source, naive_utc(c.created_at)],
            )
            if review_id is not None:
                self.journal.close_in(con, c.actor, review_id, "accepted", c.uri)
            self.db.audit(con, [(c.actor, "crystallize", c.uri, content_hash(f"{c.name}\n{c.body}"))])
        return c

    def delete_crystals(self, actor: str, ids: Sequence[str] | None) -> list[Crystal]:
        with self._write() as con:
            rows = con.execute(
                f"SELECT {CRYSTAL_COLUMNS} FROM crystals WHERE actor = ? ORDER BY id", [actor]
            ).fetchall()
            wanted = None if ids is None else set(ids)
            gone = [crystal_of(r) for r in rows if wanted is None or r[1] in wanted]
            if gone:
                con.execute(
                    "DELETE FROM crystals WHERE actor = ? AND id IN (SELECT unnest(?))", [actor, [c.id for c in gone]]
                )
                self.db.audit(con, [(actor, "forget", c.uri, content_hash(f"{c.name}\n{c.body}")) for c in gone])
        return gone

    # -- spores ---------------------------------------------------------------------------------
    def spores(self, actor: str, status: str | None = None) -> list[Spore]:
        where, params = "actor = ?", [actor]
        if status is not None:
            where += " AND status = ?"
            params.append(status)

        def read() -> list[Any]:
            sql = f"SELECT {SPORE_COLUMNS} FROM spores WHERE {where} ORDER BY created_at, id"
            return [spore_of(r) for r in self.db.fetch(sql, params)]

        return self._read(("spore", actor, status), read)

    def add_spore(self, spore: Spore) -> Spore:
        s = spore
        with self._write() as con:
            con.execute(
                "INSERT INTO spores VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [s.actor, s.id, s.text, s.cue, _naive(s.due_at), s.status, naive_utc(s.created_at), _naive(s.done_at)],
            )
            self.db.audit(con, [(s.actor, "spore", s.uri, content_hash(f"{s.text}\n{s.cue or ''}"))])
        return s

    def complete_spore(self, actor: str, spore_id: str, when: datetime) -> Spore:
        with self._write() as con:
            row = _one(con, actor, spore_id)
            if row.status == "open":
                con.execute(
                    "UPDATE spores SET status = 'done', done_at = ? WHERE actor = ? AND id = ?",
                    [naive_utc(when), actor, spore_id],
                )
                self.db.audit(con, [(actor, "spore.done", row.uri, content_hash(row.text))])
                row = replace(row, status="done", done_at=to_utc(when))
        return row

    def delete_spores(self, actor: str, ids: Sequence[str] | None, op: str = "forget") -> list[Spore]:
        with self._write() as con:
            rows = con.execute(f"SELECT {SPORE_COLUMNS} FROM spores WHERE actor = ? ORDER BY id", [actor]).fetchall()
            wanted = None if ids is None else set(ids)
            gone = [spore_of(r) for r in rows if wanted is None or r[1] in wanted]
            if gone:
                con.execute(
                    "DELETE FROM spores WHERE actor = ? AND id IN (SELECT unnest(?))", [actor, [s.id for s in gone]]
                )
                self.db.audit(con, [(actor, op, s.uri, content_hash(f"{s.text}\n{s.cue or ''}")) for s in gone])
        return gone

    # -- import ---------------------------------------------------------------------------------
    def import_tiers(self, crystals: Sequence[Crystal], spores: Sequence[Spore]) -> tuple[list[Crystal], list[Spore]]:
        added_c: list[Crystal] = []
        added_s: list[Spore] = []
        with self._write() as con:  # the write lock: nothing can insert between a check and its insert
            for c in crystals:
                if con.execute(
                    "SELECT 1 FROM crystals WHERE actor = ? AND (id = ? OR key = ?)", [c.actor, c.id, c.key]
                ).fetchall():
                    continue
                con.execute(
                    "INSERT INTO crystals VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        c.actor,
                        c.id,
                        c.key,
                        c.name,
                        c.body,
                        evidence_json(c.evidence),
                        c.source,
                        naive_utc(c.created_at),
                    ],
                )
                added_c.append(c)
            for s in spores:
                if con.execute("SELECT 1 FROM spores WHERE actor = ? AND id = ?", [s.actor, s.id]).fetchall():
                    continue
                con.execute(
                    "INSERT INTO spores VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        s.actor,
                        s.id,
                        s.text,
                        s.cue,
                        _naive(s.due_at),
                        s.status,
                        naive_utc(s.created_at),
                        _naive(s.done_at),
                    ],
                )
                added_s.append(s)
            rows = [(c.actor, "import", c.uri, content_hash(f"{c.name}\n{c.body}")) for c in added_c]
            rows += [(s.actor, "import", s.uri, content_hash(f"{s.text}\n{s.cue or ''}")) for s in added_s]
            if rows:
                self.db.audit(con, rows)
        return added_c, added_s


def _one(con: Any, actor: str, spore_id: str) -> Spore:
    row = con.execute(f"SELECT {SPORE_COLUMNS} FROM spores WHERE actor = ? AND id = ?", [actor, spore_id]).fetchone()
    if row is None:
        raise MemoryNotFound(f"no spore {spore_id!r} for actor {actor!r}; `mempager spore list --all` shows them")
    return spore_of(row)
