"""Sleep replay (seed 000 "consolidator"): after a working session, the LLM extracts rules and lessons.

``should_replay`` decides with cheap heuristics and no LLM call: fewer than 2 steps is too short
to learn from; otherwise any error or any cancelled step (high signal), or a long session (5 steps
or more), is replayed. ``replay`` compresses the steps to one line each, asks the LLM for rules
(always / never / when) and lessons, each with scope and confidence, and writes them with
``source="consolidation"`` through the encoding gate: copilot queues the unconfident ones, and a
rule always waits for a human accept (writing/gate.py), in every mode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mempager.config import PagerConfig
from mempager.consolidation.steps import OFF, LLMProvider, RememberMany, StepLock, line, mode_off, run_step
from mempager.errors import InvalidInput, LLMReplyInvalid
from mempager.llm.base import ask
from mempager.types import MemoryType

STATUSES = ("ok", "error", "cancelled")
MIN_STEPS = 2  # fewer is too short to learn from
LONG_SESSION = 5  # steps from which a session is replayed even without an error
CONFIDENCE = {"high": 0.9, "medium": 0.6, "low": 0.3}  # the gate's copilot threshold is 0.7 by default
PREFIX = {"always": "Always", "never": "Never", "when": "When"}
SYSTEM = (
    "You replay a finished working session of an agent, one line per step as `n. [status] what was done "
    "-> what came of it`. Extract what should change how the agent works next time: `rules` (kind always, "
    "never or when; text without the kind word) and `lessons` (a fact learnt, with a short topic slug). "
    "Give each a scope (global: anywhere; project: only this project) and a confidence (high, medium, low). "
    "Only what the steps show; empty lists are a fine answer."
)

Scope = Literal["global", "project"]
Confidence = Literal["high", "medium", "low"]


class ReplayRule(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["always", "never", "when"]
    text: str = Field(min_length=1)
    scope: Scope = "global"
    confidence: Confidence = "medium"


class ReplayLesson(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=1)
    topic: str = ""
    scope: Scope = "global"
    confidence: Confidence = "medium"


class ConsolidatedLessons(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rules: list[ReplayRule] = []
    lessons: list[ReplayLesson] = []


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a session (a tool call, a scratchpad cell): what was done, how it ended, what came of it."""

    text: str
    status: str = "ok"  # ok | error | cancelled
    output: str = ""


@dataclass(frozen=True, slots=True)
class ReplayResult:
    skipped: str | None  # why nothing was replayed (heuristics, LLM failure, lock, mode off); None when it ran
    stored: tuple[str, ...] = ()  # mem:// uris written
    queued: tuple[str, ...] = ()  # review:// uris waiting for a human (every rule; unconfident lessons in copilot)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def as_steps(events: Sequence[object]) -> list[Step]:
    """Steps from strings (status ok) or mappings with ``text`` (or ``content``), ``status``, ``output``."""
    if isinstance(events, (str, bytes)) or not isinstance(events, Sequence):
        raise InvalidInput("replay takes a list of steps: strings or dicts like {'text': ..., 'status': 'error'}")
    steps = []
    for i, event in enumerate(events):
        if isinstance(event, Step):
            step = event
        elif isinstance(event, str):
            step = Step(event)
        elif isinstance(event, Mapping):
            text = event.get("text", event.get("content"))
            if not isinstance(text, str):
                raise InvalidInput(f"step {i} needs a 'text' string, got {event!r:.80}")
            step = Step(text, str(event.get("status", "ok")), str(event.get("output", "")))
        else:
            raise InvalidInput(f"step {i} must be a string or a dict, got {type(event).__name__}")
        if step.status not in STATUSES:
            raise InvalidInput(f"step {i} status must be one of {', '.join(STATUSES)}, got {step.status!r}")
        steps.append(step)
    return steps


def should_replay(steps: Sequence[Step]) -> tuple[bool, str]:
    """Seed 000's heuristics, no LLM call: (replay?, why)."""
    if len(steps) < MIN_STEPS:
        return False, f"too short to learn from ({len(steps)} step{'s' if len(steps) != 1 else ''} < {MIN_STEPS})"
    for status in ("error", "cancelled"):
        if any(s.status == status for s in steps):
            return True, f"a step ended {status}"
    if len(steps) >= LONG_SESSION:
        return True, f"a long session ({len(steps)} steps)"
    return False, f"{len(steps)} uneventful steps: no error, nothing cancelled, under {LONG_SESSION}"


class Replayer:
    def __init__(self, config: PagerConfig, *, remember: RememberMany, llm: LLMProvider, lock: StepLock) -> None:
        self.config = config
        self.remember = remember
        self.llm = llm
        self.lock = lock

    def replay(self, events: Sequence[object], *, force: bool = False) -> ReplayResult:
        steps = as_steps(events)
        go, why = should_replay(steps)
        if not (go or force):
            return ReplayResult(f"not replayed: {why}")
        if mode_off(self.config, "replay"):
            return ReplayResult(OFF)
        return run_step("replay", self.lock, lambda: self._run(steps), ReplayResult)

    def _run(self, steps: Sequence[Step]) -> ReplayResult:
        history = "\n".join(
            f"{n}. [{s.status}] {line(s.text, 300)}" + (f" -> {line(s.output, 300)}" if s.output else "")
            for n, s in enumerate(steps, 1)
        )
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": history}]
        found = ask(self.llm(), messages, ConsolidatedLessons)
        items = [_rule(r) for r in found.rules] + [_lesson(x) for x in found.lessons]
        try:  # every item is validated before any is stored: a bad one leaves nothing written
            uris = self.remember(items)
        except InvalidInput as exc:
            raise LLMReplyInvalid(f"the replayed rules and lessons cannot be stored: {exc}") from exc
        return ReplayResult(
            None,
            stored=tuple(u for u in uris if u.startswith("mem://")),
            queued=tuple(u for u in uris if u.startswith("review://")),
        )


def _rule(rule: ReplayRule) -> dict[str, Any]:
    body = rule.text.strip()
    said = body.split(" ", 1)[0].casefold() == rule.kind  # "When deploying, ..." keeps its own word
    return {
        "type": MemoryType.RULE.value,
        "text": body if said else f"{PREFIX[rule.kind]} {body}",
        "source": "consolidation",
        "scope": rule.scope,
        "confidence": CONFIDENCE[rule.confidence],
        "metadata": {"replay": rule.kind},
    }


def _lesson(lesson: ReplayLesson) -> dict[str, Any]:
    topic = "-".join(lesson.topic.split()).casefold()
    return {
        "type": MemoryType.FACT.value,
        "text": lesson.text.strip(),
        "source": "consolidation",
        "scope": lesson.scope,
        "confidence": CONFIDENCE[lesson.confidence],
        "tags": ["lesson", topic] if topic else ["lesson"],
    }
