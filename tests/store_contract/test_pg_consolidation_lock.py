"""The single-consolidator lock on a real PostgreSQL (migration 5, ``consolidation_locks``).

Seed 000 (compaction): "exclusive lock ... Concurrent compaction — other sessions skip; only one
sleeps at a time". The lock is one row per store; a claim is one ``INSERT ... ON CONFLICT DO
UPDATE ... WHERE expired`` statement, so of two racing consolidators exactly one wins, and a claim
left by a consolidator that died is taken over once it has expired (``consolidation_lock_seconds``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

import mempager
from mempager import PagerConfig
from mempager.consolidation.steps import BUSY, LOCK
from mempager.llm import ChatClient
from mempager.llm.testing import ChatServer

from .conftest import raw_sql

CFG = PagerConfig(embedder="hash", embed_workers=0, merge_threshold=3, consolidation_lock_seconds=60.0)
FACTS = ["The user's dog is called Biscuit.", "Biscuit is the user's dog.", "The dog: Biscuit.", "Tea, not coffee."]


def _llm(server: ChatServer) -> ChatClient:
    return ChatClient(server.url, "scripted", timeout=10, max_attempts=1)


def _locks(p: mempager.Pager) -> list[tuple[Any, ...]]:
    return raw_sql(p.store, "SELECT name, holder FROM consolidation_locks")


def test_a_second_consolidator_skips_while_the_first_holds_the_lock(pg_url: str) -> None:
    """While neo's merge waits for its LLM, trinity's merge on the same store is skipped (no LLM call,
    nothing written); once neo's is done the lock row is gone and the next merge runs."""
    with (
        mempager.open(pg_url, actor="neo", config=CFG) as neo,
        mempager.open(pg_url, actor="trinity", config=CFG) as tri,
    ):
        for text in FACTS:
            neo.remember_fact(text)
            tri.remember_fact(text)
        during: list[Any] = []

        def responder(body: Mapping[str, Any]) -> str:
            during.append((_locks(neo), tri.merge(llm=_llm(server))))  # the second consolidator, meanwhile
            return json.dumps({"merges": []})

        with ChatServer(responder) as server:
            first = neo.merge(llm=_llm(server))
            assert first.skipped is None and len(server.requests) == 1  # the second never asked the LLM
            (held, second) = during[0]
            assert [name for name, _ in held] == [LOCK] and second.skipped == BUSY and second.groups == ()
            assert _locks(neo) == []  # released after the step
            assert tri.merge(llm=_llm(server)).skipped is None and len(server.requests) == 2


def test_racing_claims_have_exactly_one_winner(pg_url: str) -> None:
    """Eight threads, each on its own pooled connection, claim the lock at the same moment."""
    with mempager.open(pg_url, actor="neo", config=CFG) as p:
        cs, now = p.store.consolidation, datetime.now(timezone.utc)
        start = threading.Barrier(8)
        won: list[str] = []

        def claim(i: int) -> None:
            start.wait()
            if cs.try_lock(LOCK, f"holder-{i}", now, 60):
                won.append(f"holder-{i}")

        threads = [threading.Thread(target=claim, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert len(won) == 1 and _locks(p) == [(LOCK, won[0])]
        cs.unlock(LOCK, "holder-someone-else")  # only the holder lets go
        assert _locks(p) == [(LOCK, won[0])]
        cs.unlock(LOCK, won[0])
        assert _locks(p) == []


def test_a_stale_lock_is_taken_over_after_its_expiry(pg_url: str) -> None:
    """A consolidator that died holding the lock blocks others only until its claim expires."""
    with mempager.open(pg_url, actor="neo", config=CFG) as p, ChatServer(lambda b: '{"merges": []}') as server:
        for text in FACTS:
            p.remember_fact(text)
        cs, now = p.store.consolidation, datetime.now(timezone.utc)
        # claimed 30 s ago for 60 s: not expired, so the merge is skipped without asking the LLM
        assert cs.try_lock(LOCK, "crashed-30s-ago", now - timedelta(seconds=30), 60)
        assert p.merge(llm=_llm(server)).skipped == BUSY and server.requests == []
        assert _locks(p) == [(LOCK, "crashed-30s-ago")]
        # the claim aged past its expiry: taken over, and the merge runs and releases it
        raw_sql(p.store, "UPDATE consolidation_locks SET expires_at = now() - interval '30 seconds'")
        assert p.merge(llm=_llm(server)).skipped is None and len(server.requests) == 1
        assert _locks(p) == []
        # a late unlock by the dead holder cannot free a claim that is someone else's now
        assert cs.try_lock(LOCK, "alive", datetime.now(timezone.utc), 60)
        cs.unlock(LOCK, "crashed-30s-ago")
        assert _locks(p) == [(LOCK, "alive")]
