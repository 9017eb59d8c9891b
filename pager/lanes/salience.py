"""The salience score: why a memory deserves a place without being asked for.

    score = w_recency    * 0.5 ** (age_days / half_life_days[type])
          + w_importance * importance
          + w_strength   * strength * confidence
          + w_access     * access_count / (access_count + 5)

Every term lies in [0, 1]. Decay only ever shrinks the recency term, so a memory's score never
falls below ``w_importance * importance + w_strength * strength * confidence``: decay re-orders
memories, it cannot silently zero the lane. The store computes the same formula in SQL; this
module is the reference (and the explanation shown in reports).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from mempager.config import PagerConfig
from mempager.protocols import SalienceParams
from mempager.types import Memory, MemoryType


@dataclass(frozen=True, slots=True)
class SalienceBreakdown:
    recency: float
    importance: float
    strength: float
    access: float

    @property
    def total(self) -> float:
        return self.recency + self.importance + self.strength + self.access


def params_from_config(config: PagerConfig, now: datetime) -> SalienceParams:
    weights = config.salience_weights
    return SalienceParams(
        now=now,
        half_life_days={MemoryType(k): v for k, v in config.half_life_days.items()},
        default_half_life_days=config.default_half_life_days,
        w_recency=weights.get("recency", 0.0),
        w_importance=weights.get("importance", 0.0),
        w_strength=weights.get("strength", 0.0),
        w_access=weights.get("access", 0.0),
    )


def salience_score(memory: Memory, params: SalienceParams) -> SalienceBreakdown:
    age_days = max(0.0, (params.now - memory.created_at).total_seconds() / 86400.0)
    half_life = params.half_life_days.get(memory.type, params.default_half_life_days)
    return SalienceBreakdown(
        recency=params.w_recency * 0.5 ** (age_days / half_life),
        importance=params.w_importance * memory.importance,
        strength=params.w_strength * memory.strength * memory.confidence,
        access=params.w_access * memory.access_count / (memory.access_count + 5.0),
    )
