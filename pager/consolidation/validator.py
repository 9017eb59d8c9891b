"""The immune system: which pattern levels a continuity may claim. Pure: no store, no clock.

For each pattern line of a graduating section, claiming level ``c`` (capped at 3x), with the
pattern's previous level ``p`` (0 when new), ``base = max(p, 1)`` and high-water ``m``:

* ``c <= 1``: kept at 1x (citations optional; the in-snapshot ones still link).
* A re-grounding whose explanation shares >= ``rephrase_overlap`` meaningful words with one of
  the pattern's previous explanations only rephrases it: demoted to ``min(c - 1, base)``, marked
  ``(ungrounded)``, never carried forward, and its citations form no links.
* Cited evidence is valid when every cited id is in this wrap's frozen snapshot (an id from an
  earlier wrap never counts: the replay block) and each explanation shares >= ``min_overlap``
  meaningful words with the cited memory. Valid: the level becomes ``min(c, base + 1)`` (no
  level rises more than one step per wrap), dated today, and the pattern counts as grounded.
* Invalid, or a bare 2x/3x once some earlier wrap has seen citations (the first wraps are
  exempt, for onboarding): held at ``min(c, p)`` and marked ``(carried-forward)`` when ``c <= m``
  and the pattern was grounded within ``carry_forward_days``; otherwise demoted to
  ``min(c - 1, base)`` and marked ``(ungrounded)`` / ``(needs-evidence)``. Either way the
  evidence tags are dropped, so a held line does not refresh its own recency.

So without valid evidence a level never rises above ``base``. Also reported: ids cited
>= ``gaming_threshold`` times in one wrap (informational), 3x patterns of the previous
continuity that vanished (``omitted``), and new 3x patterns without a contradiction stance.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import date

from mempager.consolidation.lines import MAX_LEVEL, PatternLine, meaningful_words, overlap, parse_line
from mempager.consolidation.schema import Section, SectionSchema, join_sections, split_sections
from mempager.errors import ContinuityInvalid
from mempager.protocols import PatternRecord


@dataclass(frozen=True, kw_only=True)
class Rules:
    """The immune system's constants (seed 003's defaults)."""

    min_overlap: int = 2  # meaningful words an explanation shares with the memory it cites
    rephrase_overlap: int = 3  # shared with a previous explanation: a rephrase, not a re-grounding
    gaming_threshold: int = 3  # citations of one id in one wrap that flag it
    carry_forward_days: int = 7
    stale_days: int = 7


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a save did to one pattern line."""

    name: str
    key: str
    claimed: int
    previous: int  # 0: new
    level: int
    outcome: str  # graduated | kept | capped | held | demoted
    reason: str
    cited: tuple[str, ...]  # in-snapshot ids this pattern cited (link material); () when refused
    grounded: bool
    has_stance: bool
    explanations: tuple[str, ...] = ()  # the grounding's explanations (kept for the rephrase check)


@dataclass(frozen=True, slots=True)
class Validation:
    text: str  # the continuity as it is saved (levels and marks rewritten, frozen sections restored)
    sections: tuple[Section, ...]
    verdicts: tuple[Verdict, ...]
    history: tuple[PatternRecord, ...]  # the pattern history after this wrap
    gaming_suspects: tuple[str, ...]
    omitted: tuple[str, ...]  # 3x patterns of the previous continuity missing from this one
    missing_stance: tuple[str, ...]  # new 3x patterns without [contradicts: ...] / [no-contradicts]
    frozen_restored: tuple[str, ...]
    cited_any: bool  # this wrap's text carried at least one evidence tag


def previous_patterns(text: str | None, schema: SectionSchema) -> dict[str, PatternLine]:
    """The pattern lines of a saved continuity by key (empty when there is none or it no longer parses)."""
    if not text:
        return {}
    try:
        sections = split_sections(text, schema)
    except ContinuityInvalid:  # saved under another schema: nothing to compare against
        return {}
    out: dict[str, PatternLine] = {}
    for section in sections:
        if section.role == "graduating":
            for line in section.body:
                parsed = parse_line(line)
                if parsed is not None:
                    out[parsed.key] = parsed
    return out


class _Judge:
    def __init__(
        self, snapshot: Mapping[str, str], history: Mapping[str, PatternRecord], exempt: bool, today: date, rules: Rules
    ) -> None:
        self.snapshot = snapshot
        self.history = history
        self.exempt = exempt  # no earlier wrap saw citations: bare graduations pass
        self.today = today
        self.rules = rules

    def judge(self, line: PatternLine) -> tuple[Verdict, str]:
        prev = self.history.get(line.key)
        p = prev.level if prev is not None else 0
        base = max(p, 1)
        c = min(line.level, MAX_LEVEL)
        in_snapshot = tuple(dict.fromkeys(x.id for x in line.citations if x.id in self.snapshot))

        def verdict(level: int, outcome: str, reason: str, cited: tuple[str, ...], grounded: bool) -> Verdict:
            why = tuple(x.explanation for x in line.citations) if grounded else ()
            return Verdict(
                line.text, line.key, line.level, p, level, outcome, reason, cited, grounded, line.has_stance, why
            )

        if c <= 1:
            return verdict(1, "kept", "1x needs no evidence", in_snapshot, False), line.at(1).render()
        if prev is not None and line.citations and prev.explanations:
            for x in line.citations:
                shared = max(overlap(x.explanation, old) for old in prev.explanations)
                if shared >= self.rules.rephrase_overlap:
                    level = min(c - 1, base)
                    reason = f"re-grounding rephrases its previous explanation ({shared} shared words)"
                    return verdict(level, "demoted", reason, (), False), self._demoted(line, level, "ungrounded")
        if line.citations:
            problem = self._evidence_problem(line)
            if problem is None:
                level = min(c, base + 1)
                if c > level:
                    outcome, reason = "capped", f"a level rises at most one step per wrap (claimed {c}x)"
                else:
                    outcome, reason = ("graduated" if level > p else "kept"), "grounded in this wrap's episodes"
                return verdict(level, outcome, reason, in_snapshot, True), line.at(level, self.today).render()
            mark = "ungrounded"
        elif self.exempt:
            level = min(c, base + 1)
            outcome = "capped" if c > level else ("graduated" if level > p else "kept")
            reason = "no evidence tag (exempt: no earlier wrap has cited evidence)"
            return verdict(level, outcome, reason, (), False), line.at(level).render()
        else:
            problem, mark = 'a 2x/3x pattern needs an [evidence: ID "explanation"] tag', "needs-evidence"
        if self._carries(prev, c):
            assert prev is not None
            level = min(c, p)
            reason = f"{problem}; held: grounded on {prev.grounded_on} and within its high-water {prev.max_level}x"
            return verdict(level, "held", reason, in_snapshot, False), self._demoted(line, level, "carried-forward")
        level = min(c - 1, base)
        return verdict(level, "demoted", problem, in_snapshot, False), self._demoted(line, level, mark)

    def _evidence_problem(self, line: PatternLine) -> str | None:
        for x in line.citations:
            text = self.snapshot.get(x.id)
            if text is None:
                return f"cites {x.id}, which is not one of this wrap's episodes"
            shared = len(meaningful_words(x.explanation) & meaningful_words(text))
            if shared < self.rules.min_overlap:
                need = self.rules.min_overlap
                return f"the explanation for {x.id} shares {shared} meaningful words with it (needs {need})"
        return None

    def _carries(self, prev: PatternRecord | None, claimed: int) -> bool:
        if prev is None or prev.grounded_on is None or prev.level < 2 or claimed > prev.max_level:
            return False
        return (self.today - prev.grounded_on).days <= self.rules.carry_forward_days

    @staticmethod
    def _demoted(line: PatternLine, level: int, mark: str) -> str:
        return line.at(level).render(mark=mark, keep_evidence=False)


def validate(
    text: str,
    schema: SectionSchema,
    *,
    snapshot: Mapping[str, str],
    history: Mapping[str, PatternRecord],
    previous_text: str | None,
    citations_seen: bool,
    today: date,
    rules: Rules = Rules(),
) -> Validation:
    """Check ``text`` against the schema and the immune system; what would be saved and why.

    ``snapshot`` maps this wrap's episode ids to their text; ``history`` is the stored pattern
    history by key; ``citations_seen`` whether an earlier wrap cited evidence.
    """
    sections = split_sections(text, schema)
    judge = _Judge(snapshot, history, not citations_seen, today, rules)
    previous_sections = _previous_sections(previous_text, schema)
    out: list[Section] = []
    verdicts: list[Verdict] = []
    frozen_restored: list[str] = []
    citations: Counter[str] = Counter()
    for section in sections:
        if section.role == "frozen" and section.heading in previous_sections:
            kept = previous_sections[section.heading]
            if [x.rstrip() for x in kept.body if x.strip()] != [x.rstrip() for x in section.body if x.strip()]:
                frozen_restored.append(section.heading)
            out.append(kept)
            continue
        if section.role != "graduating":
            out.append(section)
            continue
        body: list[str] = []
        for raw in section.body:
            parsed = parse_line(raw)
            if parsed is None:
                body.append(raw)
                continue
            citations.update(x.id for x in parsed.citations)
            found, rendered = judge.judge(parsed)
            verdicts.append(found)
            body.append(rendered)
        out.append(replace(section, body=tuple(body)))
    previous = previous_patterns(previous_text, schema)
    present = {v.key for v in verdicts}
    return Validation(
        text=join_sections(out),
        sections=tuple(out),
        verdicts=tuple(verdicts),
        history=_history(verdicts, history, today),
        gaming_suspects=tuple(sorted(i for i, n in citations.items() if n >= rules.gaming_threshold)),
        omitted=tuple(p.text for k, p in previous.items() if min(p.level, MAX_LEVEL) == MAX_LEVEL and k not in present),
        missing_stance=tuple(
            v.name for v in verdicts if v.level == MAX_LEVEL and v.previous < MAX_LEVEL and not v.has_stance
        ),
        frozen_restored=tuple(frozen_restored),
        cited_any=bool(citations),
    )


def _previous_sections(text: str | None, schema: SectionSchema) -> dict[str, Section]:
    if not text:
        return {}
    try:
        return {s.heading: s for s in split_sections(text, schema)}
    except ContinuityInvalid:
        return {}


def _history(verdicts: list[Verdict], history: Mapping[str, PatternRecord], today: date) -> tuple[PatternRecord, ...]:
    """Every pattern ever seen (a vanished one keeps its high-water mark, out of the continuity)."""
    out = {k: replace(r, in_continuity=False) for k, r in history.items()}
    for v in verdicts:
        prev = history.get(v.key)
        grounded_on = today if v.grounded else (prev.grounded_on if prev else None)
        out[v.key] = PatternRecord(
            key=v.key,
            name=v.name,
            level=v.level,
            max_level=max(v.level, prev.max_level if prev else 0),
            grounded_on=grounded_on,
            explanations=v.explanations if v.grounded else (prev.explanations if prev else ()),
            in_continuity=True,
        )
    return tuple(out[k] for k in sorted(out))


def stale(history: Mapping[str, PatternRecord], today: date, rules: Rules = Rules()) -> list[PatternRecord]:
    """Graduated patterns in the continuity not re-grounded within ``stale_days`` (for the next package)."""
    return [
        r
        for r in history.values()
        if r.in_continuity
        and r.level >= 2
        and (r.grounded_on is None or (today - r.grounded_on).days > rules.stale_days)
    ]
