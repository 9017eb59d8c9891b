"""Typed write-back helpers: what the agent learned, durable when the call returns."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from mempager.config import PagerConfig
from mempager.errors import InvalidInput, InvalidText
from mempager.writing.gcpause import collector_paused
from mempager.procedural.lifecycle import next_maturity
from mempager.procedural.patterns import Pattern, PatternSpec
from mempager.protocols import Store
from mempager.types import Memory, MemoryType, NewMemory, PutResult, Scope, Source
from mempager.validate import check_text, check_type, parse_time

OUTCOMES = ("success", "failure", "partial", "unknown")
GC_PAUSE_FROM = 1_000  # items in one remember_many from which the cyclic collector is paused
CONSTRAINT_STRENGTHS = ("hard", "soft")
_ITEM_KEYS = {
    "type", "text", "created_at", "tags", "metadata", "importance", "confidence", "strength",
    "source", "scope",
}


def _unit(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise InvalidInput(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)


def _tags(tags: Iterable[str]) -> tuple[str, ...]:
    if isinstance(tags, str):
        raise InvalidInput(f"tags must be a list of strings, got the string {tags!r}; wrap it: [{tags!r}]")
    out = tuple(tags)
    for tag in out:
        if not isinstance(tag, str) or not tag.strip() or "\x00" in tag or len(tag) > 200:
            raise InvalidInput(f"tag {tag!r} is not usable: non-empty text up to 200 characters")
        try:
            tag.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidText(f"tag {tag[:40]!r} holds a lone surrogate; clean it before storing") from None
    return out


METADATA_MAX_DEPTH = 32
METADATA_MAX_BYTES = 100_000


def check_metadata(value: object) -> dict[str, Any]:
    """Plain JSON with string keys, at most 32 levels deep and 100 KB: what every reader can load."""
    if not isinstance(value, Mapping):
        raise InvalidInput(f"metadata must be a mapping, got {type(value).__name__}")

    def walk(node: object, depth: int) -> None:
        if depth > METADATA_MAX_DEPTH:
            raise InvalidInput(f"metadata is nested deeper than {METADATA_MAX_DEPTH} levels; flatten it")
        if isinstance(node, Mapping):
            for key, item in node.items():
                if not isinstance(key, str):
                    raise InvalidInput(f"metadata keys must be strings, got {type(key).__name__} {key!r}")
                walk(item, depth + 1)
        elif isinstance(node, (list, tuple)):
            for item in node:
                walk(item, depth + 1)
        elif not (node is None or isinstance(node, (str, bool, int))
                  or (isinstance(node, float) and node == node and abs(node) != float("inf"))):
            raise InvalidInput(f"metadata values must be JSON (str, number, bool, null, list, object), "
                               f"got {type(node).__name__}")

    walk(value, 0)
    try:
        size = len(json.dumps(value, ensure_ascii=False).encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidText("metadata holds a lone surrogate; clean it before storing") from None
    if size > METADATA_MAX_BYTES:
        raise InvalidInput(f"metadata is {size:,} bytes, over {METADATA_MAX_BYTES:,}; store large data elsewhere")
    return dict(value)


class WriteBack:
    """Mixed into ``Pager``; needs ``store``, ``actor``, ``config`` and ``_after_write``."""

    store: Store
    actor: str
    config: PagerConfig
    clock: Callable[[], datetime]

    def _after_write(self, results: Sequence[PutResult]) -> None:  # pragma: no cover - Pager
        raise NotImplementedError

    def _new(self, type_: object, text: object, **fields: Any) -> NewMemory:
        mtype = check_type(type_)
        body = check_text(text, self.config.max_text_bytes)
        for name in ("importance", "confidence", "strength"):
            if name in fields:
                fields[name] = _unit(name, fields[name])
        if "tags" in fields:
            fields["tags"] = _tags(fields["tags"])
        if fields.get("created_at") is not None:
            fields["created_at"] = parse_time(fields["created_at"])
        if "metadata" in fields:
            fields["metadata"] = check_metadata(fields["metadata"])
        for name, enum in (("source", Source), ("scope", Scope)):
            if name in fields and not isinstance(fields[name], enum):
                try:
                    fields[name] = enum(fields[name])
                except ValueError:
                    allowed = ", ".join(e.value for e in enum)
                    raise InvalidInput(f"{name} must be one of {allowed}, got {fields[name]!r}") from None
        return NewMemory(actor=self.actor, type=mtype, text=body, **fields)

    def _gate(self, item: NewMemory) -> str | None:
        """The encoding gate (seed 000 "memory modes"): a uri when the item is held back.

        User-stated and observed memories are trusted. LLM- and consolidation-sourced ones are
        saved in autopilot, queued for review in copilot unless confident, dropped in off —
        the returned ``review://`` / ``gate://`` uri says which.
        """
        if item.source not in (Source.LLM, Source.CONSOLIDATION) or self.config.memory_mode == "autopilot":
            return None
        if self.config.memory_mode == "off":
            return f"gate://{self.actor}/off"
        if item.confidence >= self.config.copilot_min_confidence:
            return None
        # every field, so accepting it later stores the memory that was asked for (decide())
        payload = {"type": item.type.value, "text": item.text, "source": item.source.value,
                   "scope": item.scope.value, "confidence": item.confidence, "importance": item.importance,
                   "strength": item.strength, "tags": list(item.tags), "metadata": dict(item.metadata),
                   "created_at": None if item.created_at is None else item.created_at.isoformat()}
        return f"review://{self.actor}/{self.store.review_add(self.actor, 'memory', payload)}"

    def _put(self, item: NewMemory) -> str:
        held = self._gate(item)
        if held is not None:
            return held
        result = self.store.put(item)
        self._after_write([result])
        return result.memory.uri

    def remember(self, type: str | MemoryType, text: str, **fields: Any) -> str:
        """Store any memory type; returns its uri (an existing uri when deduplicated)."""
        return self._put(self._new(type, text, **fields))

    def remember_fact(self, text: str, **fields: Any) -> str:
        return self._put(self._new(MemoryType.FACT, text, **fields))

    def remember_user_fact(self, text: str, **fields: Any) -> str:
        """A durable fact about the user: pinned in the profile section, deduped by statement."""
        return self._put(self._new(MemoryType.PROFILE, text, **fields))

    def record_outcome(
        self, summary: str, outcome: str, intent_ref: str | None = None, *, turn: str | None = None,
        used: Sequence[str] | None = None, **fields: Any,
    ) -> str:
        """An episodic outcome. With ``turn``, success/failure also feeds back to the patterns
        that turn's page injected (once per turn; ``used`` narrows it as in ``feedback``)."""
        if outcome not in OUTCOMES:
            raise InvalidInput(f"outcome must be one of {', '.join(OUTCOMES)}, got {outcome!r}")
        body = check_text(summary, self.config.max_text_bytes, "summary")
        meta = {**dict(fields.pop("metadata", {}) or {}), "outcome": outcome, "intent_ref": intent_ref}
        text = f"{body.strip()} — outcome: {outcome}"
        item = self._new(MemoryType.OUTCOME, text, metadata={**meta, "turn": turn}, **fields)
        if used is not None and (turn is None or outcome not in ("success", "failure")):
            raise InvalidInput("used= names the procedures a turn followed: pass turn= and a success or failure")
        # feedback first: it refuses a bad ``used`` or a second, different verdict for the turn,
        # and a refusal must leave nothing written
        if turn is not None and outcome in ("success", "failure"):
            self.feedback(turn, outcome, used=used)
        return self._put(item)

    def feedback(self, turn: str, outcome: str, *, used: Sequence[str] | None = None) -> int:
        raise NotImplementedError  # pragma: no cover - ProceduralMixin

    def remember_many(self, items: Sequence[Mapping[str, Any]]) -> list[str]:
        """Batch write (columnar insert). Every item is validated before anything is stored.

        A batch of ``GC_PAUSE_FROM`` items or more runs with Python's cyclic collector paused
        (``pager.gcpause``): its many short-lived objects would otherwise trigger full collections.
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
                built.append(self._new(item.get("type", MemoryType.FACT), item.get("text"), **fields))
            except InvalidInput as exc:
                raise type(exc)(f"item {i}: {exc}") from exc
        held = [self._gate(item) for item in built]
        results = iter(self.store.put_many([item for item, h in zip(built, held, strict=True) if h is None]))
        stored = [next(results) for h in held if h is None]
        self._after_write(stored)
        by_position = iter(stored)
        return [h if h is not None else next(by_position).memory.uri for h in held]

    # -- pinned material --------------------------------------------------------------------
    def set_identity(self, text: str) -> str:
        return self._set_single(MemoryType.IDENTITY, text)

    def set_goal(self, text: str) -> str:
        return self._set_single(MemoryType.GOAL, text)

    def add_rule(self, text: str) -> str:
        return self._put(self._new(MemoryType.RULE, text, source=Source.USER, importance=1.0))

    def add_constraint(self, text: str, strength: str = "hard") -> str:
        if strength not in CONSTRAINT_STRENGTHS:
            raise InvalidInput(f"constraint strength must be 'hard' or 'soft', got {strength!r}")
        return self._put(
            self._new(MemoryType.CONSTRAINT, text, source=Source.USER, importance=1.0,
                      metadata={"strength": strength})
        )

    def _set_single(self, mtype: MemoryType, text: str) -> str:
        """Identity and goal: the newest one is in force; older ones are marked superseded."""
        result = self.store.put(self._new(mtype, text, source=Source.USER, importance=1.0))
        current = result.memory
        for other in self.store.query(self.actor, types=[mtype], limit=1_000_000):
            if other.label != current.label and other.superseded_by is None:
                self.store.update(self.actor, other.id, superseded_by=current.uri)
        if current.superseded_by is not None:  # set back to an earlier value
            self.store.update(self.actor, current.id, superseded_by=None)
        self._after_write([result])
        return current.uri

    # -- procedural -------------------------------------------------------------------------
    def write_pattern(
        self, spec: PatternSpec, strength: float = 0.5, coverage: int = 1, derived_from: Sequence[str] = ()
    ) -> str:
        if not isinstance(spec, PatternSpec):
            raise InvalidInput(f"spec must be a PatternSpec, got {type(spec).__name__}")
        if isinstance(coverage, bool) or not isinstance(coverage, int) or coverage < 0:
            raise InvalidInput(f"coverage must be an integer >= 0, got {coverage!r}")
        maturity = "nascent"
        for _ in range(2):  # an explicit state may already be established or proven
            maturity = next_maturity(maturity, strength, coverage, self.config)
        item = self._new(
            MemoryType.PATTERN, spec.encode(), strength=strength, confidence=strength,
            metadata={"coverage": coverage, "applications": coverage, "failures": 0, "maturity": maturity,
                      "derived_from": list(derived_from), "status": "active",
                      "last_applied_at": self.clock().isoformat() if coverage else None},
        )
        result = self.store.put(NewMemory(**{**_fields(item), "dedup_key": spec.dedup_key()}))
        if not result.created:  # an explicit write states the pattern as given
            self.store.update(
                self.actor, result.memory.id, text=spec.encode(), strength=item.strength,
                confidence=item.confidence, metadata=item.metadata,
            )
        self._after_write([result])
        return result.memory.uri

    def reinforce_pattern(self, spec: PatternSpec, derived_from: Sequence[str] = ()) -> str:
        """Another success: coverage +1, confidence +success_increment, strength nudged up.

        Dedup by name → trigger → steps; fields the new spec leaves empty keep their values.
        """
        if not isinstance(spec, PatternSpec):
            raise InvalidInput(f"spec must be a PatternSpec, got {type(spec).__name__}")
        existing = self._find_pattern(spec)
        if existing is None:
            return self.write_pattern(spec, strength=0.5, coverage=1, derived_from=derived_from)
        pattern = Pattern.from_memory(existing)
        if derived_from:
            meta = dict(existing.metadata)
            meta["derived_from"] = sorted(set(meta.get("derived_from", [])) | set(derived_from))
            pattern = Pattern.from_memory(self.store.update(self.actor, existing.id, metadata=meta))
        updated = self._apply_evidence(pattern, "success", spec)
        self._after_write([PutResult(updated.memory, created=False)])
        return updated.uri

    def learn_rule(self, text: str, derived_from: Sequence[str] = ()) -> str:
        """A rule that came from experience: a one-step pattern with the same lifecycle.

        (Rules the user states are inviolable and pinned: use ``add_rule`` for those.)
        """
        body = check_text(text, self.config.max_text_bytes, "rule")
        return self.reinforce_pattern(PatternSpec(name=body.strip()[:120], steps=[body.strip()]), derived_from)

    def _apply_evidence(self, pattern: Pattern, outcome: str, spec: PatternSpec | None = None) -> Pattern:
        raise NotImplementedError  # pragma: no cover - ProceduralMixin

    def _find_pattern(self, spec: PatternSpec) -> Memory | None:
        return self.store.find(self.actor, MemoryType.PATTERN, spec.dedup_key())


def _fields(item: NewMemory) -> dict[str, Any]:
    return {name: getattr(item, name) for name in NewMemory.__dataclass_fields__}
