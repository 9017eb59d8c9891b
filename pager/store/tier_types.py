"""The two sibling stores beside the memories (seed 003): crystals and spores, and their contract.

A *crystal* is a proven pattern held out of the always-loaded context: its one-line name is
listed in a bounded menu, its body comes into a page only on cue. A *spore* is an intention
(prospective memory): it is open until it is completed or dropped, and a completed spore is
cleaned after a retention period. Both are per actor, audited, and deleted for real (a hard
forget's erasure pass rewrites the files, so their bytes go too).

``TierStore`` is implemented by ``store/tiers.py`` (DuckDB) and ``store/pg/tiers.py``; a store
holds one as ``store.tiers`` (``tiers_of``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Protocol, cast

from mempager.errors import StoreError

CRYSTAL_COLUMNS = "actor, id, key, name, body, evidence, source, created_at"
SPORE_COLUMNS = "actor, id, text, cue, due_at, status, created_at, done_at"
SPORE_STATUSES = ("open", "done")
CRYSTAL_SOURCES = ("consolidation", "user")


@dataclass(frozen=True, slots=True)
class Evidence:
    """A memory a crystal was grounded in: its id (as cited) and its label (the association graph's key)."""

    id: str
    label: int


@dataclass(frozen=True, slots=True)
class Crystal:
    actor: str
    id: str
    key: str  # the pattern key (consolidation.lines.pattern_key): one crystal per pattern
    name: str  # the menu line
    body: str  # what a page shows on cue
    evidence: tuple[Evidence, ...]
    source: str  # "consolidation" (accepted from the review queue) | "user"
    created_at: datetime

    @property
    def uri(self) -> str:
        return f"crystal://{self.actor}/{self.id}"


@dataclass(frozen=True, slots=True)
class Spore:
    actor: str
    id: str
    text: str
    cue: str | None
    due_at: datetime | None
    status: str  # open | done
    created_at: datetime
    done_at: datetime | None

    @property
    def uri(self) -> str:
        return f"spore://{self.actor}/{self.id}"


def _aware(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def crystal_of(row: Sequence[Any]) -> Crystal:
    actor, cid, key, name, body, evidence, source, created = row
    found = tuple(Evidence(str(e["id"]), int(e["label"])) for e in json.loads(evidence))
    created_at = _aware(created)
    assert created_at is not None
    return Crystal(actor, cid, key, name, body, found, source, created_at)


def evidence_json(evidence: Sequence[Evidence]) -> str:
    return json.dumps([{"id": e.id, "label": e.label} for e in evidence])


def spore_of(row: Sequence[Any]) -> Spore:
    actor, sid, text, cue, due, status, created, done = row
    created_at = _aware(created)
    assert created_at is not None
    return Spore(actor, sid, text, cue, _aware(due), status, created_at, _aware(done))


class TierStore(Protocol):
    """Crystals and spores of each actor. Every write is one transaction with its audit entries."""

    def crystals(self, actor: str) -> list[Crystal]: ...

    def add_crystal(self, crystal: Crystal, review_id: str | None = None) -> Crystal:
        """Insert ``crystal`` (``InvalidInput`` when its pattern is crystallized already); with
        ``review_id``, close that pending review item as accepted in the same transaction."""
        ...

    def delete_crystals(self, actor: str, ids: Sequence[str] | None) -> list[Crystal]:
        """Delete these crystals (every one of the actor's when ``ids`` is None); the deleted."""
        ...

    def spores(self, actor: str, status: str | None = None) -> list[Spore]: ...

    def add_spore(self, spore: Spore) -> Spore: ...

    def complete_spore(self, actor: str, spore_id: str, when: datetime) -> Spore:
        """Mark an open spore done at ``when`` (``MemoryNotFound`` when the actor has no such spore)."""
        ...

    def delete_spores(self, actor: str, ids: Sequence[str] | None, op: str = "forget") -> list[Spore]:
        """Delete these spores (every one of the actor's when ``ids`` is None), audited as ``op``."""
        ...

    def import_tiers(self, crystals: Sequence[Crystal], spores: Sequence[Spore]) -> tuple[list[Crystal], list[Spore]]:
        """Insert crystals and spores as they are (ids, times, status, completion) in one transaction,
        each audited as ``import``; one the actor holds already (a crystal of the same id or pattern
        key, a spore of the same id), or inserted earlier in the call, is left out. The inserted."""
        ...


def tiers_of(store: object) -> TierStore:
    """The store's ``TierStore`` (a store of this mempager always has one)."""
    found = getattr(store, "tiers", None)
    if found is None:
        raise StoreError(
            f"{type(store).__name__} holds no crystals or spores; open the store with mempager.open() "
            "(DuckDB or PostgreSQL) to use them"
        )
    return cast(TierStore, found)
