"""Merge atomicity (issue 21 item 2) on DuckDB and on PostgreSQL: one merge group is one transaction.

Seed 000 (compaction): "it never corrupts existing memory". A merge group writes the merged memory
and supersedes every original; here the second of those writes fails (an original was forgotten
while the LLM was answering: a real race, not a mock) and nothing of the group is left: no merged
memory, no original superseded, no audit entry. The other group of the same reply still applies.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import mempager
from mempager import PagerConfig
from mempager.errors import MemoryNotFound, PagerError
from mempager.llm import ChatClient
from mempager.llm.testing import ChatServer
from mempager.types import MemoryType, NewMemory, Source

CFG = PagerConfig(embedder="hash", embed_workers=0, merge_threshold=3)
DOG = ["The user's dog is called Biscuit.", "Biscuit is the name of the user's dog.", "The dog's name: Biscuit."]
OFFICE = ["The office is in Leeds.", "The office moved from Leeds to York in May."]


def _id(uri: str) -> str:
    return uri.rsplit("/", 1)[-1]


def _content(p: mempager.Pager, path: Path) -> tuple[Any, ...]:
    """Every field of every memory, the audit chain, the review queue."""
    p.export(path)
    audit = [(e.seq, e.op, e.uri, e.content_hash) for e in p.audit(limit=1_000_000)]
    review = [(r.id, r.status, dict(r.payload)) for r in p.review(None)]
    return path.read_text(encoding="utf-8"), audit, review


def test_a_failure_between_the_writes_leaves_nothing_of_the_group(location: str | Path, tmp_path: Path) -> None:
    with mempager.open(location, actor="neo", config=CFG) as p:
        dog = [p.remember_fact(t) for t in DOG]
        old, new = (p.remember_fact(t) for t in OFFICE)
        seen: list[tuple[Any, ...]] = []

        def responder(body: Mapping[str, Any]) -> str:
            # while the "LLM" thinks, a user forgets the last restatement; the store is then what a
            # failed group must leave it as
            p.forget(dog[2])
            seen.append(_content(p, tmp_path / "during.jsonl"))
            return json.dumps(
                {
                    "merges": [{"ids": [_id(u) for u in dog], "text": "The user's dog is Biscuit."}],
                    "superseded": [{"id": _id(old), "by": _id(new)}],
                }
            )

        with ChatServer(responder) as server:
            result = p.merge(llm=ChatClient(server.url, "scripted", timeout=10, max_attempts=1))
        assert result.skipped is None
        failed = next(g for g in result.groups if g.kind == "merge")
        assert failed.by is None and failed.skipped and "forgotten or superseded" in failed.skipped
        assert p.get(old).superseded_by == new  # the other group of the reply applied
        rows, audit, review = _content(p, tmp_path / "after.jsonl")
        before_rows, before_audit, before_review = seen[0]
        assert all(p.get(u).superseded_by is None for u in dog[:2])
        # nothing of the failed group: what changed since the forget is exactly the other group
        changed = _rows(before_rows)
        changed[old] = {**changed[old], "superseded_by": new}
        assert _rows(rows) == changed and review == before_review
        assert [e[1:] for e in audit[len(before_audit) :]] == [("supersede", old, p.get(old).content_hash)]
        assert audit[: len(before_audit)] == before_audit and p.verify_audit().ok


def _rows(export: str) -> dict[str, dict[str, Any]]:
    """The exported memories by uri, without ``updated_at`` (a supersession stamps it)."""
    rows = [json.loads(line) for line in export.splitlines()[1:]]
    return {r["uri"]: {k: v for k, v in r.items() if k != "updated_at"} for r in rows}


def test_apply_merge_is_all_or_nothing_at_the_store(store: Any) -> None:
    """The store seam itself: a missing original rolls back the put and the supersessions before it."""
    a, b, c = (r.memory for r in store.put_many([NewMemory(actor="neo", type=MemoryType.FACT, text=t) for t in DOG]))
    merged = NewMemory(
        actor="neo", type=MemoryType.FACT, text="The user's dog is Biscuit.", source=Source.CONSOLIDATION
    )
    audit = len(store.audit_entries("neo"))
    with pytest.raises(MemoryNotFound, match="nothing of this merge group"):
        store.consolidation.apply_merge("neo", [a.id, b.id, "0000000000000000"], item=merged)
    assert store.audit_entries("neo")[audit:] == []
    assert [m.text for m in store.query("neo", limit=10, order="oldest")] == DOG
    assert all(m.superseded_by is None for m in store.query("neo", limit=10))
    by, put = store.consolidation.apply_merge("neo", [a.id, b.id, c.id], item=merged)
    assert put is not None and put.memory.uri == by and put.memory.source is Source.CONSOLIDATION
    assert {m.id: m.superseded_by for m in store.query("neo", limit=10) if m.id != put.memory.id} == {
        a.id: by,
        b.id: by,
        c.id: by,
    }
    assert [e.op for e in store.audit_entries("neo")[audit:]] == ["remember", "supersede", "supersede", "supersede"]
    # an original superseded meanwhile is as stale as a forgotten one
    with pytest.raises(MemoryNotFound):
        store.consolidation.apply_merge("neo", [a.id], by=by)
    assert store.verify_audit().ok


def test_an_accepted_merge_closes_its_review_item_in_the_same_transaction(location: str | Path) -> None:
    """Copilot (seed 000 "confirm ambiguous"): accepting a queued merge writes the merged memory,
    supersedes every original and closes the item together; a second accept finds it decided and
    writes nothing."""
    copilot = PagerConfig(embedder="hash", embed_workers=0, merge_threshold=3, memory_mode="copilot")
    with mempager.open(location, actor="neo", config=copilot) as p:
        dog = [p.remember_fact(t) for t in DOG]
        p.remember_fact(OFFICE[0])
        reply = {"merges": [{"ids": [_id(u) for u in dog], "text": "The user's dog is Biscuit."}]}
        with ChatServer(lambda body: json.dumps(reply)) as server:
            (group,) = p.merge(llm=ChatClient(server.url, "scripted", timeout=10, max_attempts=1)).groups
        assert group.review and all(p.get(u).superseded_by is None for u in dog)
        item = next(i for i in p.review() if i.kind == "merge")
        uri = p.decide(item.id, accept=True)
        assert uri is not None and {p.get(u).superseded_by for u in dog} == {uri}
        assert [i.status for i in p.review(None) if i.id == item.id] == ["accepted"]
        count = len(p.audit(limit=1_000_000))
        with pytest.raises(PagerError):
            p.decide(item.id, accept=True)
        assert len(p.audit(limit=1_000_000)) == count
