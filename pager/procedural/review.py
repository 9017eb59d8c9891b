"""The review queue: memories the encoding gate held back and proposed inversions, waiting for a human.

Nothing here deletes a memory: accepting an inversion deprecates the original (metadata), and
removal is always an explicit ``forget``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mempager.config import PagerConfig
from mempager.errors import InvalidInput, MemoryNotFound
from mempager.patterns import Pattern, PatternSpec
from mempager.procedural import lifecycle
from mempager.protocols import Store
from mempager.store.journal import Deprecate, ReviewItem
from mempager.types import MemoryType, NewMemory, PutResult, Scope, Source
from mempager.validate import parse_time, parse_uri

log = logging.getLogger("mempager.procedural")


class ReviewQueue:
    def __init__(
        self, store: Store, actor: str, config: PagerConfig, *, after_write: Callable[[Sequence[PutResult]], None]
    ) -> None:
        self.store = store
        self.actor = actor
        self.config = config
        self.after_write = after_write

    def review(self, status: str | None = "pending") -> list[ReviewItem]:
        return self.store.review_list(self.actor, status)

    def propose_inversion(self, pattern: Pattern) -> int:
        """Queue the inversion of a pattern that fails more than it works (once); 1 when queued."""
        if pattern.anti_pattern or not lifecycle.inversion_due(pattern.successes, pattern.failures, self.config):
            return 0
        if self.store.review_find(self.actor, "inversion", "uri", pattern.uri) is not None:
            return 0
        self.store.review_add(self.actor, "inversion", {"uri": pattern.uri, "text": lifecycle.inversion_text(pattern)})
        log.info(
            "proposed inversion of %s (%d failures vs %d successes)", pattern.uri, pattern.failures, pattern.successes
        )
        return 1

    def decide(self, review_id: str, accept: bool) -> str | None:
        """Accept or reject a queued item; returns the uri written when accepted.

        Accepting writes the memory (or the anti-pattern, deprecating the original) and closes the
        item in one store transaction: a crash leaves the item pending with nothing written, so
        deciding again cannot duplicate. A decided item keeps no text (see ``store.journal``).
        """
        item = self.store.review_get(self.actor, review_id)
        if item.status != "pending":
            raise InvalidInput(f"review item {review_id!r} was already {item.status}")
        if accept and item.kind == "merge":  # an LLM's merge proposal (consolidation/merge.py)
            from mempager.consolidation.merge import accept_merge  # lazily: pydantic stays out of the import

            return accept_merge(self.store, self.actor, review_id, item.payload, self.after_write)
        if not accept or item.kind not in ("memory", "inversion"):
            self.store.review_close(self.actor, review_id, "accepted" if accept else "rejected", None)
            return None
        deprecate = None
        if item.kind == "inversion":
            new, deprecate = self._inversion_plan(item)
        else:
            new = queued_memory(self.actor, item.payload)
        result = self.store.review_accept(self.actor, review_id, new, deprecate)
        self.after_write([result])
        return result.memory.uri

    def _inversion_plan(self, item: ReviewItem) -> tuple[NewMemory, Deprecate]:
        """The anti-pattern to write and how to deprecate the pattern it inverts."""
        _, _, memory_id = parse_uri(item.payload["uri"])
        original = self.store.get(self.actor, memory_id)
        if original is None:
            raise MemoryNotFound(f"the pattern {item.payload['uri']} to invert no longer exists")
        pattern = Pattern.from_memory(original)
        spec = PatternSpec(
            name=str(item.payload["text"]),
            trigger=pattern.spec.trigger,
            steps=pattern.spec.steps,
            gotchas=pattern.spec.gotchas,
        )
        new = NewMemory(
            actor=self.actor,
            type=MemoryType.PATTERN,
            text=spec.encode(),
            source=Source.CONSOLIDATION,
            confidence=0.5,
            metadata={"anti_pattern": True, "inverted_from": pattern.uri, "coverage": 0, "maturity": "nascent"},
            dedup_key=spec.dedup_key(),
        )
        return new, (memory_id, {"confidence": 0.0, "metadata": {**original.metadata, "status": "deprecated"}})


def queued_memory(actor: str, payload: Mapping[str, Any]) -> NewMemory:
    """The memory the encoding gate held back, with every field it was given."""
    created = payload.get("created_at")
    return NewMemory(
        actor=actor,
        type=MemoryType(payload["type"]),
        text=payload["text"],
        source=Source(payload["source"]),
        scope=Scope(payload.get("scope", Scope.GLOBAL.value)),
        confidence=float(payload["confidence"]),
        importance=float(payload["importance"]),
        strength=float(payload.get("strength", 0.5)),
        created_at=None if created is None else parse_time(created, "created_at"),
        tags=tuple(payload.get("tags", ())),
        metadata=dict(payload.get("metadata", {})),
        dedup_key=payload.get("dedup_key"),  # patterns dedup by name (PatternSpec.dedup_key), not text
    )
