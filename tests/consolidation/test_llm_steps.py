"""Sleep replay, reflection, distillation, the automatic wrap (issue 21 items 4, 5, 6) and the human
accept for pinned material (item 9), on a real DuckDB file with a real chat server on 127.0.0.1.

Each test names the seed rule it proves. After every LLM failure the store's content (exported
rows, audit chain, review queue, continuity) is compared in full with what it was before.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mempager.consolidation.replay import Step, should_replay
from mempager.llm.testing import ChatServer, Reply
from mempager.patterns import Pattern

from .llm_helpers import open_pager as _open
from .llm_helpers import scripted_llm as _llm
from .llm_helpers import snapshot

FAILURES = [
    Reply(content="not json at all"),
    Reply(content='{"unexpected": true}'),
    Reply(status=500),
    Reply(content="{}", delay=2.0),
]
FAILURE_IDS = ["malformed", "wrong-schema", "http-500", "timeout"]


# -- sleep replay (item 4) -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("statuses", "go"),
    [
        ([], False),
        (["error"], False),  # fewer than 2 steps: too short, even with an error
        (["ok", "ok"], False),
        (["ok", "ok", "ok", "ok"], False),
        (["ok", "error"], True),
        (["ok", "cancelled"], True),
        (["ok"] * 5, True),
    ],
)
def test_should_replay_heuristics(statuses: list[str], go: bool) -> None:
    """Seed 000 should_replay: replay on any error, any cancelled step or 5+ steps; skip < 2 steps; no LLM call."""
    assert should_replay([Step(f"step {i}", s) for i, s in enumerate(statuses)])[0] is go


REPLAY = [
    {"text": "pip install -r requirements.txt", "status": "ok"},
    {"text": "call the CoinGecko API 80 times", "status": "error", "output": "HTTP 429 rate limited"},
]
LESSONS = {
    "rules": [{"kind": "never", "text": "call CoinGecko more than 50 times a minute", "confidence": "high"}],
    "lessons": [
        {"text": "CoinGecko's free tier rate-limits at ~50 req/min", "topic": "api coingecko", "confidence": "high"}
    ],
}


def test_replay_extracts_lessons_and_queues_rules_for_a_human(store_path: Path, server: ChatServer) -> None:
    """Seed 000 replay_and_extract: rules and lessons with scope and confidence, source=consolidation,
    through the encoding gate; item 9: the rule waits for a human accept even in autopilot."""
    with _open(store_path) as p:
        assert p.replay(REPLAY[:1], llm=_llm(server)).skipped.startswith("not replayed")  # type: ignore[union-attr]
        assert server.requests == []
        server.script(Reply(content=json.dumps(LESSONS)))
        result = p.replay(REPLAY, llm=_llm(server))
        assert result.skipped is None and len(result.stored) == 1 and len(result.queued) == 1
        lesson = p.get(result.stored[0])
        assert lesson.source.value == "consolidation" and lesson.tags == ("lesson", "api-coingecko")
        assert (
            "[error] call the CoinGecko API 80 times -> HTTP 429" in server.requests[0].body["messages"][1]["content"]
        )
        assert p.recall(types=["rule"]) == [] and "CoinGecko" not in p.pinned()
        [item] = p.review()
        assert item.payload["type"] == "rule" and item.payload["text"].startswith("Never call CoinGecko")
        uri = p.decide(item.id, accept=True)
        assert uri and "Never call CoinGecko" in p.pinned()


@pytest.mark.parametrize("reply", FAILURES, ids=FAILURE_IDS)
def test_replay_failure_changes_nothing(store_path: Path, server: ChatServer, reply: Reply) -> None:
    """Seed 000: an LLM failure skips the step and never corrupts existing memory."""
    with _open(store_path) as p:
        p.remember_fact("something already known")
        before = snapshot(p, store_path.parent / "before.jsonl")
        server.script(reply, reply)
        assert p.replay(REPLAY, llm=_llm(server)).skipped
        assert snapshot(p, store_path.parent / "after.jsonl") == before


# -- reflection and distillation (item 5) -------------------------------------------------------
def _diary(learning: str, status: str = "success") -> str:
    return json.dumps(
        {
            "accomplishments": ["parser done"],
            "decisions": ["buffer chunks"],
            "challenges": ["split chunks"],
            "key_learnings": [learning],
            "tags": ["sse", "streaming"],
            "status": status,
            "quality_score": 0.85,
        }
    )


def test_reflect_stores_a_diary_entry_and_distill_queues_a_nascent_pattern(
    store_path: Path, server: ChatServer
) -> None:
    """Seed 002: reflection turns a transcript into a diary entry (accomplishments, decisions,
    challenges, key_learnings, tags, status, quality_score); distillation turns learnings recurring
    across entries into playbook rules with source_entries, nascent, and (item 9) a human accepts them."""
    with _open(store_path) as p:
        server.script(Reply(content=_diary("Always buffer SSE until a blank line")))
        first = p.reflect("user: fix the SSE parser\nassistant: done", status="mixed", llm=_llm(server))
        assert first.skipped is None and first.entry["status"] == "mixed"  # the caller's status wins
        entry = p.get(first.uri or "")
        assert (
            entry.type.value == "event" and "diary" in entry.tags and entry.metadata["diary"]["quality_score"] == 0.85
        )
        assert entry.source.value == "consolidation"
        server.script(Reply(content=_diary("Buffer SSE chunks until the double newline")))
        second = p.reflect([{"role": "user", "content": "SSE again"}], llm=_llm(server))
        ids = [(first.uri or "").rsplit("/", 1)[-1], (second.uri or "").rsplit("/", 1)[-1]]
        rule = {
            "rules": [
                {"text": "Buffer SSE chunks until a blank line before parsing", "source_entries": ids, "tags": ["sse"]}
            ]
        }
        server.script(Reply(content=json.dumps(rule)))
        result = p.distill(llm=_llm(server))
        assert result.skipped is None and result.entries == 2 and len(result.queued) == 1
        assert p.patterns() == []  # nothing in the playbook before a human accepts
        [item] = [i for i in p.review() if i.payload.get("type") == "pattern"]
        uri = p.decide(item.id, accept=True)
        pattern = Pattern.from_memory(p.get(uri or ""))
        assert pattern.maturity == "nascent" and p.get(uri or "").metadata["source_entries"] == ids
        server.script(Reply(content=json.dumps(rule)))
        again = p.distill(llm=_llm(server))
        assert again.queued == () and len(again.known) == 1  # not proposed twice


@pytest.mark.parametrize(
    "reply",
    [*FAILURES, Reply(content='{"rules": [{"text": "x", "source_entries": ["a", "b"]}]}')],
    ids=[*FAILURE_IDS, "unknown-entries"],
)
def test_distill_failure_changes_nothing(store_path: Path, server: ChatServer, reply: Reply) -> None:
    with _open(store_path) as p:
        for learning in ("one", "two"):
            server.script(Reply(content=_diary(learning)))
            assert p.reflect("a transcript", llm=_llm(server)).skipped is None
        before = snapshot(p, store_path.parent / "before.jsonl")
        server.script(reply, reply)
        assert p.distill(llm=_llm(server)).skipped
        assert snapshot(p, store_path.parent / "after.jsonl") == before


@pytest.mark.parametrize(
    "reply", [*FAILURES, Reply(content=_diary("x").replace("0.85", "7"))], ids=[*FAILURE_IDS, "score-out-of-range"]
)
def test_reflect_failure_changes_nothing(store_path: Path, server: ChatServer, reply: Reply) -> None:
    with _open(store_path) as p:
        before = snapshot(p, store_path.parent / "before.jsonl")
        server.script(reply, reply)
        assert p.reflect("a transcript", llm=_llm(server)).skipped
        assert snapshot(p, store_path.parent / "after.jsonl") == before


# -- the automatic wrap (item 6) -----------------------------------------------------------------
GOOD = (
    "## State\nDeploy week.\n## Patterns\n- Small deploys are safe | 1x (2026-05-04)\n"
    "## Decisions\nShip small.\n## Context\nTwo people.\n"
)


def test_auto_wrap_saves_through_the_immune_system(store_path: Path, server: ChatServer) -> None:
    """Seed 003: prepare_wrap -> the LLM compresses -> save_continuity validates; the verdicts come back
    unchanged, and a continuity the validator refuses is not saved (the LLM never bypasses it)."""
    with _open(store_path) as p:
        assert p.auto_wrap(llm=_llm(server)).skipped.startswith("nothing written")  # type: ignore[union-attr]
        p.remember("event", "Deployed a small change on Monday.")
        server.script(Reply(content="no sections here at all"))
        refused = p.auto_wrap(llm=_llm(server))
        assert refused.refused and refused.save is None and p.continuity() == ""
        assert "wrap.refused" in [e.op for e in p.audit()]
        server.script(Reply(content=f"```markdown\n{GOOD}```"))
        done = p.auto_wrap(llm=_llm(server))
        assert done.skipped is None and done.save is not None and done.save.saved
        assert p.continuity().startswith("## State\nDeploy week.")
        assert "Deployed a small change" in server.requests[-1].body["messages"][1]["content"]


@pytest.mark.parametrize("reply", [*FAILURES[2:], Reply(content="   ")], ids=["http-500", "timeout", "empty"])
def test_auto_wrap_llm_failure_leaves_memories_and_continuity(
    store_path: Path, server: ChatServer, reply: Reply
) -> None:
    """An LLM failure saves nothing: the memories and the continuity are unchanged, and the wrap stays
    open (prepare_wrap hands the same one back, as after any unsaved prepare)."""
    with _open(store_path) as p:
        p.remember("event", "Deployed a small change on Monday.")
        number = p.prepare_wrap().number
        before = snapshot(p, store_path.parent / "before.jsonl")
        server.script(reply, reply)
        assert p.auto_wrap(llm=_llm(server)).skipped
        assert snapshot(p, store_path.parent / "after.jsonl") == before
        assert p.prepare_wrap().number == number


# -- item 9: nothing an LLM wrote becomes pinned without a human -----------------------------------
@pytest.mark.parametrize("mode", ["autopilot", "copilot"])
@pytest.mark.parametrize("mtype", ["identity", "rule", "constraint"])
def test_llm_written_pinned_material_waits_for_a_human(store_path: Path, mode: str, mtype: str) -> None:
    """Issue 21 item 9 (seed 003's single-consolidator rule: the identity layer is gated to human
    authority): LLM- or consolidation-sourced identity, rules and constraints are queued in every mode,
    at any confidence; accepted, they are pinned, audited and forgettable like any memory."""
    with _open(store_path, memory_mode=mode) as p:
        for source in ("llm", "consolidation"):
            held = p.remember(mtype, f"{source} says: always answer in French", source=source, confidence=1.0)
            assert held.startswith("review://")
        assert p.recall(types=[mtype]) == [] and "French" not in p.pinned()
        first = p.review()[0]
        uri = p.decide(first.id, accept=True)
        assert uri and "French" in p.pinned()
        assert [e.op for e in p.history(uri)] == ["remember", "review"]  # the human accept is audited
        assert p.forget(uri) == 1 and "French" not in p.pinned()
        assert p.remember(mtype, "the user's own words", source="user").startswith("mem://")
