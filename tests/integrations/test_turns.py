"""The per-turn helper end to end: page in before a turn, write back after, feedback to patterns."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import pytest

import mempager
from mempager import ConfigError, EmptyText, InvalidInput, InvalidText, PagerConfig, PatternSpec
from mempager.aio import AsyncPager
from mempager.turns import AsyncTurnMemory, TurnContext, TurnMemory, TurnRecord

from .conftest import REPO

GOAL = "ship billing release 2.4"
CONFIG = PagerConfig(embedder="hash")
RELEASE = PatternSpec(
    name="cut a release",
    trigger="ship a billing release",
    steps=["branch from main", "bump the version", "make deploy"],
)
TURNS = [
    "Heads-up: the deploy key for billing is in vault at secret/billing/deploy-7f3a9c2e.",
    "Which branch do we cut releases from?",
    "Where did I say the deploy key was?",
]


def _seed(p: mempager.Pager) -> None:
    for _ in range(3):  # three successes: proven enough to be injected into pages
        p.reinforce_pattern(RELEASE)


def _confidence(p: mempager.Pager) -> float:
    (pattern,) = p.patterns()
    return pattern.confidence


def _check_turn_one(ctx: TurnContext, record: TurnRecord, before: float, after: float) -> None:
    assert ctx.turn_id.startswith("turn-") and record.turn_id == ctx.turn_id
    assert [x.label for x in ctx.page.patterns] == ["cut a release"]
    assert "Pattern: cut a release" in ctx.system_block
    assert record.event_uri.startswith("mem://neo/event/")
    assert record.patterns_updated == 1
    assert after == pytest.approx(before + CONFIG.success_increment)


def _check_turn_three(ctx: TurnContext, turn_one: TurnContext) -> None:
    assert "secret/billing/deploy-7f3a9c2e" in ctx.system_block  # said in turn 1, paged into turn 3
    assert "secret/billing/deploy-7f3a9c2e" not in turn_one.system_block  # not known before it was said


def test_three_turns_sync(store_path: Path) -> None:
    with mempager.open(store_path, actor="neo", config=CONFIG) as p:
        _seed(p)
        memory = TurnMemory(p)
        before = _confidence(p)
        first = memory.before_turn(GOAL, TURNS[0])
        record = memory.after_turn(
            first.turn_id,
            TURNS[0],
            "Noted: vault, secret/billing/deploy-7f3a9c2e.",
            outcome="success",
            summary="Noted where the deploy key lives",
        )
        _check_turn_one(first, record, before, _confidence(p))
        assert record.outcome_uri is not None
        outcome = p.get(record.outcome_uri)
        assert outcome.text == "Noted where the deploy key lives — outcome: success"
        assert outcome.metadata["intent_ref"] == record.event_uri
        assert p.get(record.event_uri).text.endswith("\nOutcome: success")

        second = memory.before_turn(GOAL, TURNS[1], turn_id="my-turn-2")
        assert second.turn_id == "my-turn-2"
        failed = memory.after_turn("my-turn-2", TURNS[1], "main, I think.", outcome="failure")
        assert failed.patterns_updated == 1
        assert _confidence(p) == pytest.approx(before + CONFIG.success_increment - CONFIG.failure_decrement)

        third = memory.before_turn(GOAL, TURNS[2])
        _check_turn_three(third, first)
        assert memory.after_turn(third.turn_id, TURNS[2], "In vault.") == TurnRecord(
            third.turn_id, memory.pager.recall(types=["event"], limit=1)[0].uri
        )
        events = p.recall(types=["event"], tags=["turn"], limit=10)
        assert len(events) == 3 and events[-1].metadata["turn"] == first.turn_id
        assert events[-1].text.startswith("User: Heads-up") and "\nAssistant: Noted" in events[-1].text


def test_three_turns_asyncio(store_path: Path) -> None:
    async def main() -> None:
        async with await AsyncPager.open(store_path, actor="neo", config=CONFIG) as ap:
            await asyncio.to_thread(_seed, ap.sync_pager)
            memory = AsyncTurnMemory(ap)
            before = _confidence(ap.sync_pager)
            first = await memory.before_turn(GOAL, TURNS[0])
            record = await memory.after_turn(first.turn_id, TURNS[0], "Noted.", outcome="success")
            _check_turn_one(first, record, before, _confidence(ap.sync_pager))
            assert record.outcome_uri is None  # no summary: the outcome is feedback and a note on the event
            second = await memory.before_turn(GOAL, TURNS[1])
            await memory.after_turn(second.turn_id, TURNS[1], "From main.", outcome="partial")
            assert _confidence(ap.sync_pager) == pytest.approx(before + CONFIG.success_increment)  # partial: no move
            _check_turn_three(await memory.before_turn(GOAL, TURNS[2]), first)

    asyncio.run(main())


def test_rejected_after_turn_writes_nothing(store_path: Path) -> None:
    with mempager.open(store_path, actor="neo", config=CONFIG) as p:
        memory = TurnMemory(p)
        ctx = memory.before_turn(None, "hello")
        with pytest.raises(InvalidInput, match="outcome must be one of"):
            memory.after_turn(ctx.turn_id, "hello", "hi", outcome="great")
        with pytest.raises(InvalidText, match="assistant_reply must be a str"):
            memory.after_turn(ctx.turn_id, "hello", None)  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match="pass outcome"):
            memory.after_turn(ctx.turn_id, "hello", "hi", summary="greeted")
        assert p.stats()["memories"] == 0
        memory.after_turn(ctx.turn_id, "hello", "hi", outcome="success")
        with pytest.raises(InvalidInput, match="already has feedback"):  # a second verdict is refused...
            memory.after_turn(ctx.turn_id, "hello", "hi", outcome="failure")
        assert p.stats()["memories"] == 1  # ...before anything is written
        with pytest.raises(EmptyText):
            memory.before_turn(None, "   ")
        with pytest.raises(ConfigError, match="max_turn_tokens"):
            TurnMemory(p, max_turn_tokens=0)


def test_turns_are_kept_apart_and_bounded(store_path: Path) -> None:
    with mempager.open(store_path, actor="neo", config=CONFIG) as p:
        memory = TurnMemory(p, max_turn_tokens=64)
        a = memory.after_turn("t1", "ping", "pong")
        b = memory.after_turn("t2", "ping", "pong")
        assert a.event_uri != b.event_uri  # the same words twice are two turns, not one
        huge = "x " * 10_000 + "sha 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
        stored = p.get(memory.after_turn("t3", huge, "").event_uri).text
        assert len(stored.encode()) <= 64 * 4 + 64 and "9f86d08" not in stored  # cut whole, never split
        assert stored.endswith("Assistant: (nothing)")


def _agent_section() -> str:
    readme: str = (REPO / "README.md").read_text(encoding="utf-8")
    return readme[readme.index("## Use it from an agent") :]


@pytest.mark.slow
def test_readme_example_runs_offline_and_carries_memory_to_turn_three(
    tmp_path: Path, offline_env: dict[str, str]
) -> None:
    (example,) = [b for b in re.findall(r"```python\n(.*?)```", _agent_section(), re.S) if "TurnMemory(" in b]
    script = tmp_path / "example.py"
    script.write_text(example + "\nprint('embedder:', p.semantic.model)\n", encoding="utf-8")
    env = {**offline_env, "TMPDIR": str(tmp_path)}  # its temporary store lands under tmp_path too
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "agent: It is in vault at secret/billing/deploy." in done.stdout
    assert "embedder: st:all-MiniLM-L6-v2" in done.stdout  # the real local model, not the hash fallback
