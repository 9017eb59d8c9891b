"""One item's audit history: a memory's, a crystal's or a spore's, by its uri."""

from __future__ import annotations

from collections.abc import Callable

from mempager.errors import MemoryNotFound
from mempager.protocols import Store
from mempager.types import AuditEntry
from mempager.validate import parse_uri

TIER_SCHEMES = ("crystal://", "spore://")


def history(store: Store, actor: str, uri: str) -> list[AuditEntry]:
    """Every audit event of the item at ``uri`` (remember, reinforce, update, feedback, crystallize,
    spore, spore.done, forget...), oldest first.

    Entries hold content hashes, never text: a forgotten item's history outlives it without
    keeping its words. Another actor's uri is ``MemoryNotFound``, as in ``get``.
    """
    if isinstance(uri, str) and uri.startswith(TIER_SCHEMES):
        owner = uri.partition("://")[2].rpartition("/")[0]
    else:
        owner, _, _ = parse_uri(uri)
    if owner != actor:
        raise MemoryNotFound(f"no memory {uri} for actor {actor!r}")
    return [e for e in store.audit_entries(actor, None, 1_000_000_000) if e.uri == uri]


def for_actor(actor: str, callback: Callable[[AuditEntry], None]) -> Callable[[AuditEntry], None]:
    """An audit listener that hands ``callback`` only ``actor``'s entries (a store serves many actors)."""

    def listener(entry: AuditEntry) -> None:
        if entry.actor == actor:
            callback(entry)

    return listener
