"""Hebbian associations formed by consolidation (seed 003), as a pure update of the link set.

Memories cited by the same pattern link (+1.0); memories cited anywhere in the same wrap link
more weakly (+0.3). Links not reinforced by a wrap decay (x0.9); strength caps at 10.0 so no
link calcifies; a link under 0.1 is removed. An affective state reported with the wrap (tag,
intensity 0..1) is recorded on that wrap's links and scales what they gain by
``1 + AFFECT_GAIN * intensity``. Only ids in the wrap's snapshot ever reach here, and the
validator gives refused re-graduations no citations, so neither forms a link.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mempager.errors import InvalidInput
from mempager.protocols import AssociationLink

DIRECT = 1.0  # co-cited by one pattern
SESSION = 0.3  # co-cited in one wrap
DECAY = 0.9  # per wrap, for links the wrap did not use
CAP = 10.0
FLOOR = 0.1  # links below this are removed
AFFECT_GAIN = 0.5  # an intensity of 1.0 makes a wrap's links gain half as much again
MAX_SESSION_LABELS = 64  # wrap-level pairs grow quadratically: only the first 64 cited memories pair up


@dataclass(frozen=True, slots=True)
class Affect:
    """The agent's functional state while compressing, e.g. ``Affect("curious", 0.8)``."""

    tag: str
    intensity: float

    def __post_init__(self) -> None:
        if not isinstance(self.tag, str) or not self.tag.strip() or len(self.tag) > 64:
            raise InvalidInput(f"affect tag must be a short non-empty word (<= 64 characters), got {self.tag!r}")
        value = self.intensity
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
            raise InvalidInput(f"affect intensity must be a number in [0, 1], got {value!r}")
        if math.isnan(float(value)):
            raise InvalidInput("affect intensity must be a number in [0, 1], got nan")


def as_affect(value: object) -> Affect | None:
    """``Affect``, ``(tag, intensity)`` or ``{"tag": ..., "intensity": ...}`` (the MCP and CLI forms)."""
    if value is None or isinstance(value, Affect):
        return value
    if isinstance(value, dict) and set(value) == {"tag", "intensity"}:
        return Affect(value["tag"], value["intensity"])
    if isinstance(value, tuple) and len(value) == 2:
        return Affect(value[0], value[1])
    raise InvalidInput(f"affect must be Affect(tag, intensity), (tag, intensity) or a dict of both, got {value!r}")


@dataclass(frozen=True, slots=True)
class LinkReport:
    created: int
    reinforced: int
    decayed: int
    removed: int

    def as_dict(self) -> dict[str, int]:
        return {
            "created": self.created,
            "reinforced": self.reinforced,
            "decayed": self.decayed,
            "removed": self.removed,
        }


def _pairs(labels: Iterable[int]) -> Iterable[tuple[int, int]]:
    return itertools.combinations(sorted(set(labels)), 2)


def deltas(
    groups: Sequence[Sequence[int]], cited: Sequence[int], affect: Affect | None
) -> dict[tuple[int, int], float]:
    """What each pair gains from one wrap: ``groups`` are the labels each pattern cited."""
    gain = 1.0 + (AFFECT_GAIN * float(affect.intensity) if affect else 0.0)
    out: dict[tuple[int, int], float] = {}
    for group in groups:
        for pair in _pairs(group):
            out[pair] = out.get(pair, 0.0) + DIRECT * gain
    session = list(dict.fromkeys(cited))[:MAX_SESSION_LABELS]
    for pair in _pairs(session):
        if pair not in out:
            out[pair] = SESSION * gain
    return out


def update_links(
    existing: Sequence[AssociationLink],
    groups: Sequence[Sequence[int]],
    cited: Sequence[int],
    *,
    wrap: int,
    affect: Affect | None = None,
) -> tuple[tuple[AssociationLink, ...], LinkReport]:
    """The actor's links after wrap ``wrap``, and what changed."""
    gains = deltas(groups, cited, affect)
    old = {(link.a, link.b): link for link in existing}
    out: list[AssociationLink] = []
    created = reinforced = decayed = removed = 0
    for pair, link in old.items():
        if pair in gains:
            continue
        strength = link.strength * DECAY
        if strength < FLOOR:
            removed += 1
            continue
        decayed += 1
        out.append(AssociationLink(link.a, link.b, strength, link.last_wrap, link.affect_tag, link.affect_intensity))
    for (a, b), gain in gains.items():
        before = old.get((a, b))
        if before is None:
            created += 1
        else:
            reinforced += 1
        strength = min(CAP, (before.strength if before else 0.0) + gain)
        tag = affect.tag if affect else (before.affect_tag if before else None)
        intensity = float(affect.intensity) if affect else (before.affect_intensity if before else None)
        out.append(AssociationLink(a, b, strength, wrap, tag, intensity))
    out.sort(key=lambda k: (k.a, k.b))
    return tuple(out), LinkReport(created, reinforced, decayed, removed)
