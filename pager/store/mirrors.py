"""The store's in-process mirrors, one per loaded actor, kept in step with every committed change.

Writers call ``apply`` after their transaction commits (write lock held), so a mirror never
shows an uncommitted row; the change listeners (the pager's lanes) hear of the same change in
the same call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mempager.store.base import DuckDb
from mempager.store.mirror import ActorTable
from mempager.store.mirror_load import CODES, MIRROR_QUERY
from mempager.types import Memory

_SLICE = 131_072  # rows per query when loading a mirror

ChangeListener = Callable[[Sequence[Memory], Sequence[int]], None]


class Mirrors:
    def __init__(self, db: DuckDb) -> None:
        self.db = db
        self._tables: dict[str, ActorTable] = {}
        self._listeners: dict[str, list[ChangeListener]] = {}

    def table(self, actor: str) -> ActorTable:
        """The actor's in-process mirror, loaded from the file on first use."""
        table = self._tables.get(actor)
        if table is not None:
            return table
        with self.db.write_lock:  # no write can land between the load and the registration
            table = self._tables.get(actor)
            if table is None:
                con = self.db.con()
                count, low, high = con.execute(
                    "SELECT count(*), coalesce(min(label), 0), coalesce(max(label), -1) FROM memories WHERE actor = ?",
                    [actor],
                ).fetchone()
                table = ActorTable(actor, capacity=count + count // 8 + 1024)  # writes beyond: the table doubles
                # In label ranges of about _SLICE rows: DuckDB materialises a whole result before
                # handing it over, and one of a million rows left ~300 MB of freed, fragmented memory.
                step = max(1, -(-(high - low + 1) // max(1, -(-count // _SLICE))))
                for start in range(low, high + 1, step):
                    table.load(con.execute(MIRROR_QUERY, [*CODES, actor, start, start + step]).fetchnumpy())
                self._tables[actor] = table
                self.db.release_cache()  # the table is ours now: DuckDB need not keep its blocks
            return table

    def apply(self, memories: Sequence[Memory], removed: Sequence[int] = (), actor: str = "") -> None:
        """Apply committed changes to the loaded mirrors and tell the listeners (write lock held)."""
        by_actor: dict[str, list[Memory]] = {}
        for memory in memories:
            by_actor.setdefault(memory.actor, []).append(memory)
        if removed:
            by_actor.setdefault(actor, [])
        for who, changed in by_actor.items():
            table = self._tables.get(who)
            gone = removed if who == actor else ()
            if table is not None:
                table.upsert(changed)
                table.remove(gone)
            for listener in list(self._listeners.get(who, ())):
                listener(changed, gone)

    def add_listener(self, actor: str, listener: ChangeListener) -> None:
        with self.db.write_lock:
            self._listeners.setdefault(actor, []).append(listener)

    def remove_listener(self, actor: str, listener: ChangeListener) -> None:
        with self.db.write_lock:
            listeners = self._listeners.get(actor, [])
            if listener in listeners:
                listeners.remove(listener)
