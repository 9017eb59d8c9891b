"""The store contract, consolidation: wraps, continuity versions, pattern history, associations,
sessions and the forget cascade. Every test runs on DuckDB and on PostgreSQL."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import mempager
from mempager import PagerConfig
from mempager.errors import ConsolidationError, WrapNotOpen
from mempager.protocols import AssociationLink, PatternRecord, WrapCommit
from mempager.types import MemoryType, NewMemory


def _put(store: Any, actor: str, *texts: str) -> list[Any]:
    return [r.memory for r in store.put_many([NewMemory(actor=actor, type=MemoryType.EVENT, text=t) for t in texts])]


def _commit(number: int, text: str = "## State\nx\n", links: tuple[AssociationLink, ...] = ()) -> WrapCommit:
    history = (PatternRecord("p", "P", 2, 2, date(2026, 5, 4), ("why it holds",), True),)
    return WrapCommit(number, text, history, links, True, {"episodes": 2}, (("pattern.graduated", "wrap:x", "h"),))


def test_a_wrap_opens_over_new_memories_once_and_saves_once(store: Any) -> None:
    c = store.consolidation
    assert c.open_wrap("a", None, 100) is None and c.state("a").open is None
    m1, m2 = _put(store, "a", "one thing happened", "another thing happened")
    _put(store, "b", "not a's")
    wrap = c.open_wrap("a", "seat-1", 100)
    assert (wrap.number, wrap.status, wrap.labels, wrap.session_id) == (1, "open", (m1.label, m2.label), "seat-1")
    assert c.open_wrap("a", None, 100) == wrap  # one open wrap per actor: the same one comes back
    assert c.state("a").open == wrap and c.state("b").open is None
    link = AssociationLink(m1.label, m2.label, 1.0, 1, "curious", 0.5)
    assert c.commit_wrap("a", _commit(1, links=(link,))) == 1
    with pytest.raises(WrapNotOpen, match="prepare_wrap"):
        c.commit_wrap("a", _commit(1))
    state = c.state("a")
    assert (state.open, state.wraps, state.citations_seen, state.last_label) == (None, 1, True, m2.label)
    assert c.open_wrap("a", None, 100) is None  # nothing new since
    (m3,) = _put(store, "a", "a third thing")
    assert c.open_wrap("a", None, 100).labels == (m3.label,)
    c.commit_wrap("a", _commit(2, "## State\ny\n"))
    assert [v.text for v in c.continuity("a", 5)] == ["## State\ny\n", "## State\nx\n"]
    assert [(w.number, w.status, dict(w.metrics)) for w in c.wraps("a")] == [
        (2, "saved", {"episodes": 2}),
        (1, "saved", {"episodes": 2}),
    ]
    assert c.patterns("a")[0] == PatternRecord("p", "P", 2, 2, date(2026, 5, 4), ("why it holds",), True)
    assert c.continuity("b") == [] and c.patterns("b") == [] and c.links("b") == []
    ops = [e.op for e in store.audit_entries("a")]
    assert ops.count("wrap.prepare") == 2 and ops.count("wrap.save") == 2 and "pattern.graduated" in ops
    assert store.verify_audit().ok


def test_links_are_filtered_to_live_memories_and_forget_cascades(store: Any) -> None:
    c = store.consolidation
    m1, m2, m3 = _put(store, "a", "alpha event", "beta event", "gamma event")
    c.open_wrap("a", None, 100)
    store.delete("a", m3.id)  # forgotten between prepare and save: its link is never created
    links = (
        AssociationLink(m1.label, m2.label, 2.0, 1, None, None),
        AssociationLink(m1.label, m3.label, 1.0, 1, None, None),
    )
    c.commit_wrap("a", _commit(1, links=links))
    assert [(k.a, k.b, k.strength) for k in c.links("a")] == [(m1.label, m2.label, 2.0)]
    assert c.links("a", [m2.label]) == c.links("a") and c.links("a", [999_999]) == []
    store.delete("a", m1.id)
    assert c.links("a") == []


def test_schema_baton_sessions_and_events(store: Any) -> None:
    c = store.consolidation
    c.set_schema("a", '[{"heading": "Patterns", "role": "graduating"}]')
    assert c.state("a").schema == '[{"heading": "Patterns", "role": "graduating"}]'
    _put(store, "a", "something")
    c.open_wrap("a", None, 10)
    with pytest.raises(ConsolidationError, match="open wrap"):
        c.set_schema("a", "[]")
    now = datetime.now(timezone.utc)
    c.session_seen("a", "s1", now - timedelta(hours=2))
    c.session_seen("a", "s2", now)
    assert c.live_sessions("a", now - timedelta(minutes=30)) == ["s2"]
    c.take_baton("a", "s1")
    assert c.state("a").baton == "s1"
    c.record_event("a", "wrap.refused", "wrap:a/1", "h")
    assert [e.op for e in store.audit_entries("a")][-2:] == ["wrap.baton", "wrap.refused"]


def test_a_pager_wraps_and_pins_on_every_backend(location: str | Path) -> None:
    cfg = PagerConfig(embedder="hash", embed_workers=0)
    with mempager.open(location, actor="neo", config=cfg) as p:
        p.remember("event", "The deploy failed on Friday because the migration locked the users table.")
        p.remember("event", "Second Friday deploy failed again: the migration locked users for minutes.")
        e1, e2 = (e.id for e in p.prepare_wrap().episodes)
        result = p.save_continuity(
            "## State\nDeploys.\n## Patterns\n"
            f'- Friday deploys fail | 2x (2026-05-04) [evidence: {e1} "deploy failed friday"]'
            f' [evidence: {e2} "friday deploy migration"]\n## Decisions\n-\n## Context\n-\n',
            affect=("curious", 0.5),
        )
        assert result.graduated and result.linked.created == 1
        assert "Friday deploys fail | 2x" in p.pinned() and "Friday deploys fail" in p.continuity()
        p.forget(p.recall(limit=1)[0].uri)
        assert p.store.consolidation.links("neo") == []
