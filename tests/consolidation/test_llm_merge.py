"""Merge (issue 21 item 2) on a real DuckDB file with a real chat-completions server on 127.0.0.1.

Seed 000 (compaction): "when a memory file exceeds the threshold (20 entries) ... the coding model
removes duplicates, merges restatements, and drops superseded entries ... exclusive lock, silently
skipped on LLM failure — it never corrupts existing memory" and "concurrent compaction: other
sessions skip". Here "drops" is supersession: nothing is hard-deleted.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import mempager
from mempager.consolidation.steps import BUSY, LOCK
from mempager.errors import InvalidInput
from mempager.llm.testing import ChatServer, Reply

from .llm_helpers import open_pager as _open
from .llm_helpers import scripted_llm as _llm
from .llm_helpers import snapshot

RESTATED = ["The user's dog is called Biscuit.", "Biscuit is the name of the user's dog.", "The dog's name: Biscuit."]


def _fill(p: mempager.Pager) -> dict[str, str]:
    """22 facts (> the threshold of 20): three restatements, a duplicate pair, an old and a new office."""
    uris = {f"r{i}": p.remember_fact(t) for i, t in enumerate(RESTATED)}
    uris["d0"] = p.remember_fact("The staging server runs Ubuntu 24.04.")
    uris["d1"] = p.remember_fact("Staging runs on Ubuntu 24.04.")
    uris["old"] = p.remember_fact("The office is in Leeds.")
    uris["new"] = p.remember_fact("The office moved from Leeds to York in May.")
    for i in range(15):
        p.remember_fact(f"Unrelated fact number {i} about topic {i * 7}.")
    return uris


def _id(uri: str) -> str:
    return uri.rsplit("/", 1)[-1]


def _proposal(u: dict[str, str]) -> str:
    return json.dumps(
        {
            "merges": [{"ids": [_id(u["r0"]), _id(u["r1"]), _id(u["r2"])], "text": "The user's dog is Biscuit."}],
            "duplicates": [{"keep": _id(u["d0"]), "drop": [_id(u["d1"])]}],
            "superseded": [{"id": _id(u["old"]), "by": _id(u["new"])}],
        }
    )


def test_merge_supersedes_originals_and_keeps_provenance(store_path: Path, server: ChatServer) -> None:
    """Seed 000 compaction: restatements merged, a duplicate dropped, a superseded entry replaced;
    the originals stay in the store, linked by superseded_by and out of pages; the merged memory has
    source=consolidation and derived_from; every change is audited."""
    with _open(store_path) as p:
        u = _fill(p)
        server.script(Reply(content=_proposal(u)))
        result = p.merge(llm=_llm(server))
        assert result.skipped is None and result.examined == (("fact", "global", 22),)
        merged = next(g for g in result.groups if g.kind == "merge")
        new = p.get(merged.by or "")
        assert new.source.value == "consolidation" and new.text == "The user's dog is Biscuit."
        assert new.metadata["derived_from"] == [u["r0"], u["r1"], u["r2"]]
        for key in ("r0", "r1", "r2"):
            assert p.get(u[key]).superseded_by == new.uri  # kept, linked, never hard-deleted
        assert p.get(u["d1"]).superseded_by == u["d0"] and p.get(u["d0"]).superseded_by is None
        assert p.get(u["old"]).superseded_by == u["new"]
        shown = {s.uri for s in p.retrieve("dog Biscuit name", k=10)}
        assert new.uri in shown and not shown & {u["r0"], u["r1"], u["r2"]}
        assert "The office is in Leeds." not in p.page("where is the office").render()
        ops = [e.op for e in p.audit(limit=10_000)]
        assert ops.count("supersede") == 5
        # a human can still forget the merged memory like any other
        assert p.forget(new.uri) == 1


@pytest.mark.parametrize(
    "reply",
    [
        Reply(content="I merged them for you."),  # malformed JSON
        Reply(content='{"merges": [{"ids": ["x"], "text": 3}]}'),  # wrong schema
        Reply(content='{"merges": [{"ids": ["nope1", "nope2"], "text": "t"}]}'),  # ids not in the listing
        Reply(status=500),  # retried, then given up
        Reply(content='{"merges": []}', delay=2.0),  # slow: timeout
    ],
    ids=["malformed", "wrong-schema", "unknown-ids", "http-500", "timeout"],
)
def test_any_llm_failure_skips_and_changes_nothing(store_path: Path, server: ChatServer, reply: Reply) -> None:
    """Seed 000: "silently skipped on LLM failure — it never corrupts existing memory": the exported
    rows, the audit chain, the review queue and the continuity are identical after the failure."""
    with _open(store_path) as p:
        _fill(p)
        before = snapshot(p, store_path.parent / "before.jsonl")
        server.script(reply, reply)
        result = p.merge(llm=_llm(server))
        assert result.skipped and result.groups == ()
        assert snapshot(p, store_path.parent / "after.jsonl") == before
        assert p.verify_audit().ok


def test_mixed_conflicting_ids_invalidate_the_whole_reply(store_path: Path, server: ChatServer) -> None:
    with _open(store_path) as p:
        u = _fill(p)
        before = snapshot(p, store_path.parent / "before.jsonl")
        twice = {
            "merges": [{"ids": [_id(u["r0"]), _id(u["r1"])], "text": "t"}],
            "superseded": [{"id": _id(u["r1"]), "by": _id(u["r2"])}],
        }
        server.script(Reply(content=json.dumps(twice)))
        assert "more than once" in (p.merge(llm=_llm(server)).skipped or "")
        assert snapshot(p, store_path.parent / "after.jsonl") == before


def test_below_the_threshold_nothing_is_asked(store_path: Path, server: ChatServer) -> None:
    with _open(store_path) as p:
        for t in RESTATED:
            p.remember_fact(t)
        result = p.merge(llm=_llm(server))
        assert result.skipped is None and result.groups == () and result.examined == ()
        assert server.requests == []


def test_another_consolidation_holding_the_lock_makes_this_one_skip(store_path: Path, server: ChatServer) -> None:
    """Seed 000: "Concurrent compaction — other sessions skip; only one sleeps at a time"."""
    from datetime import datetime, timezone

    with _open(store_path) as p:
        _fill(p)
        assert p.store.consolidation.try_lock(LOCK, "someone-else", datetime.now(timezone.utc), 60)
        before = snapshot(p, store_path.parent / "before.jsonl")
        assert p.merge(llm=_llm(server)).skipped == BUSY
        assert server.requests == [] and snapshot(p, store_path.parent / "after.jsonl") == before
        p.store.consolidation.unlock(LOCK, "someone-else")
        server.script(Reply(content='{"merges": []}'))
        assert p.merge(llm=_llm(server)).skipped is None


def test_an_expired_lock_is_taken_over(store_path: Path) -> None:
    from datetime import datetime, timedelta, timezone

    with _open(store_path) as p:
        cs, now = p.store.consolidation, datetime.now(timezone.utc)
        assert cs.try_lock(LOCK, "dead", now - timedelta(hours=1), 60)
        assert cs.try_lock(LOCK, "alive", now, 60)
        assert not cs.try_lock(LOCK, "third", now, 60)


def test_dry_run_reports_and_changes_nothing(store_path: Path, server: ChatServer) -> None:
    with _open(store_path) as p:
        u = _fill(p)
        before = snapshot(p, store_path.parent / "before.jsonl")
        server.script(Reply(content=_proposal(u)))
        result = p.merge(dry_run=True, llm=_llm(server))
        assert result.dry_run and len(result.groups) == 3 and result.groups[0].by is None
        assert snapshot(p, store_path.parent / "after.jsonl") == before


def test_copilot_queues_merges_for_a_human(store_path: Path, server: ChatServer) -> None:
    """Seed 000 copilot ("confirm ambiguous"): a merge rewrites accepted memories, so it waits in the
    review queue; accepting applies it (merged memory written, originals superseded)."""
    with _open(store_path, memory_mode="copilot") as p:
        u = _fill(p)
        server.script(Reply(content=_proposal(u)))
        result = p.merge(llm=_llm(server))
        assert all(g.review for g in result.groups)
        assert p.get(u["r0"]).superseded_by is None  # nothing applied yet
        items = [i for i in p.review() if i.kind == "merge"]
        assert len(items) == 3
        merged_item = next(i for i in items if i.payload["action"] == "merge")
        uri = p.decide(merged_item.id, accept=True)
        assert uri is not None and p.get(uri).metadata["derived_from"] == [u["r0"], u["r1"], u["r2"]]
        assert {p.get(u[k]).superseded_by for k in ("r0", "r1", "r2")} == {uri}
        dup = next(i for i in items if i.payload["action"] == "duplicate")
        assert p.decide(dup.id, accept=False) is None
        assert p.get(u["d1"]).superseded_by is None


def test_off_mode_and_pinned_types_are_never_merged(store_path: Path, server: ChatServer) -> None:
    """Issue 21 item 9: identity, rules and constraints are never rewritten by an LLM."""
    with _open(store_path, memory_mode="off") as p:
        assert "memory_mode is off" in (p.merge(llm=_llm(server)).skipped or "")
        for t in ("rule", "identity", "constraint", "pattern"):
            with pytest.raises(InvalidInput, match="never merged"):
                p.merge(type=t, llm=_llm(server))
    assert server.requests == []


def test_no_llm_configured_is_a_skip(store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMPAGER_LLM_URL", raising=False)
    with _open(store_path) as p:
        _fill(p)
        assert "no LLM configured" in (p.merge().skipped or "")
