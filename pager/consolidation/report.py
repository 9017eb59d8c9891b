"""What ``prepare_wrap`` and ``save_continuity`` hand back: frozen values, JSON-ready."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Literal

from mempager.consolidation.associations import LinkReport

WrapStatus = Literal["ready", "empty"]


@dataclass(frozen=True, slots=True)
class Episode:
    """One memory of the wrap's frozen snapshot; ``id`` is what an ``[evidence: ID ...]`` tag cites."""

    id: str  # the last segment of ``uri``
    uri: str
    type: str
    text: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Wrap:
    """An open session wrap: feed ``package`` to the LLM, then ``save_continuity`` its answer."""

    status: WrapStatus  # "empty": nothing was written since the last wrap; skip the wrap
    number: int  # 0 when empty
    episodes: tuple[Episode, ...]
    package: str
    opened_at: datetime | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "number": self.number,
            "episodes": [{**asdict(e), "created_at": e.created_at.isoformat()} for e in self.episodes],
            "package": self.package,
            "opened_at": self.opened_at.isoformat() if self.opened_at else None,
        }


@dataclass(frozen=True, slots=True)
class PatternChange:
    name: str
    from_level: int  # 0: a new pattern
    to_level: int
    outcome: str  # graduated | kept | capped | held | demoted
    reason: str


@dataclass(frozen=True, slots=True)
class SaveResult:
    """What a save did. ``saved`` is False only for a capture-only downgrade (the wrap stays open)."""

    saved: bool
    wrap: int
    version: int | None  # the continuity version written
    graduated: tuple[PatternChange, ...] = ()
    demoted: tuple[PatternChange, ...] = ()  # with the reason; includes "capped" (one step per wrap)
    held: tuple[PatternChange, ...] = ()  # carried forward at their level
    kept: tuple[PatternChange, ...] = ()
    gaming_suspects: tuple[str, ...] = ()  # ids cited >= 3 times in this wrap (informational)
    omitted_patterns: tuple[str, ...] = ()  # 3x patterns of the previous continuity missing now
    missing_stance: tuple[str, ...] = ()  # new 3x patterns without [contradicts: ...] / [no-contradicts]
    frozen_restored: tuple[str, ...] = ()  # frozen sections whose previous text was put back
    capture_only: bool = False  # the single-consolidator gate downgraded this session
    linked: LinkReport = field(default_factory=lambda: LinkReport(0, 0, 0, 0))

    @property
    def flagged(self) -> dict[str, Any]:
        return {
            "gaming_suspects": list(self.gaming_suspects),
            "omitted_patterns": list(self.omitted_patterns),
            "missing_stance": list(self.missing_stance),
            "frozen_restored": list(self.frozen_restored),
            "capture_only": self.capture_only,
        }

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["linked"] = self.linked.as_dict()
        out["flagged"] = self.flagged
        return out
