"""Pattern lines and meaningful words: the grammar the immune system reads and writes.

    TEXT | Nx (YYYY-MM-DD) [evidence: ID "explanation"]... [contradicts: NAME] | [no-contradicts]

A line may start with a list bullet. ``(ungrounded)``, ``(needs-evidence)`` and
``(carried-forward)`` are the validator's own marks: written back by a save, ignored when read
(a model copying them forward cannot keep or forge a verdict).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import date

from mempager.errors import ContinuityInvalid

_LINE = re.compile(
    r"^(?P<lead>\s*(?:[-*+]\s+)?)(?P<text>[^|\n]*?\S)\s*\|\s*(?P<level>\d+)\s*x\s*"
    r"\((?P<date>\d{4}-\d{2}-\d{2})\)(?P<rest>.*)$"
)
_EVIDENCE = re.compile(r"\[evidence:\s*(?P<id>[^\s\]\"“”]+)\s+[\"“](?P<why>[^\"“”]*)[\"”]\s*\]")
_CONTRADICTS = re.compile(r"\[contradicts:\s*(?P<name>[^\]]*?)\s*\]")
_NO_CONTRADICTS = re.compile(r"\[no-contradicts\]")
MARKS = ("ungrounded", "needs-evidence", "carried-forward")
_MARK = re.compile(r"\s*\((?:" + "|".join(MARKS) + r")\)")
_WORD = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?")
MAX_LEVEL = 3

# Common English function words: sharing "the" or "because" with an episode proves nothing.
STOPWORDS = frozenset(
    """
    about above after again against all also and any are because been before being below between both but
    can cannot could did does doing down during each few for from further had has have having her here hers
    herself him himself his how into its itself just let more most much must not now off once only other
    ought our ours ourselves out over own same she should some such than that the their theirs them
    themselves then there these they this those through too under until upon very was were what when where
    which while who whom why will with would you your yours yourself yourselves one two get got via per
    """.split()
)


def meaningful_words(text: str) -> frozenset[str]:
    """Words longer than two characters that are not stopwords, case-folded."""
    return frozenset(w for w in _WORD.findall(text.casefold()) if len(w) > 2 and w not in STOPWORDS)


def overlap(a: str, b: str) -> int:
    return len(meaningful_words(a) & meaningful_words(b))


def pattern_key(text: str) -> str:
    """Two lines are the same pattern when their texts match ignoring case, spacing and end punctuation."""
    return " ".join(text.casefold().split()).rstrip(".;:,!")


@dataclass(frozen=True, slots=True)
class Citation:
    id: str
    explanation: str


@dataclass(frozen=True, slots=True)
class PatternLine:
    lead: str
    text: str
    level: int  # as written (may exceed MAX_LEVEL: the validator caps it)
    day: date
    citations: tuple[Citation, ...]
    contradicts: tuple[str, ...]
    no_contradicts: bool
    extra: str  # anything else after the date, kept as written (marks and tags removed)

    @property
    def key(self) -> str:
        return pattern_key(self.text)

    @property
    def has_stance(self) -> bool:
        return self.no_contradicts or bool(self.contradicts)

    def render(self, *, mark: str | None = None, keep_evidence: bool = True) -> str:
        tags = "".join(f' [evidence: {c.id} "{c.explanation}"]' for c in self.citations) if keep_evidence else ""
        stance = "".join(f" [contradicts: {n}]" for n in self.contradicts)
        stance += " [no-contradicts]" if self.no_contradicts else ""
        extra = f" {self.extra}" if self.extra else ""
        marked = f" ({mark})" if mark else ""
        return f"{self.lead}{self.text} | {self.level}x ({self.day.isoformat()}){tags}{stance}{extra}{marked}"

    def at(self, level: int, day: date | None = None) -> PatternLine:
        return replace(self, level=level, day=day or self.day)


def parse_line(line: str) -> PatternLine | None:
    """The pattern on ``line``, or None when it is not a pattern line."""
    match = _LINE.match(line)
    if match is None:
        return None
    try:
        day = date.fromisoformat(match.group("date"))
    except ValueError as exc:
        raise ContinuityInvalid(
            f"pattern line {line.strip()!r} has an impossible date {match.group('date')!r}; write YYYY-MM-DD"
        ) from exc
    rest = match.group("rest")
    citations = tuple(Citation(m.group("id"), m.group("why").strip()) for m in _EVIDENCE.finditer(rest))
    contradicts = tuple(m.group("name") for m in _CONTRADICTS.finditer(rest) if m.group("name"))
    no_contradicts = _NO_CONTRADICTS.search(rest) is not None
    extra = _MARK.sub("", _NO_CONTRADICTS.sub("", _CONTRADICTS.sub("", _EVIDENCE.sub("", rest))))
    return PatternLine(
        lead=match.group("lead"),
        text=_MARK.sub("", match.group("text")).strip(),
        level=max(1, int(match.group("level"))),
        day=day,
        citations=citations,
        contradicts=contradicts,
        no_contradicts=no_contradicts,
        extra=" ".join(extra.split()),
    )
