"""The encoding gate (seed 000 "memory modes"): which model-made memories are stored, queued or dropped.

Whatever the mode, nothing an LLM (or an LLM consolidation step) wrote becomes an identity, a rule
or a constraint (the pinned, inviolable material) without a human accepting it in the review
queue (issue 21 item 9): those are queued even in autopilot and at any confidence.
"""

from __future__ import annotations

from mempager.config import PagerConfig
from mempager.protocols import Store
from mempager.types import MemoryType, NewMemory, Source

HUMAN_ACCEPT_ONLY = frozenset({MemoryType.IDENTITY, MemoryType.RULE, MemoryType.CONSTRAINT})


class EncodingGate:
    """User-stated and observed memories are trusted. LLM- and consolidation-sourced ones are
    saved in autopilot, queued for review in copilot unless confident, dropped in off."""

    def __init__(self, store: Store, actor: str, config: PagerConfig) -> None:
        self.store = store
        self.actor = actor
        self.config = config

    def hold(self, item: NewMemory) -> str | None:
        """None when ``item`` may be stored; else the ``review://`` / ``gate://`` uri saying why not."""
        if item.source not in (Source.LLM, Source.CONSOLIDATION):
            return None
        if self.config.memory_mode == "off":
            return f"gate://{self.actor}/off"
        if item.type not in HUMAN_ACCEPT_ONLY and (
            self.config.memory_mode == "autopilot" or item.confidence >= self.config.copilot_min_confidence
        ):
            return None
        # every field, so accepting it later stores the memory that was asked for (ReviewQueue.decide)
        payload = {
            "type": item.type.value,
            "text": item.text,
            "source": item.source.value,
            "scope": item.scope.value,
            "confidence": item.confidence,
            "importance": item.importance,
            "strength": item.strength,
            "tags": list(item.tags),
            "metadata": dict(item.metadata),
            "created_at": None if item.created_at is None else item.created_at.isoformat(),
        }
        return f"review://{self.actor}/{self.store.review_add(self.actor, 'memory', payload)}"
