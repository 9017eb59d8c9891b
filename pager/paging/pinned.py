"""The pinned block: what must be in context every turn.

Identity, inviolable rules, hard constraints, the user profile (deduped, at most
``profile_limit`` entries, newest first) and the active goal, bounded by
``pinned_budget_tokens``. The goal is budgeted first (it is the turn's purpose) but rendered
last; the other sections fill in priority order and anything that does not fit is named in a
visible truncation marker rather than silently dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from mempager.lanes.fusion import is_current
from mempager.lanes.lines import neutral
from mempager.tokens import truncate_tokens
from mempager.types import Memory, MemoryType
from mempager.validate import normalize

HEADERS = {
    "identity": "## Identity",
    "rules": "## Inviolable rules",
    "constraints": "## Hard constraints",
    "profile": "## User profile",
    "goal": "## Active goal",
}


@dataclass(frozen=True, slots=True)
class PinnedBlock:
    text: str
    uris: tuple[str, ...]
    tokens: int
    omitted: tuple[str, ...]  # uris that did not fit the budget
    continuity_tokens: int = 0  # of ``tokens``: the pinned continuity section (paging/continuity.py)
    crystal_menu_tokens: int = 0  # of ``tokens``: the crystallized tier's menu (paging/tier_sections.py)
    has_crystals: bool = False  # the actor has crystals (read once per page: the page's crystal section needs it)

    def __str__(self) -> str:
        return self.text


def select_profile(memories: Sequence[Memory], limit: int, now: datetime) -> list[Memory]:
    seen: set[str] = set()
    out: list[Memory] = []
    ordered = sorted(memories, key=lambda m: (-m.created_at.timestamp(), -m.strength, -m.label))
    for memory in ordered:
        key = normalize(memory.text)
        if key in seen or not is_current(memory, now):
            continue
        seen.add(key)
        out.append(memory)
        if len(out) == limit:
            break
    return out


def build_pinned(
    *,
    identity: Memory | None,
    rules: Sequence[Memory],
    constraints: Sequence[Memory],
    profile: Sequence[Memory],
    goal: str | None,
    budget: int,
    estimate: Callable[[str], int],
) -> PinnedBlock:
    goal_text = truncate_tokens(neutral(goal), max(1, budget // 2)) if goal and goal.strip() else ""
    goal_part = f"{HEADERS['goal']}\n{goal_text}" if goal_text else ""
    remaining = budget - (estimate(goal_part) + 1 if goal_part else 0)
    sections: list[tuple[str, list[Memory]]] = [
        ("identity", [identity] if identity else []),
        ("rules", list(rules)),
        ("constraints", list(constraints)),
        ("profile", list(profile)),
    ]
    parts, uris, omitted = _fill(sections, remaining, estimate)
    if omitted:  # refill leaving room for a marker: the reader must see that something is missing
        marker = f"[… {{n}} pinned entries omitted: pinned budget of {budget} tokens reached]"
        reserve = estimate(marker.format(n=sum(len(m) for _, m in sections))) + 1
        parts, uris, omitted = _fill(sections, remaining - reserve, estimate)
        parts.append(marker.format(n=len(omitted)))
    if goal_part:
        parts.append(goal_part)
    text = "\n".join(p for p in parts if p)
    if estimate(text) > budget:  # only budgets smaller than the section headers get here
        text = truncate_tokens(text, budget)
    return PinnedBlock(text=text, uris=tuple(uris), tokens=estimate(text), omitted=tuple(omitted))


def _fill(
    sections: Sequence[tuple[str, list[Memory]]], remaining: int, estimate: Callable[[str], int]
) -> tuple[list[str], list[str], list[str]]:
    parts: list[str] = []
    uris: list[str] = []
    omitted: list[str] = []
    for name, memories in sections:
        header = HEADERS[name]
        lines: list[str] = []
        for memory in memories:
            safe = neutral(memory.text)
            line = safe if name == "identity" else f"- {safe}"
            if estimate("\n".join([header, *lines, line])) + 1 > remaining:
                omitted.append(memory.uri)
                continue
            lines.append(line)
            uris.append(memory.uri)
        if lines:
            block = "\n".join([header, *lines])
            parts.append(block)
            remaining -= estimate(block) + 1
    return parts, uris, omitted


def hard_constraints(memories: Sequence[Memory], now: datetime) -> list[Memory]:
    return [
        m
        for m in memories
        if m.type is MemoryType.CONSTRAINT and m.metadata.get("strength", "hard") == "hard" and is_current(m, now)
    ]
