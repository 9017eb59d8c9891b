"""Reader for LoCoMo-format conversation logs (long-term conversational memory benchmark).

Only the offline recall benchmark uses this; nothing on the retrieval path knows about it.
Schema quirks (see the data README): session keys whose value is a list hold turns; dia_id
"D<session>:<turn>" is 1-based; evidence strings may hold several ids or be malformed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from mempager.errors import InvalidInput
from mempager.validate import parse_time

_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")
_SESSION = re.compile(r"^session_(\d+)$")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


@dataclass(frozen=True, slots=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    created_at: datetime

    def memory_text(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    evidence: frozenset[str]
    category: int


@dataclass(frozen=True, slots=True)
class Conversation:
    sample_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]


def parse_evidence(items: list[str]) -> frozenset[str]:
    out = set()
    for item in items:
        for session, turn in _EVIDENCE.findall(str(item)):
            out.add(f"D{int(session)}:{int(turn)}")
    return frozenset(out)


def _turn_text(turn: dict[str, object]) -> str:
    text = f"{turn['speaker']}: {turn.get('text', '')}"
    caption = turn.get("blip_caption")
    if caption:
        text += f" [shares photo: {caption}]"
    return text


def load(path: str | Path, categories: frozenset[int] = frozenset({1, 2, 3, 4})) -> list[Conversation]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"cannot read LoCoMo data at {path}: {exc}; pass --data PATH/locomo10.json") from exc
    return [_conversation(sample, categories) for sample in data]


def _conversation(sample: dict[str, object], categories: frozenset[int]) -> Conversation:
    conv = sample["conversation"]
    assert isinstance(conv, dict)
    turns: list[Turn] = []
    sessions = sorted(int(m.group(1)) for k in conv if (m := _SESSION.match(k)) and isinstance(conv[k], list))
    for n in sessions:
        start = parse_time(conv[f"session_{n}_date_time"], f"session_{n}_date_time")
        for i, raw in enumerate(conv[f"session_{n}"]):
            # turns of one session share its timestamp; spread them so their order is kept
            turns.append(
                Turn(str(raw["dia_id"]), str(raw["speaker"]), _turn_text(raw), start + timedelta(seconds=30 * i))
            )
    known = {t.dia_id for t in turns}
    questions = []
    qa = sample.get("qa", [])
    assert isinstance(qa, list)
    for q in qa:
        category = int(q.get("category", 0))
        evidence = parse_evidence(q.get("evidence", [])) & known
        if category in categories and evidence:
            questions.append(Question(str(q["question"]), evidence, category))
    return Conversation(str(sample.get("sample_id", "")), tuple(turns), tuple(questions))
