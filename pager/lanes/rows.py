"""Memories as packing reads them: straight from the store's in-process mirror, no ``Memory`` built.

Packing a page fault reads ~16 candidates and shows ~8; building a whole ``Memory`` for each
(four datetimes, metadata JSON parsed, twenty fields set on a frozen dataclass) cost more than
fusing them. A ``Row`` carries only what packing reads, and makes its datetimes on first use,
exactly as the mirror makes a ``Memory``'s (``datetime.fromtimestamp(seconds, tz=UTC)`` of the
same float), so a page is the same whichever of the two it was packed from.

A store without a mirror that reads those fields alone (PostgreSQL's ``shown_rows``) is read
through that; any other store through ``get_many``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Protocol, runtime_checkable

from mempager.lanes.fusion import Shown
from mempager.protocols import Store
from mempager.types import MemoryType, Source


class Row:
    """One memory's packing fields (``fusion.Shown``), read from the mirror's columns."""

    __slots__ = ("label", "uri", "type", "text", "source", "_created", "superseded_by", "_until", "_at")

    def __init__(
        self,
        label: int,
        uri: str,
        type_: MemoryType,
        text: str,
        source: Source,
        created: float,
        superseded_by: str | None,
        until: float,
    ) -> None:
        self.label, self.uri, self.type, self.text, self.source = label, uri, type_, text, source
        self._created, self.superseded_by, self._until = created, superseded_by, until
        self._at: datetime | None = None

    @property
    def created_at(self) -> datetime:
        if self._at is None:
            self._at = datetime.fromtimestamp(self._created, tz=timezone.utc)
        return self._at

    @property
    def valid_until(self) -> datetime | None:
        until = self._until
        return None if until != until else datetime.fromtimestamp(until, tz=timezone.utc)  # NaN: no expiry


MakeRow = Callable[[int, str, MemoryType, str, Source, float, "str | None", float], Row]


class RowSource(Protocol):
    def rows_for(self, labels: Sequence[int], make: MakeRow) -> dict[int, Row]: ...


@runtime_checkable
class Mirrored(Protocol):
    """A store with an in-process mirror per actor (``DuckDBStore.table``)."""

    def table(self, actor: str) -> RowSource: ...


@runtime_checkable
class ReadsShown(Protocol):
    """A store that reads only what packing needs of its memories (``PostgresStore.shown_rows``)."""

    def shown_rows(self, actor: str, labels: Sequence[int]) -> Mapping[int, Shown]: ...


def hydrator(store: Store, actor: str) -> Callable[[Sequence[int]], Mapping[int, Shown]]:
    """``labels -> {label: what packing reads}`` for ``actor``: mirror rows when the store has a
    mirror, its packing rows when it reads those, whole memories otherwise. Labels not in the store
    are left out."""
    if isinstance(store, Mirrored):
        mirrored = store

        def from_mirror(labels: Sequence[int]) -> Mapping[int, Shown]:
            return mirrored.table(actor).rows_for(labels, Row)

        return from_mirror
    if isinstance(store, ReadsShown):
        shown = store

        def from_shown(labels: Sequence[int]) -> Mapping[int, Shown]:
            return shown.shown_rows(actor, labels)  # looked up per call: a benchmark may wrap it

        return from_shown

    def from_store(labels: Sequence[int]) -> Mapping[int, Shown]:
        return store.get_many(actor, labels)

    return from_store
