"""The compression package: one text the caller's LLM turns into the next continuity.

It holds the instructions (the schema's sections and roles, the pattern-line grammar, the
evidence rules), the current continuity, stale-pattern warnings, the proven (3x) patterns for a
contradiction scan, association context, and this wrap's episodes. Stored text (episodes, the
continuity) is data: each line is neutralised and fenced, so a memory cannot pose as an
instruction of the package.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mempager.consolidation.report import Episode
from mempager.consolidation.schema import SectionSchema
from mempager.fence import FENCE_CLOSE, FENCE_OPEN, neutralize
from mempager.protocols import AssociationLink, PatternRecord

ROLE_HINTS = {
    "graduating": "pattern lines, checked at save (see the rules below); other lines are free text",
    "narrative": "compressed narrative of the work; rewrite it each wrap",
    "narrative-timeless": "the timeless relationship layer: no dates; carry it forward and evolve it, never gut it",
    "live-state": "current focus only; it never graduates",
    "frozen": "kept verbatim: copy it unchanged (changes are discarded)",
}

RULES = """\
Pattern lines (in graduating sections):
  TEXT | Nx (YYYY-MM-DD) [evidence: ID "explanation"] [contradicts: NAME] | [no-contradicts]
- A new pattern starts at 1x. A level rises at most one step per wrap (1x -> 2x -> 3x).
- 2x and 3x need [evidence: ID "explanation"] tags citing episode ids listed below (this wrap's
  episodes only: ids from earlier wraps never count). Each explanation must share at least two
  meaningful words with the episode it cites; explain in the episode's own terms, not in the
  words you used last time (a rephrased re-grounding demotes).
- Evidence that fails demotes the pattern one level (marked (ungrounded)); a recently grounded
  pattern within its best level is held instead (marked (carried-forward)).
- Citing one episode three or more times in a wrap is flagged as possible citation gaming.
- Before you write a new 3x, scan the proven patterns below: add [contradicts: NAME] when it
  contradicts one, else [no-contradicts]. Dropping a 3x pattern is reported.
- Merge duplicates, drop what no longer holds, keep the document dense rather than long."""


def _fenced(lines: Sequence[str]) -> list[str]:
    return [FENCE_OPEN, *(neutralize(line) for line in lines if line.strip()), FENCE_CLOSE]


def build_package(
    *,
    actor: str,
    number: int,
    episodes: Sequence[Episode],
    schema: SectionSchema,
    continuity: str | None,
    stale: Sequence[PatternRecord],
    proven: Sequence[PatternRecord],
    links: Sequence[AssociationLink],
    ids: Mapping[int, str],
) -> str:
    """The package text for wrap ``number`` (``ids``: memory label -> id, to name link ends)."""
    out = [f"# Session wrap {number} for {actor}", "", "## Instructions"]
    out.append(
        "Compress this session's episodes and the current continuity into the next continuity: markdown "
        "with exactly these sections, in this order (## headings):"
    )
    out += [f"- ## {s.heading}: {ROLE_HINTS[s.role]}" for s in schema.sections]
    out += ["", RULES, "", "## Current continuity"]
    out += _fenced(continuity.splitlines()) if continuity else ["(none yet: this is the first wrap)"]
    out += ["", "## Stale patterns (not re-grounded for 7 days: refresh the evidence, demote or remove)"]
    out += [f"- {neutralize(r.name)} | {r.level}x (last grounded {r.grounded_on or 'never'})" for r in stale] or [
        "(none)"
    ]
    out += ["", "## Proven patterns (3x): contradiction scan"]
    out += [f"- {neutralize(r.name)}" for r in proven] or ["(none)"]
    out += ["", "## Association context (memories cited together before)"]
    out += [_link_line(k, ids) for k in links] or ["(none)"]
    out += ["", f"## Episodes since the last wrap ({len(episodes)}; cite them by id)"]
    out += _fenced([f"- [{e.id}] {e.created_at:%Y-%m-%d} {e.type}: {e.text}" for e in episodes])
    return "\n".join(out) + "\n"


def _link_line(link: AssociationLink, ids: Mapping[int, str]) -> str:
    affect = f", felt {neutralize(link.affect_tag)} {link.affect_intensity or 0.0:.1f}" if link.affect_tag else ""
    left, right = ids.get(link.a, f"label {link.a}"), ids.get(link.b, f"label {link.b}")
    return f"- {left} <-> {right}: strength {link.strength:.2f}{affect}"
