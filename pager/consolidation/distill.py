"""Distillation (seed 002 "procedural memory"): learnings that recur across diary entries become
playbook patterns.

The LLM sees the key learnings of the recent diary entries (consolidation/reflection.py) and
proposes rules, each citing the entries it recurs in (``source_entries``, at least two: one entry
is an anecdote, not a pattern). A proposal citing an unknown entry invalidates the whole reply.
Each rule becomes a one-step pattern at the lifecycle's starting values (nascent, confidence 0.5,
never applied) and waits in the review queue: a human accepts it into the playbook. A pattern
that exists already, or is queued already, is not proposed twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mempager.config import PagerConfig
from mempager.consolidation.reflection import DIARY_TAG
from mempager.consolidation.steps import OFF, LLMProvider, StepLock, line, mode_off, run_step
from mempager.errors import LLMReplyInvalid
from mempager.llm.base import ask
from mempager.patterns import PatternSpec
from mempager.protocols import Store
from mempager.types import Memory, MemoryType, Source

MIN_ENTRIES = 2
MAX_ENTRIES = 100  # the newest diary entries read per distillation
SYSTEM = (
    "You distil an agent's diary into playbook rules. Below are diary entries as `[id] (status) learnings`. "
    "Find learnings that recur in two or more entries and state each as one imperative rule; cite the ids "
    "of the entries it comes from in source_entries. Mark anti_pattern true for a rule that says what to "
    "avoid. Empty lists are a fine answer."
)


class PlaybookRule(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=1, max_length=400)
    source_entries: list[str] = Field(min_length=MIN_ENTRIES)
    tags: list[str] = []
    anti_pattern: bool = False


class Playbook(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rules: list[PlaybookRule] = []


@dataclass(frozen=True, slots=True)
class DistillResult:
    skipped: str | None  # why nothing was distilled (too few entries, LLM failure, lock, mode off)
    queued: tuple[str, ...] = ()  # review:// uris of the proposed patterns
    known: tuple[str, ...] = ()  # rules not proposed again: the pattern exists or is queued already
    entries: int = 0  # diary entries read

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Distiller:
    def __init__(
        self,
        store: Store,
        actor: str,
        config: PagerConfig,
        *,
        llm: LLMProvider,
        lock: StepLock,
        clock: Callable[[], datetime],
    ) -> None:
        self.store = store
        self.actor = actor
        self.config = config
        self.llm = llm
        self.lock = lock
        self.clock = clock

    def distill(self) -> DistillResult:
        if mode_off(self.config, "distill"):
            return DistillResult(OFF)
        return run_step("distill", self.lock, self._run, DistillResult)

    def _entries(self) -> list[Memory]:
        found = self.store.query(self.actor, types=[MemoryType.EVENT], tags=[DIARY_TAG], limit=MAX_ENTRIES)
        return [m for m in found if m.superseded_by is None and isinstance(m.metadata.get(DIARY_TAG), dict)]

    def _run(self) -> DistillResult:
        entries = self._entries()
        if len(entries) < MIN_ENTRIES:
            return DistillResult(
                f"{len(entries)} diary entries: distilling needs {MIN_ENTRIES} or more", entries=len(entries)
            )
        listing = "\n".join(
            f"[{m.id}] ({m.metadata[DIARY_TAG].get('status', '?')}) "
            + line("; ".join(str(x) for x in m.metadata[DIARY_TAG].get("key_learnings", [])) or m.text, 600)
            for m in entries
        )
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": listing}]
        playbook = ask(self.llm(), messages, Playbook)
        by_id = {m.id: m for m in entries}
        for rule in playbook.rules:  # checked as a whole before anything is queued
            unknown = [i for i in rule.source_entries if i not in by_id]
            if unknown or len(set(rule.source_entries)) < MIN_ENTRIES:
                why = f"unknown entries {unknown}" if unknown else "fewer than two distinct entries"
                raise LLMReplyInvalid(f"the distilled rule {rule.text[:60]!r} cites {why}")
        queued, known = [], []
        for rule in playbook.rules:
            spec = PatternSpec(name=line(rule.text, 120), steps=[rule.text.strip()])
            key = spec.dedup_key()
            if self.store.find(self.actor, MemoryType.PATTERN, key) or self.store.review_find(
                self.actor, "memory", "dedup_key", key
            ):
                known.append(rule.text)
                continue
            review_id = self.store.review_add(self.actor, "memory", _payload(spec, rule, by_id))
            queued.append(f"review://{self.actor}/{review_id}")
        return DistillResult(None, tuple(queued), tuple(known), len(entries))


def _payload(spec: PatternSpec, rule: PlaybookRule, by_id: dict[str, Memory]) -> dict[str, Any]:
    """A queued pattern at the lifecycle's starting values; accepting it writes exactly this."""
    sources = list(dict.fromkeys(rule.source_entries))
    return {
        "type": MemoryType.PATTERN.value,
        "text": spec.encode(),
        "dedup_key": spec.dedup_key(),
        "source": Source.CONSOLIDATION.value,
        "scope": "global",
        "confidence": 0.5,
        "importance": 0.5,
        "strength": 0.5,
        "tags": sorted({"-".join(t.split()).casefold() for t in rule.tags if t.strip()}),
        "metadata": {
            "coverage": 0,
            "applications": 0,
            "failures": 0,
            "maturity": "nascent",
            "status": "active",
            "last_applied_at": None,
            "anti_pattern": rule.anti_pattern,
            "source_entries": sources,
            "derived_from": [by_id[i].uri for i in sources],
        },
    }
