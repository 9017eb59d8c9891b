"""Typed write-back: what the agent learned, durable when the call returns.

The workers are told after every write (``after_write``), so embedding starts at once; the
write itself never waits for a vector.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mempager.config import PagerConfig
from mempager.errors import InvalidInput
from mempager.protocols import Store
from mempager.types import MemoryType, NewMemory, PutResult, Source
from mempager.validate import check_text
from mempager.writing.build import MemoryBuilder
from mempager.writing.gate import EncodingGate
from mempager.writing.gcpause import collector_paused

OUTCOMES = ("success", "failure", "partial", "unknown")
GC_PAUSE_FROM = 1_000  # items in one remember_many from which the cyclic collector is paused
CONSTRAINT_STRENGTHS = ("hard", "soft")
_ITEM_KEYS = {
    "type",
    "text",
    "created_at",
    "tags",
    "metadata",
    "importance",
    "confidence",
    "strength",
    "source",
    "scope",
}
AfterWrite = Callable[[Sequence[PutResult]], None]
Feedback = Callable[..., int]  # Procedures.feedback(turn, outcome, *, used=None)


class Writer:
    """remember*, record_outcome and the pinned material (identity, goal, rules, constraints)."""

    def __init__(
        self,
        store: Store,
        actor: str,
        config: PagerConfig,
        *,
        build: MemoryBuilder,
        gate: EncodingGate,
        after_write: AfterWrite,
        feedback: Feedback,
    ) -> None:
        self.store = store
        self.actor = actor
        self.config = config
        self.build = build
        self.gate = gate
        self.after_write = after_write
        self.feedback = feedback

    def _put(self, item: NewMemory) -> str:
        held = self.gate.hold(item)
        if held is not None:
            return held
        result = self.store.put(item)
        self.after_write([result])
        return result.memory.uri

    def remember(self, type: str | MemoryType, text: str, **fields: Any) -> str:
        """Store any memory type; returns its uri (an existing uri when deduplicated)."""
        return self._put(self.build(type, text, **fields))

    def remember_fact(self, text: str, **fields: Any) -> str:
        return self._put(self.build(MemoryType.FACT, text, **fields))

    def remember_user_fact(self, text: str, **fields: Any) -> str:
        """A durable fact about the user: pinned in the profile section, deduped by statement."""
        return self._put(self.build(MemoryType.PROFILE, text, **fields))

    def record_outcome(
        self,
        summary: str,
        outcome: str,
        intent_ref: str | None = None,
        *,
        turn: str | None = None,
        used: Sequence[str] | None = None,
        **fields: Any,
    ) -> str:
        """An episodic outcome. With ``turn``, success/failure also feeds back to the patterns
        that turn's page injected (once per turn; ``used`` narrows it as in ``feedback``)."""
        if outcome not in OUTCOMES:
            raise InvalidInput(f"outcome must be one of {', '.join(OUTCOMES)}, got {outcome!r}")
        body = check_text(summary, self.config.max_text_bytes, "summary")
        meta = {**dict(fields.pop("metadata", {}) or {}), "outcome": outcome, "intent_ref": intent_ref}
        text = f"{body.strip()} — outcome: {outcome}"
        item = self.build(MemoryType.OUTCOME, text, metadata={**meta, "turn": turn}, **fields)
        if used is not None and (turn is None or outcome not in ("success", "failure")):
            raise InvalidInput("used= names the procedures a turn followed: pass turn= and a success or failure")
        # feedback first: it refuses a bad ``used`` or a second, different verdict for the turn,
        # and a refusal must leave nothing written
        if turn is not None and outcome in ("success", "failure"):
            self.feedback(turn, outcome, used=used)
        return self._put(item)

    def remember_many(self, items: Sequence[Mapping[str, Any]]) -> list[str]:
        """Batch write (columnar insert). Every item is validated before anything is stored.

        A batch of ``GC_PAUSE_FROM`` items or more runs with Python's cyclic collector paused
        (``mempager.writing.gcpause``): its many short-lived objects would otherwise trigger full collections.
        """
        if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
            raise InvalidInput("remember_many takes a list of dicts like {'type': 'event', 'text': '...'}")
        with collector_paused(len(items) >= GC_PAUSE_FROM):
            return self._remember_many(items)

    def _remember_many(self, items: Sequence[Mapping[str, Any]]) -> list[str]:
        built: list[NewMemory] = []
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise InvalidInput(f"item {i} must be a dict, got {type(item).__name__}")
            unknown = set(item) - _ITEM_KEYS
            if unknown:
                raise InvalidInput(f"item {i} has unknown keys {sorted(unknown)}; allowed: {sorted(_ITEM_KEYS)}")
            fields = {k: v for k, v in item.items() if k not in ("type", "text")}
            try:
                built.append(self.build(item.get("type", MemoryType.FACT), item.get("text"), **fields))
            except InvalidInput as exc:
                raise type(exc)(f"item {i}: {exc}") from exc
        held = [self.gate.hold(item) for item in built]
        results = iter(self.store.put_many([item for item, h in zip(built, held, strict=True) if h is None]))
        stored = [next(results) for h in held if h is None]
        self.after_write(stored)
        by_position = iter(stored)
        return [h if h is not None else next(by_position).memory.uri for h in held]

    # -- pinned material --------------------------------------------------------------------
    def set_identity(self, text: str) -> str:
        return self._set_single(MemoryType.IDENTITY, text)

    def set_goal(self, text: str) -> str:
        return self._set_single(MemoryType.GOAL, text)

    def add_rule(self, text: str) -> str:
        return self._put(self.build(MemoryType.RULE, text, source=Source.USER, importance=1.0))

    def add_constraint(self, text: str, strength: str = "hard") -> str:
        if strength not in CONSTRAINT_STRENGTHS:
            raise InvalidInput(f"constraint strength must be 'hard' or 'soft', got {strength!r}")
        return self._put(
            self.build(MemoryType.CONSTRAINT, text, source=Source.USER, importance=1.0, metadata={"strength": strength})
        )

    def _set_single(self, mtype: MemoryType, text: str) -> str:
        """Identity and goal: the newest one is in force; older ones are marked superseded."""
        result = self.store.put(self.build(mtype, text, source=Source.USER, importance=1.0))
        current = result.memory
        for other in self.store.query(self.actor, types=[mtype], limit=1_000_000):
            if other.label != current.label and other.superseded_by is None:
                self.store.update(self.actor, other.id, superseded_by=current.uri)
        if current.superseded_by is not None:  # set back to an earlier value
            self.store.update(self.actor, current.id, superseded_by=None)
        self.after_write([result])
        return current.uri
