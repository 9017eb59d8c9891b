"""The whole pager on each backend: remember -> retrieve -> page -> recall -> forget -> reopen."""

from __future__ import annotations

from pathlib import Path

import pytest

import mempager
from mempager import MemoryNotFound, PagerConfig

HASH = PagerConfig(embedder="hash")


def test_remember_page_forget(location: str | Path) -> None:
    with mempager.open(location, actor="neo", config=HASH) as p:
        p.set_identity("You are Neo's release assistant.")
        p.add_rule("Never print secrets in a reply.")
        key = p.remember_fact("The deploy key lives in vault path secret/deploy/prod (id 0xdeadbeef).")
        tea = p.remember_user_fact("Neo prefers green tea over coffee.")
        events = p.remember_many(
            [
                {
                    "type": "event",
                    "text": f"Standup {i}: discussed ticket PAY-{100 + i}",
                    "created_at": f"2024-03-0{i + 1}",
                }
                for i in range(5)
            ]
        )
        # before any vector exists, the lexical and salience lanes already find a fresh write
        assert key in [s.uri for s in p.retrieve("where does the deploy key live?")]
        assert p.sync(timeout=60)
        assert p.stats()["pending_embeddings"] == 0 and p.stats()["vectors_indexed"] == 9
        hits = p.retrieve("deploy key vault")
        assert hits[0].uri == key and "semantic" in hits[0].lanes and "lexical" in hits[0].lanes
        page = p.page(goal="ship release 2.3", query="which vault path holds the deploy key?", turn="t1")
        text = page.render()
        assert "secret/deploy/prod" in text and "Never print secrets" in text and "release assistant" in text
        assert {m.uri for m in p.recall('"deploy key" OR "green tea"')} == {key, tea}
        assert [m.uri for m in p.recall("0xdeadbeef")] == [key]
        assert [m.uri for m in p.recall("PAY-102")] == [events[2]]
        assert len(p.recall(types=["event"], since="2024-03-03")) == 3
        assert p.forget(key) == 1
        assert key not in [s.uri for s in p.retrieve("deploy key vault")]
        assert p.recall("0xdeadbeef") == []
        with pytest.raises(MemoryNotFound):
            p.get(key)
        assert p.verify_audit().ok
        assert [e.op for e in p.audit()][-1] == "forget"
    with mempager.open(location, actor="neo", config=HASH) as again:
        assert again.get(tea).text == "Neo prefers green tea over coffee."
        assert [m.uri for m in again.recall("PAY-104")] == [events[4]]
        assert again.stats()["memories"] == 8
