"""The catastrophic-shrink gate (partnership schemas only: those with a narrative-timeless section).

A wrap can keep every heading while gutting what is under them, so the latest session quietly
compresses over the accumulated identity. For gated schemas each protected section (the
narrative-timeless and graduating ones) must keep at least ``RETAIN_SECTION`` of its previous
size and the whole document ``RETAIN_TOTAL`` of its previous size, or the save is refused and
the wrap stays open. Sizes are characters of content (``Section.size``). Only a literal
``allow_shrink=True`` bypasses it (fail closed: ``1`` or ``"yes"`` do not). Ops schemas, which
legitimately fold many patterns into a few, are not gated.
"""

from __future__ import annotations

from collections.abc import Sequence

from mempager.consolidation.schema import Section, SectionSchema
from mempager.errors import ShrinkRefused

RETAIN_SECTION = 0.5
RETAIN_TOTAL = 0.25
PROTECTED = ("narrative-timeless", "graduating")


def shrink_problems(previous: Sequence[Section], new: Sequence[Section]) -> list[str]:
    """What falls below its floor, as readable lines (empty when the save may go ahead)."""
    before = {s.heading: s for s in previous}
    problems = []
    for section in new:
        old = before.get(section.heading)
        if section.role in PROTECTED and old is not None and old.size and section.size < RETAIN_SECTION * old.size:
            problems.append(
                f"'## {section.heading}' would keep {section.size} of {old.size} characters "
                f"(at least {RETAIN_SECTION:.0%} must stay)"
            )
    old_total = sum(s.size for s in previous)
    new_total = sum(s.size for s in new)
    if old_total and new_total < RETAIN_TOTAL * old_total:
        problems.append(
            f"the whole continuity would keep {new_total} of {old_total} characters (at least {RETAIN_TOTAL:.0%})"
        )
    return problems


def check_shrink(
    previous: Sequence[Section], new: Sequence[Section], schema: SectionSchema, allow_shrink: object
) -> None:
    """Raise ``ShrinkRefused`` when a gated schema's save would collapse protected content."""
    if not schema.gated or allow_shrink is True or not previous:
        return
    problems = shrink_problems(previous, new)
    if problems:
        raise ShrinkRefused(
            "refused: this wrap would collapse the protected continuity: "
            + "; ".join(problems)
            + ". Nothing was saved and the wrap stays open: compress again preserving the full arc of those "
            "sections, or pass allow_shrink=True for a deliberate diet"
        )
