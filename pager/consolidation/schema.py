"""The continuity's section schema: an ordered list of ``## Heading`` sections, each with a role.

Roles say how a section behaves at a save:

    graduating          pattern lines are checked by the immune system (more than one allowed)
    narrative           compressed work narrative, rewritten each wrap
    narrative-timeless  the felt / relationship layer: dateless, carried forward and evolved;
                        declaring one turns on the catastrophic-shrink gate
    live-state          volatile current focus; never graduates
    frozen              kept verbatim: a save that changes it gets the previous text back

The schema is per actor in the store (``Pager.set_section_schema``), frozen while a wrap is
open. A stored schema that does not parse fails the wrap closed (``ConsolidationError``) rather
than silently falling back to the ungated default.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal, get_args

from mempager.errors import ConsolidationError, ContinuityInvalid

Role = Literal["graduating", "narrative", "narrative-timeless", "live-state", "frozen"]
ROLES: tuple[str, ...] = get_args(Role)
_HEADING = re.compile(r"^##(?!#)\s*(.*?)\s*#*\s*$")
_NAME = re.compile(r"^[\w][\w \-/&']{0,60}$")


@dataclass(frozen=True, slots=True)
class SectionSpec:
    heading: str
    role: Role

    def __post_init__(self) -> None:
        if not isinstance(self.heading, str) or not _NAME.match(self.heading):
            raise ContinuityInvalid(
                f"section heading {self.heading!r} is not usable: 1-61 letters, digits, spaces, - / & '"
            )
        if self.role not in ROLES:
            raise ContinuityInvalid(f"section role {self.role!r} is not one of {', '.join(ROLES)}")


@dataclass(frozen=True, slots=True)
class SectionSchema:
    sections: tuple[SectionSpec, ...]

    def __post_init__(self) -> None:
        if not self.sections:
            raise ContinuityInvalid("a section schema needs at least one section")
        keys = [s.heading.casefold() for s in self.sections]
        if len(set(keys)) != len(keys):
            raise ContinuityInvalid(f"section headings must be unique, got {[s.heading for s in self.sections]}")
        if not any(s.role == "graduating" for s in self.sections):
            raise ContinuityInvalid("a section schema needs a graduating section (where patterns are checked)")

    @property
    def gated(self) -> bool:
        """Partnership schemas (a narrative-timeless section) get the catastrophic-shrink gate."""
        return any(s.role == "narrative-timeless" for s in self.sections)

    def role_of(self, heading: str) -> Role:
        for s in self.sections:
            if s.heading == heading:
                return s.role
        raise KeyError(heading)

    def to_json(self) -> str:
        return json.dumps([{"heading": s.heading, "role": s.role} for s in self.sections])

    @classmethod
    def from_json(cls, text: str) -> SectionSchema:
        try:
            items = json.loads(text)
            return cls(tuple(SectionSpec(str(i["heading"]), i["role"]) for i in items))
        except (ValueError, TypeError, KeyError, ContinuityInvalid) as exc:
            raise ConsolidationError(
                f"the stored section schema does not parse ({exc}); the wrap fails closed: set a valid one "
                "with Pager.set_section_schema(...)"
            ) from exc


DEFAULT_SCHEMA = SectionSchema(
    (
        SectionSpec("State", "live-state"),
        SectionSpec("Patterns", "graduating"),
        SectionSpec("Decisions", "narrative"),
        SectionSpec("Context", "narrative"),
    )
)
# the partnership preset: the default four plus the felt, timeless layer the shrink gate protects
PARTNERSHIP_SCHEMA = SectionSchema((*DEFAULT_SCHEMA.sections, SectionSpec("Understanding", "narrative-timeless")))
PRESETS = {"default": DEFAULT_SCHEMA, "partnership": PARTNERSHIP_SCHEMA}


@dataclass(frozen=True, slots=True)
class Section:
    heading: str
    role: Role
    body: tuple[str, ...]  # the lines under the heading, as written

    @property
    def size(self) -> int:
        """Characters of content (blank lines and surrounding spaces do not count)."""
        return sum(len(line.strip()) for line in self.body)


def heading_of(line: str) -> str | None:
    match = _HEADING.match(line)
    return match.group(1) if match else None


def split_sections(text: str, schema: SectionSchema) -> list[Section]:
    """The schema's sections in ``text``, in order; ``ContinuityInvalid`` names what is wrong.

    Text before the first ``##`` heading (a ``#`` title) is allowed and dropped; ``###`` and deeper
    headings are content. Every schema section must be present once, in the schema's order, and
    no other ``##`` section may appear: nothing is saved otherwise.
    """
    expected = [s.heading for s in schema.sections]
    found: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        heading = heading_of(line)
        if heading is not None:
            found.append((heading, []))
        elif found:
            found[-1][1].append(line)
    names = [h for h, _ in found]
    unknown = [h for h in names if h not in expected]
    missing = [h for h in expected if h not in names]
    if missing or unknown:
        parts = []
        if missing:
            parts.append("missing " + ", ".join(f"'## {h}'" for h in missing))
        if unknown:
            parts.append("not in the schema " + ", ".join(f"'## {h}'" for h in unknown))
        raise ContinuityInvalid(
            f"the continuity must have exactly the sections {', '.join(f'## {h}' for h in expected)} in that "
            f"order ({'; '.join(parts)}); nothing was saved: fix the text and save again (an empty section is fine)"
        )
    if names != expected:
        raise ContinuityInvalid(
            f"the continuity's sections are {names}, expected each once in the order {expected}; nothing was saved"
        )
    return [Section(h, schema.role_of(h), tuple(body)) for h, body in found]


def join_sections(sections: list[Section]) -> str:
    parts = []
    for s in sections:
        body = "\n".join(s.body).strip("\n")
        parts.append(f"## {s.heading}\n{body}".rstrip())
    return "\n\n".join(parts) + "\n"
