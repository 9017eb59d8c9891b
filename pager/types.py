"""Plain value types shared by the kernel, the embedders and the indexes.

Nothing in here touches a database, a model or the network, so ``embedders/`` and ``index/`` can
import it without pulling in the rest of the pager.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

Role = Literal["query", "document"]
FloatMatrix = npt.NDArray[np.float32]
LabelArray = npt.NDArray[np.int64]


class MemoryType(str, enum.Enum):
    IDENTITY = "identity"
    RULE = "rule"
    CONSTRAINT = "constraint"
    PROFILE = "profile"
    PREFERENCE = "preference"
    FACT = "fact"
    BELIEF = "belief"
    EVENT = "event"
    OUTCOME = "outcome"
    GOAL = "goal"
    PATTERN = "pattern"

    def __str__(self) -> str:
        return self.value


class Source(str, enum.Enum):
    USER = "user"
    OBSERVED = "observed"
    LLM = "llm"
    CONSOLIDATION = "consolidation"

    def __str__(self) -> str:
        return self.value


class Scope(str, enum.Enum):
    GLOBAL = "global"
    PROJECT = "project"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class Memory:
    """One stored memory, as the store returns it."""

    label: int
    id: str
    uri: str
    actor: str
    scope: Scope
    type: MemoryType
    text: str
    source: Source
    confidence: float
    importance: float
    strength: float
    created_at: datetime
    updated_at: datetime
    last_accessed_at: datetime
    access_count: int
    tags: tuple[str, ...]
    metadata: Mapping[str, Any]
    content_hash: str
    superseded_by: str | None = None
    valid_until: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NewMemory:
    """What a caller asks the store to keep. Validated before it reaches the store."""

    actor: str
    type: MemoryType
    text: str
    scope: Scope = Scope.GLOBAL
    source: Source = Source.OBSERVED
    confidence: float = 0.5
    importance: float = 0.5
    strength: float = 0.5
    created_at: datetime | None = None
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    # Optional override of the dedup key (patterns dedup by name → trigger → steps).
    dedup_key: str | None = None


@dataclass(frozen=True, slots=True)
class PutResult:
    memory: Memory
    created: bool  # False when the write was deduplicated onto an existing memory


@dataclass(frozen=True, slots=True)
class LaneHit:
    """One lane's opinion of one memory: its 1-based rank and raw score in that lane."""

    lane: str
    rank: int
    score: float


@dataclass(frozen=True, slots=True)
class Snippet:
    """A memory paged into context. ``lanes`` says which lanes found it and how well."""

    uri: str
    text: str
    type: MemoryType
    score: float
    lanes: Mapping[str, LaneHit]
    label: int
    source: Source
    created_at: datetime
    tokens: int
    truncated: bool = False


def as_labels(values: object) -> LabelArray:
    """int64 labels from any sequence, or InvalidInput (never a raw numpy error)."""
    from mempager.errors import InvalidInput

    try:
        raw = np.asarray(values)
        if raw.dtype.kind not in "iu" and raw.size:
            whole = raw.dtype.kind == "f" and np.all(np.isfinite(raw)) and np.all(raw == np.floor(raw))
            if whole and np.all(np.abs(raw) < 2.0**63):
                raw = raw.astype(np.int64)
            else:
                raise InvalidInput(f"labels must be integers, got {raw.dtype} values")
        return np.asarray(raw, dtype=np.int64).reshape(-1)
    except (ValueError, TypeError, OverflowError) as exc:
        raise InvalidInput(f"labels must be int64 integers: {exc}") from exc


def as_vectors(values: object, what: str = "vectors") -> FloatMatrix:
    """float32 numbers from any array-like, or InvalidInput; complex values are refused, not cast."""
    from mempager.errors import InvalidInput

    try:
        raw = np.asarray(values)
        if raw.dtype.kind not in "fiub":
            raise InvalidInput(f"{what} must be real numbers, got {raw.dtype} values")
        with np.errstate(over="ignore", invalid="ignore"):  # out-of-range values become inf: refused later
            return np.asarray(raw, dtype=np.float32)
    except (ValueError, TypeError, OverflowError) as exc:
        raise InvalidInput(f"{what} must be real numbers: {exc}") from exc


@dataclass(frozen=True, slots=True)
class AuditEntry:
    seq: int
    at: datetime
    actor: str
    op: str  # remember | reinforce | update | feedback | forget | erase | migration | review
    uri: str
    content_hash: str
    prev_hash: str
    hash: str


@dataclass(frozen=True, slots=True)
class AuditReport:
    ok: bool
    checked: int
    first_broken: int | None
    reason: str
