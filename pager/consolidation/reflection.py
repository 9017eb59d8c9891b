"""Reflection (seed 002 "working memory"): a finished task's transcript becomes a diary entry.

The LLM summarises the transcript as accomplishments, decisions, challenges, key learnings and
tags, with a status (success | failure | mixed; the caller's ``status`` wins when given) and a
quality score in [0, 1]. The entry is an ``event`` memory tagged ``diary`` with the fields in
``metadata["diary"]``, ``source="consolidation"``, confidence = quality score, written through
the encoding gate. ``distill`` (consolidation/distill.py) reads these entries back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mempager.config import PagerConfig
from mempager.consolidation.steps import OFF, LLMProvider, RememberMany, StepLock, line, mode_off, run_step
from mempager.errors import InvalidInput, LLMReplyInvalid
from mempager.llm.base import ask
from mempager.types import MemoryType

DIARY_TAG = "diary"
STATUSES = ("success", "failure", "mixed")
MAX_TRANSCRIPT_CHARS = 60_000  # the newest part is kept: a task's end says most about how it went
SYSTEM = (
    "You reflect on an agent's finished task. From the transcript, write a diary entry: accomplishments, "
    "decisions (and why), challenges met, key_learnings (lessons that would help next time, each one "
    "sentence), a few lower-case tags, the status (success, failure or mixed) and a quality_score from 0 to "
    "1 (how well the task went). Only what the transcript shows."
)


class DiaryEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    accomplishments: list[str] = []
    decisions: list[str] = []
    challenges: list[str] = []
    key_learnings: list[str] = []
    tags: list[str] = []
    status: Literal["success", "failure", "mixed"]
    quality_score: float = Field(ge=0.0, le=1.0)


@dataclass(frozen=True, slots=True)
class ReflectResult:
    skipped: str | None  # why no entry was written (LLM failure, lock, mode off); None when it ran
    uri: str | None = None  # mem:// of the entry, or review:// when the gate queued it
    entry: Mapping[str, Any] = field(default_factory=dict)  # the diary fields as stored

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "entry": dict(self.entry)}


def transcript_text(transcript: object) -> str:
    """A transcript given as text, or as messages (``{"role", "content"}``) / strings, as one text."""
    if isinstance(transcript, str):
        text = transcript
    elif isinstance(transcript, Sequence):
        parts = []
        for i, m in enumerate(transcript):
            if isinstance(m, str):
                parts.append(m)
            elif isinstance(m, Mapping) and isinstance(m.get("content"), str):
                parts.append(f"{m.get('role', 'user')}: {m['content']}")
            else:
                raise InvalidInput(f"transcript item {i} must be a string or a {{'role', 'content'}} dict")
        text = "\n".join(parts)
    else:
        raise InvalidInput(f"transcript must be text or a list of messages, got {type(transcript).__name__}")
    if not text.strip():
        raise InvalidInput("transcript is empty: there is nothing to reflect on")
    return text[-MAX_TRANSCRIPT_CHARS:]


def render(entry: DiaryEntry) -> str:
    """The entry as the memory's text (what lanes search and pages show)."""
    parts = [f"Diary ({entry.status}, quality {entry.quality_score:.2f})."]
    for title, items in (
        ("Accomplished", entry.accomplishments),
        ("Decided", entry.decisions),
        ("Challenges", entry.challenges),
        ("Learned", entry.key_learnings),
    ):
        if items:
            parts.append(f"{title}: " + "; ".join(line(x, 300) for x in items) + ".")
    return " ".join(parts)


class Reflector:
    def __init__(self, config: PagerConfig, *, remember: RememberMany, llm: LLMProvider, lock: StepLock) -> None:
        self.config = config
        self.remember = remember
        self.llm = llm
        self.lock = lock

    def reflect(self, transcript: object, *, status: str | None = None, tags: Sequence[str] = ()) -> ReflectResult:
        text = transcript_text(transcript)
        if status is not None and status not in STATUSES:
            raise InvalidInput(f"status must be one of {', '.join(STATUSES)}, got {status!r}")
        if mode_off(self.config, "reflect"):
            return ReflectResult(OFF)
        return run_step("reflect", self.lock, lambda: self._run(text, status, tags), ReflectResult)

    def _run(self, text: str, status: str | None, tags: Sequence[str]) -> ReflectResult:
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]
        entry = ask(self.llm(), messages, DiaryEntry)
        if status is not None:  # the caller knows how the task ended; the LLM only guessed
            entry = entry.model_copy(update={"status": status})
        words = ["-".join(t.split()).casefold() for t in (*entry.tags, *tags) if t.strip()]
        fields = entry.model_dump()
        try:
            [uri] = self.remember(
                [
                    {
                        "type": MemoryType.EVENT.value,
                        "text": render(entry),
                        "source": "consolidation",
                        "confidence": entry.quality_score,
                        "tags": [DIARY_TAG, *dict.fromkeys(words)],
                        "metadata": {DIARY_TAG: fields},
                    }
                ]
            )
        except InvalidInput as exc:  # validated before the write: nothing was stored
            raise LLMReplyInvalid(f"the diary entry cannot be stored: {exc}") from exc
        return ReflectResult(None, uri, fields)
