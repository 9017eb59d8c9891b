"""The pinned block: contents, order, the 12-entry profile bound and the budget."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mempager
from mempager import PagerConfig, estimate_tokens
from mempager.paging.pinned import select_profile
from mempager.types import Memory, MemoryType, Scope, Source


def _open(path: Path, **cfg: object) -> mempager.Pager:
    return mempager.open(path, actor="neo", config=PagerConfig(embedder="hash", **cfg))  # type: ignore[arg-type]


def test_sections_in_order_with_their_contents(store_path: Path) -> None:
    with _open(store_path) as p:
        p.set_identity("I am Neo.")
        p.add_rule("Never push to main.")
        p.add_constraint("Spend at most $5.", strength="hard")
        p.add_constraint("Prefer tabs.", strength="soft")
        p.remember_user_fact("The user is Ana.")
        p.remember_fact("Paris is in France.")
        text = p.pinned("Fix the login bug")
    order = [
        "## Identity",
        "I am Neo.",
        "## Inviolable rules",
        "- Never push to main.",
        "## Hard constraints",
        "- Spend at most $5.",
        "## User profile",
        "- The user is Ana.",
        "## Active goal",
        "Fix the login bug",
    ]
    positions = [text.index(s) for s in order]
    assert positions == sorted(positions)
    assert "Prefer tabs" not in text and "Paris" not in text


def test_newest_identity_and_goal_win(store_path: Path) -> None:
    with _open(store_path) as p:
        p.set_identity("I am Neo.")
        p.set_identity("I am Trinity.")
        p.set_goal("old goal")
        p.set_goal("new goal")
        text = p.pinned()
        assert "Trinity" in text and "Neo" not in text
        assert "new goal" in text and "old goal" not in text
        assert "per-call goal" in p.pinned("per-call goal")
        p.set_identity("I am Neo.")  # back to an earlier identity
        assert "Neo" in p.pinned() and "Trinity" not in p.pinned()


def test_profile_is_deduped_bounded_to_12_newest_first(store_path: Path) -> None:
    with _open(store_path) as p:
        for i in range(20):
            p.remember_user_fact(f"User fact number {i}.")
        p.remember_user_fact("user fact number 3")  # duplicate statement
        lines = [ln for ln in p.pinned().splitlines() if ln.startswith("- User fact")]
    assert len(lines) == 12
    assert lines[0] == "- User fact number 19."
    assert len(set(lines)) == 12


def _profile(label: int, text: str, hours_ago: float, strength: float = 0.5, **extra: object) -> Memory:
    at = datetime(2026, 1, 1, tzinfo=timezone.utc) - timedelta(hours=hours_ago)
    return Memory(
        label=label,
        id=f"{label:016x}",
        uri=f"mem://neo/profile/{label:016x}",
        actor="neo",
        scope=Scope.GLOBAL,
        type=MemoryType.PROFILE,
        text=text,
        source=Source.USER,
        confidence=0.9,
        importance=0.5,
        strength=strength,
        created_at=at,
        updated_at=at,
        last_accessed_at=at,
        access_count=0,
        tags=(),
        metadata={},
        content_hash=str(label),
        **extra,
    )  # type: ignore[arg-type]


def test_select_profile_dedups_statements_newest_then_strongest_first() -> None:
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    memories = [
        _profile(1, "Ana leads billing.", hours_ago=5),
        _profile(2, "  ana LEADS billing ", hours_ago=1),  # the same statement, said again later
        _profile(3, "Ana drinks green tea.", hours_ago=3, strength=0.2),
        _profile(4, "Ana works from Lisbon.", hours_ago=3, strength=0.9),  # same time: the stronger first
        _profile(5, "Ana is on call.", hours_ago=0, superseded_by="mem://neo/profile/0000000000000009"),
        _profile(6, "Ana is on leave.", hours_ago=0, valid_until=now - timedelta(minutes=1)),
        _profile(7, "Ana joined in 2019.", hours_ago=9),
    ]
    chosen = select_profile(memories, limit=4, now=now)
    assert [m.label for m in chosen] == [2, 4, 3, 7]  # 1 repeats 2; 5 superseded, 6 expired
    assert [m.label for m in select_profile(memories, limit=2, now=now)] == [2, 4]


def test_budget_is_respected_with_a_visible_marker(store_path: Path) -> None:
    with _open(store_path, pinned_budget_tokens=120) as p:
        p.set_identity("I am Neo, " + "a careful agent " * 3)
        for i in range(30):
            p.add_rule(f"Rule {i}: always double-check the output of step {i}.")
        text = p.pinned("ship it")
    assert estimate_tokens(text) <= 120
    assert "pinned entries omitted" in text
    assert text.rstrip().endswith("ship it")  # the goal survives truncation
    assert "## Identity" in text


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    budget=st.integers(min_value=8, max_value=400),
    rules=st.lists(st.text(min_size=1, max_size=120).filter(lambda s: s.strip() and "\x00" not in s), max_size=8),
    goal=st.text(min_size=1, max_size=300).filter(lambda s: s.strip() and "\x00" not in s),
)
def test_pinned_never_exceeds_budget(tmp_path_factory, budget: int, rules: list[str], goal: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path_factory.mktemp("pin") / "p.duckdb"
    try:
        goal.encode("utf-8")
        for r in rules:
            r.encode("utf-8")
    except UnicodeEncodeError:
        return
    with _open(path, pinned_budget_tokens=budget) as p:
        for r in rules:
            p.add_rule(r)
        assert estimate_tokens(p.pinned(goal)) <= budget
