"""The lifecycle of a learned procedure, as pure functions over its state.

Experience → candidate → reinforced → proven → (decayed | inverted).

- confidence moves only with evidence: success +0.05, failure −0.20 (the 4× asymmetry: one bug
  outweighs several successes), clamped to [0, 1];
- time decay ``confidence × 0.5^(days since last applied / 90)`` is applied at read time and
  never written back;
- maturity nascent → established (confidence ≥ 0.5, ≥ 3 applications) → proven (confidence >
  0.8, ≥ 10 applications), one level per evaluation; demotion below 0.5 (proven) / 0.3
  (established);
- an anti-pattern is proposed when failures ≥ 3 and failures > 2 × successes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mempager.config import PagerConfig
from mempager.patterns import Pattern
from mempager.validate import parse_time


@dataclass(frozen=True, slots=True)
class Evidence:
    """One observed application of a pattern."""

    outcome: str  # "success" | "failure"
    at: datetime


def decay(confidence: float, last_applied: datetime, now: datetime, half_life_days: float) -> float:
    days = max(0.0, (now - last_applied).total_seconds() / 86400.0)
    return clamp(confidence * 0.5 ** (days / half_life_days))


def clamp(value: float) -> float:
    return min(1.0, max(0.0, value))


def last_applied(pattern: Pattern) -> datetime:
    """When it was last used; a pattern never applied decays from its creation."""
    if pattern.last_applied_at:
        return parse_time(pattern.last_applied_at, "last_applied_at")
    return pattern.memory.created_at


def decayed_confidence(pattern: Pattern, now: datetime, config: PagerConfig) -> float:
    return decay(pattern.confidence, last_applied(pattern), now, config.confidence_half_life_days)


def next_maturity(maturity: str, confidence: float, applications: int, config: PagerConfig) -> str:
    """One step up or down (never two), from the confidence the caller judges by."""
    if maturity == "proven":
        return "established" if confidence < config.demote_proven_below else "proven"
    if maturity == "established":
        if confidence < config.demote_established_below:
            return "nascent"
        if confidence > config.proven_confidence and applications >= config.proven_applications:
            return "proven"
        return "established"
    if confidence >= config.established_confidence and applications >= config.established_applications:
        return "established"
    return "nascent"


def inversion_due(successes: int, failures: int, config: PagerConfig) -> bool:
    return failures >= config.antipattern_min_failures and failures > config.antipattern_failure_ratio * successes


def apply(pattern: Pattern, evidence: Evidence, config: PagerConfig) -> tuple[float, dict[str, Any]]:
    """New (base confidence, metadata) after one success or failure."""
    meta = dict(pattern.memory.metadata)
    successes, failures = pattern.successes, pattern.failures
    if evidence.outcome == "success":
        successes += 1
        confidence = clamp(pattern.confidence + config.success_increment)
    elif evidence.outcome == "failure":
        failures += 1
        confidence = clamp(pattern.confidence - config.failure_decrement)
    else:  # pragma: no cover - callers validate
        raise ValueError(evidence.outcome)
    applications = pattern.applications + 1
    meta.update(
        coverage=successes,
        failures=failures,
        applications=applications,
        last_applied_at=evidence.at.isoformat(),
        maturity=next_maturity(pattern.maturity, confidence, applications, config),
    )
    return confidence, meta


STAGES = ("candidate", "reinforced", "proven", "decayed", "inverted", "anti-pattern")


def stage(pattern: Pattern, config: PagerConfig) -> str:
    """Where the pattern is in its lifecycle (one of ``STAGES``), judged by its decayed confidence.

    candidate: fewer than ``min_pattern_successes`` successes (not injected into pages yet);
    reinforced: injectable; proven: maturity proven; decayed: used before, but its decayed
    confidence is below ``demote_established_below``; inverted: deprecated by an accepted
    inversion; anti-pattern: the inversion itself.
    """
    if pattern.status == "deprecated":
        return "inverted"
    if pattern.anti_pattern:
        return "anti-pattern"
    if pattern.decayed_confidence < config.demote_established_below and pattern.applications:
        return "decayed"
    if pattern.maturity == "proven":
        return "proven"
    if pattern.successes >= config.min_pattern_successes:
        return "reinforced"
    return "candidate"


def inversion_text(pattern: Pattern) -> str:
    return (
        f"AVOID: {pattern.label} — this pattern has caused repeated issues "
        f"({pattern.failures} failures vs {pattern.successes} successes)"
    )
