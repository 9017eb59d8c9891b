"""Procedural patterns: a structured spec encoded onto the memory's flat text field.

Encoded as ``mempager.pattern.v1:`` + canonical JSON. A legacy plain statement (no prefix)
decodes as a spec with one freeform step, so older stores keep working.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mempager.errors import InvalidInput
from mempager.types import Memory
from mempager.validate import content_hash, normalize

PREFIX = "mempager.pattern.v1:"
_LIST_FIELDS = ("preconditions", "steps", "gotchas", "success_criteria")


@dataclass(frozen=True, slots=True, kw_only=True)
class PatternSpec:
    name: str = ""
    trigger: str = ""
    preconditions: Sequence[str] = ()
    steps: Sequence[str] = ()
    gotchas: Sequence[str] = ()
    success_criteria: Sequence[str] = ()

    def __post_init__(self) -> None:
        for name in ("name", "trigger"):
            if not isinstance(getattr(self, name), str):
                raise InvalidInput(f"PatternSpec.{name} must be a str, got {getattr(self, name)!r}")
        for name in _LIST_FIELDS:
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise InvalidInput(
                    f"PatternSpec.{name} must be a list of strings, got {value!r}; wrap a single step in a list"
                )
            object.__setattr__(self, name, tuple(value))
        if not (self.name.strip() or self.trigger.strip() or any(s.strip() for s in self.steps)):
            raise InvalidInput("a PatternSpec needs at least a name, a trigger or one step")

    @property
    def label(self) -> str:
        """Human label: the name, else the trigger, else the first step."""
        return (self.name or self.trigger or self.steps[0]).strip()

    def dedup_key(self) -> str:
        """Patterns dedup by name → trigger → steps (the first that is present)."""
        if self.name.strip():
            basis = "name:" + normalize(self.name)
        elif self.trigger.strip():
            basis = "trigger:" + normalize(self.trigger)
        else:
            basis = "steps:" + "\x1f".join(normalize(s) for s in self.steps)
        return content_hash("pattern\x1f" + basis)

    def merged_with(self, newer: PatternSpec) -> PatternSpec:
        """The newer distillation wins field by field; fields it leaves empty keep what we knew."""
        return PatternSpec(
            name=newer.name or self.name,
            trigger=newer.trigger or self.trigger,
            **{name: getattr(newer, name) or getattr(self, name) for name in _LIST_FIELDS},
        )

    def encode(self) -> str:
        body = {
            "name": self.name,
            "trigger": self.trigger,
            **{name: list(getattr(self, name)) for name in _LIST_FIELDS},
        }
        return PREFIX + json.dumps(body, ensure_ascii=False, sort_keys=True, separators=(",", ":"))

    @classmethod
    def decode(cls, text: str) -> PatternSpec:
        if not text.startswith(PREFIX):
            return cls(name=text.strip()[:80], steps=(text.strip(),))
        try:
            body = json.loads(text[len(PREFIX) :])
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"stored pattern is not valid {PREFIX} JSON: {exc}") from exc
        if not isinstance(body, Mapping):
            raise InvalidInput(f"stored pattern body must be a JSON object, got {type(body).__name__}")
        return cls(
            name=str(body.get("name", "")),
            trigger=str(body.get("trigger", "")),
            **{name: tuple(body.get(name, ())) for name in _LIST_FIELDS},
        )

    def render(self) -> str:
        """Readable form used in pages and for embedding (not the stored encoding)."""
        lines = [f"Pattern: {self.label}"]
        if self.trigger:
            lines.append(f"When: {self.trigger}")
        for title, items in (
            ("Check first", self.preconditions),
            ("Steps", self.steps),
            ("Gotchas", self.gotchas),
            ("Done when", self.success_criteria),
        ):
            if items:
                lines.append(f"{title}:")
                lines.extend(f"  {i}. {item}" for i, item in enumerate(items, 1))
        return "\n".join(lines)

    def searchable_text(self) -> str:
        """What the lanes match against: the words, not the JSON punctuation."""
        return " ".join(
            [self.name, self.trigger, *self.preconditions, *self.steps, *self.gotchas, *self.success_criteria]
        ).strip()


MATURITIES = ("nascent", "established", "proven")


@dataclass(frozen=True, slots=True)
class Pattern:
    """A procedural pattern with its lifecycle state (kept in the memory's metadata)."""

    uri: str
    spec: PatternSpec
    strength: float
    confidence: float  # base confidence: moved only by feedback, never by time
    coverage: int  # successes observed (reinforcements + successful feedback)
    derived_from: tuple[str, ...]
    memory: Memory = field(repr=False)
    failures: int = 0
    applications: int = 0
    maturity: str = "nascent"
    status: str = "active"  # active | deprecated
    anti_pattern: bool = False
    last_applied_at: str | None = None
    decayed_confidence: float = 0.0  # confidence × 0.5^(days since last applied / half-life), at read
    note: str | None = None  # e.g. how a misspelt label was resolved
    stage: str = "candidate"  # lifecycle.stage() as of the read (Pager.patterns sets it)

    @property
    def successes(self) -> int:
        return self.coverage

    @property
    def label(self) -> str:
        return self.spec.label

    @classmethod
    def from_memory(cls, memory: Memory, decayed: float | None = None) -> Pattern:
        meta: Mapping[str, Any] = memory.metadata
        derived: Sequence[str] = meta.get("derived_from", ())
        return cls(
            uri=memory.uri,
            spec=PatternSpec.decode(memory.text),
            strength=memory.strength,
            confidence=memory.confidence,
            coverage=int(meta.get("coverage", 0)),
            derived_from=tuple(derived),
            memory=memory,
            failures=int(meta.get("failures", 0)),
            applications=int(meta.get("applications", meta.get("coverage", 0))),
            maturity=str(meta.get("maturity", "nascent")),
            status=str(meta.get("status", "active")),
            anti_pattern=bool(meta.get("anti_pattern", False)),
            last_applied_at=meta.get("last_applied_at"),
            decayed_confidence=memory.confidence if decayed is None else decayed,
        )

    def menu_line(self) -> str:
        """About 50 tokens: the label and when to use it."""
        when = self.spec.trigger or (self.spec.steps[0] if self.spec.steps else "")
        line = f"- `{self.label}` — {when}"
        return line if len(line) <= 200 else line[:197] + "…"


def text_for_index(text: str) -> str:
    """The words an index should see for a stored text (patterns are stored as JSON)."""
    if text.startswith(PREFIX):
        try:
            return PatternSpec.decode(text).searchable_text()
        except InvalidInput as exc:
            # A damaged pattern is still findable by its raw words; say so once per call.
            logging.getLogger("mempager").warning("indexing damaged pattern by raw text: %s", exc)
            return text
    return text
