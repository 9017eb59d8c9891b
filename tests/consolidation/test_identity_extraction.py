"""Identity extraction (issue 21 item 3) on a real DuckDB file with a real chat-completions server.

Seed 000 ("identity extraction"): every 5 turns a background call extracts durable facts about the
user; it never blocks the turn, and like every consolidation step it is "silently skipped on LLM
failure — it never corrupts existing memory". Seed 000 "memory modes": in copilot what an LLM
proposes waits in the review queue; issue 21 item 9: an identity always waits for a human.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

import mempager
from mempager.consolidation.identity import IN_FLIGHT
from mempager.llm import ChatClient
from mempager.llm.testing import ChatServer, Reply
from mempager.turns import TurnMemory, TurnRecord

from .llm_helpers import open_pager, scripted_llm

FACTS = {
    "facts": [
        {"kind": "identity", "text": "The user is Neo, a backend engineer at Zion.", "confidence": "high"},
        {"kind": "profile", "text": "The user lives in Leeds.", "confidence": "medium"},
        {"kind": "preference", "text": "The user prefers short answers.", "confidence": "low"},
    ]
}
VALID = json.dumps(FACTS)


def _turns(memory: TurnMemory, start: int, stop: int) -> list[TurnRecord]:
    return [
        memory.after_turn(f"t{i}", f"Message {i}: I'm Neo, I live in Leeds; keep it short.", f"Reply {i}.")
        for i in range(start, stop)
    ]


def _content(p: mempager.Pager, path: Path) -> tuple[dict[str, Any], list[tuple[Any, ...]], list[Any]]:
    """Every memory (by uri, every field), the audit chain, the review queue."""
    p.export(path)
    rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()[1:]]
    audit = [(e.seq, e.op, e.uri, e.content_hash) for e in p.audit(limit=1_000_000)]
    return {r["uri"]: r for r in rows}, audit, [(r.id, r.status, dict(r.payload)) for r in p.review(None)]


def test_it_fires_on_turn_5_and_10_and_not_4(store_path: Path, server: ChatServer) -> None:
    with open_pager(store_path) as p, TurnMemory(p, llm=scripted_llm(server)) as memory:
        server.script(Reply(content='{"facts": []}'), Reply(content='{"facts": []}'))
        first = _turns(memory, 1, 5)
        assert [r.identity_extraction for r in first] == [False] * 4 and server.requests == []
        assert _turns(memory, 5, 6)[0].identity_extraction
        assert memory.identity is not None and memory.identity.wait(10)
        assert len(server.requests) == 1
        later = _turns(memory, 6, 11)
        assert [r.identity_extraction for r in later] == [False] * 4 + [True]
        assert memory.identity.wait(10) and len(server.requests) == 2
        # each extraction reads the turns since the last one, and only those
        asked = [json.dumps(r.body["messages"]) for r in server.requests]
        assert "Message 1:" in asked[0] and "Message 5:" in asked[0] and "Message 6:" not in asked[0]
        assert "Message 6:" in asked[1] and "Message 10:" in asked[1] and "Message 5:" not in asked[1]
        assert memory.identity.last is not None and memory.identity.last.skipped is None


def test_a_valid_reply_queues_the_facts_with_their_provenance(store_path: Path, server: ChatServer) -> None:
    """Copilot: every extracted fact waits in the review queue (source consolidation, derived from the
    five turns' events); nothing becomes a memory; the same facts are not proposed twice."""
    with open_pager(store_path, memory_mode="copilot") as p, TurnMemory(p, llm=scripted_llm(server)) as memory:
        server.script(Reply(content=VALID), Reply(content=VALID))
        records = _turns(memory, 1, 6)
        assert memory.identity is not None and memory.identity.wait(10)
        result = memory.identity.last
        assert result is not None and result.skipped is None and result.stored == ()
        assert len(result.queued) == 3 and result.read == tuple(r.event_uri for r in records)
        items = [i for i in p.review() if i.kind == "memory"]
        assert sorted(i.payload["type"] for i in items) == ["identity", "preference", "profile"]
        for item in items:
            assert item.payload["source"] == "consolidation"
            assert item.payload["metadata"]["derived_from"] == [r.event_uri for r in records]
        assert p.stats()["memories"] == 5  # the five turns' events, nothing else
        _turns(memory, 6, 11)
        assert memory.identity.wait(10) and memory.identity.last is not None
        assert memory.identity.last.queued == () and len(p.review()) == 3  # already proposed


def test_autopilot_stores_facts_but_an_identity_waits_for_a_human(store_path: Path, server: ChatServer) -> None:
    """Issue 21 item 9: nothing an LLM wrote becomes an identity without a human accept."""
    with open_pager(store_path) as p, TurnMemory(p, llm=scripted_llm(server)) as memory:
        server.script(Reply(content=VALID))
        _turns(memory, 1, 6)
        assert memory.identity is not None and memory.identity.wait(10)
        result = memory.identity.last
        assert result is not None and len(result.stored) == 2 and len(result.queued) == 1
        stored = [p.get(u) for u in result.stored]
        assert {m.type.value for m in stored} == {"profile", "preference"}
        assert all(m.source.value == "consolidation" and m.metadata["derived_from"] for m in stored)
        assert [i.payload["type"] for i in p.review()] == ["identity"]
        assert "Neo, a backend engineer" not in p.page("who am I?").render()  # not pinned until accepted


@pytest.mark.parametrize(
    ("reply", "cfg"),
    [
        (Reply(content="The user is Neo."), {}),  # malformed JSON
        (Reply(content='{"facts": [{"kind": "boss", "text": "x"}]}'), {}),  # wrong schema
        (Reply(status=500), {}),  # retried, then given up
        (Reply(content=VALID, delay=1.0), {}),  # slower than the client's timeout (0.5 s)
        (Reply(content=VALID, delay=0.6), {"identity_timeout_seconds": 0.3}),  # valid, but too late
    ],
    ids=["malformed", "wrong-schema", "http-500", "slow", "late"],
)
def test_any_failure_changes_nothing(
    store_path: Path, server: ChatServer, reply: Reply, cfg: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    llm = scripted_llm(server) if not cfg else ChatClient(server.url, "scripted", timeout=5, max_attempts=1)
    with open_pager(store_path, memory_mode="copilot", **cfg) as p, TurnMemory(p, llm=llm) as memory:
        _turns(memory, 1, 5)
        rows, audit, review = _content(p, store_path.parent / "before.jsonl")
        server.script(reply, reply)
        with caplog.at_level(logging.WARNING, logger="mempager.consolidation"):
            started = time.monotonic()
            (fifth,) = _turns(memory, 5, 6)
            assert time.monotonic() - started < 0.9  # the turn never waits for the LLM (the slow one takes 1 s)
            assert fifth.identity_extraction and memory.identity is not None and memory.identity.wait(10)
        assert memory.identity.last is not None and memory.identity.last.skipped
        assert "identity extraction skipped, nothing changed" in caplog.text
        after_rows, after_audit, after_review = _content(p, store_path.parent / "after.jsonl")
        # exactly the fifth turn's event more: same rows otherwise, same review queue, one audit entry
        assert set(after_rows) - set(rows) == {fifth.event_uri} and {u: after_rows[u] for u in rows} == rows
        assert after_review == review and after_audit[: len(audit)] == audit
        assert [e[1:3] for e in after_audit[len(audit) :]] == [("remember", fifth.event_uri)]


def test_one_extraction_in_flight_per_pager(store_path: Path, server: ChatServer) -> None:
    llm = ChatClient(server.url, "scripted", timeout=5, max_attempts=1)
    with open_pager(store_path, identity_every_turns=1) as p:
        server.script(Reply(content='{"facts": []}', delay=0.8), Reply(content='{"facts": []}'))
        with TurnMemory(p, llm=llm) as one, TurnMemory(p, llm=llm) as two:
            assert _turns(one, 1, 2)[0].identity_extraction
            assert not _turns(one, 2, 3)[0].identity_extraction  # the first is still waiting for the LLM
            assert not _turns(two, 3, 4)[0].identity_extraction  # whichever helper asks: one per pager
            assert two.identity is not None and two.identity.last is not None
            assert two.identity.last.skipped == IN_FLIGHT
            assert one.identity is not None and one.identity.wait(10)
            assert one.identity.last is not None and one.identity.last.skipped is None
            assert _turns(two, 4, 5)[0].identity_extraction  # free again
            assert two.identity.wait(10) and two.identity.last.skipped is None
        assert len(server.requests) == 2


def test_no_llm_configured_is_a_logged_skip(
    store_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("MEMPAGER_LLM_URL", raising=False)
    with open_pager(store_path) as p, TurnMemory(p) as memory, caplog.at_level(logging.INFO, "mempager.consolidation"):
        records = _turns(memory, 1, 6)
        assert not any(r.identity_extraction for r in records)
        assert memory.identity is not None and memory.identity.last is not None
        assert "no LLM configured" in (memory.identity.last.skipped or "")
        assert "identity extraction skipped" in caplog.text and memory.identity.started == 0
    with open_pager(store_path, identity_every_turns=0) as p:
        assert TurnMemory(p).identity is None  # 0: off, nothing built


def test_close_cancels_an_extraction_waiting_for_the_llm(store_path: Path, server: ChatServer) -> None:
    """close() does not wait for a slow LLM, and the reply that comes after it writes nothing."""
    with open_pager(store_path, memory_mode="copilot") as p:
        memory = TurnMemory(p, llm=ChatClient(server.url, "scripted", timeout=5, max_attempts=1))
        server.script(Reply(content=VALID, delay=1.0))
        assert _turns(memory, 1, 6)[-1].identity_extraction
        started = time.monotonic()
        memory.close()
        assert memory.identity is not None and memory.identity.wait(5)
        assert time.monotonic() - started < 3.0
        assert memory.identity.last is not None and "closed" in (memory.identity.last.skipped or "")
        assert p.review() == [] and p.stats()["memories"] == 5


def test_a_process_ending_with_an_extraction_in_flight_exits_cleanly(tmp_path: Path) -> None:
    """No close() at all: the exit hook (pager/shutdown.py) stops the extraction before it closes the
    pager; the process keeps its own exit status (no abort), and nothing of the reply is written."""
    script = textwrap.dedent(
        f"""
        import json, sys
        import mempager
        from mempager.llm import ChatClient
        from mempager.llm.testing import ChatServer, Reply
        from mempager.turns import TurnMemory
        server = ChatServer().__enter__()
        server.script(Reply(content={VALID!r}, delay=2.0))
        p = mempager.open({str(tmp_path / "s.duckdb")!r}, actor="neo",
                          config=mempager.PagerConfig(embedder="hash", memory_mode="copilot", identity_every_turns=1))
        memory = TurnMemory(p, llm=ChatClient(server.url, "scripted", timeout=10, max_attempts=1))
        assert memory.after_turn("t1", "I'm Neo.", "Hi Neo.").identity_extraction
        sys.exit(7)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 7, done.stderr
    assert "terminate" not in done.stderr and "FATAL" not in done.stderr
    with mempager.open(tmp_path / "s.duckdb", actor="neo", config=mempager.PagerConfig(embedder="hash")) as p:
        assert p.review() == [] and p.stats()["memories"] == 1
