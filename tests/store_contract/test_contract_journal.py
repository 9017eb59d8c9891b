"""The store contract, journal and housekeeping: injections, feedback, review queue, the audit
chain, listeners and compaction. Every test runs on DuckDB and on PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mempager.errors import InvalidInput, MemoryNotFound
from mempager.types import AuditEntry, Memory, MemoryType, NewMemory
from mempager.validate import content_hash

from .conftest import is_pg, raw_sql


def fact(text: str, actor: str = "a") -> NewMemory:
    return NewMemory(actor=actor, type=MemoryType.FACT, text=text)


def test_injections_are_recorded_once(store: Any) -> None:
    store.record_injections("a", "t1", [("mem://a/pattern/2", "pattern"), ("mem://a/pattern/1", "anti_pattern")])
    store.record_injections("a", "t1", [("mem://a/pattern/1", "anti_pattern")])
    store.record_injections("a", "t1", [])
    assert store.injections("a", "t1") == [("mem://a/pattern/1", "anti_pattern"), ("mem://a/pattern/2", "pattern")]
    assert store.injections("b", "t1") == [] and store.injections("a", "t2") == []


def test_feedback_is_claimed_once_per_turn(store: Any) -> None:
    assert store.claim_feedback("a", "t1", "success") is True
    assert store.claim_feedback("a", "t1", "success") is False
    with pytest.raises(InvalidInput, match="already has feedback"):
        store.claim_feedback("a", "t1", "failure")
    assert store.claim_feedback("b", "t1", "failure") is True  # per actor
    assert [e.op for e in store.audit_entries("a")] == ["feedback"]


def test_review_queue(store: Any) -> None:
    first = store.review_add("a", "memory", {"text": "maybe", "type": "fact"})
    second = store.review_add("a", "inversion", {"uri": "mem://a/pattern/1"})
    store.review_add("b", "memory", {"text": "theirs"})
    assert [i.id for i in store.review_list("a")] == [first, second]
    item = store.review_get("a", first)
    assert (item.actor, item.kind, dict(item.payload), item.status, item.decided_at) == (
        "a",
        "memory",
        {"text": "maybe", "type": "fact"},
        "pending",
        None,
    )
    assert store.review_find("a", "inversion", "uri", "mem://a/pattern/1").id == second
    assert store.review_find("a", "memory", "text", "theirs") is None
    store.review_close("a", first, "accepted", "mem://a/fact/0123456789abcdef")
    with pytest.raises(InvalidInput, match="not pending"):
        store.review_close("a", first, "rejected", None)
    closed = store.review_get("a", first)
    assert (closed.status, closed.result_uri) == ("accepted", "mem://a/fact/0123456789abcdef")
    assert closed.decided_at is not None and closed.decided_at >= closed.created_at
    assert [i.id for i in store.review_list("a")] == [second]
    assert [i.id for i in store.review_list("a", status=None)] == [first, second]
    with pytest.raises(MemoryNotFound):
        store.review_get("b", first)


def test_audit_chain_records_every_mutation_and_verifies(store: Any) -> None:
    m = store.put(fact("audited")).memory
    store.put(fact("audited"))
    store.update("a", m.id, importance=0.9)
    store.put_vectors("m", np.array([m.label]), np.ones((1, 2), np.float32), [m.content_hash])
    store.drop_vectors("a", "m")
    store.claim_feedback("a", "turn-1", "success")
    review = store.review_add("a", "memory", {"text": "x"})
    store.review_close("a", review, "rejected", None)
    store.delete("a", m.id)
    store.put(fact("someone else", actor="b"))
    entries = store.audit_entries("a")
    assert [e.op for e in entries] == ["remember", "reinforce", "update", "migration", "feedback", "review", "forget"]
    assert all(e.actor == "a" for e in entries)
    assert entries[0].uri == m.uri and entries[0].content_hash == m.content_hash
    everyone = store.audit_entries()
    assert [e.seq for e in everyone] == list(range(1, 9))
    assert all(b.prev_hash == a.hash for a, b in zip(everyone, everyone[1:], strict=False))
    assert store.audit_entries(limit=2) == everyone[:2]
    assert store.audit_entries(since=everyone[-1].at) == [e for e in everyone if e.at >= everyone[-1].at]
    report = store.verify_audit()
    assert report.ok and report.checked == 8
    raw_sql(store, "UPDATE audit SET op = 'remember' WHERE seq = 2")
    broken = store.verify_audit()
    assert not broken.ok and broken.first_broken == 2


def test_audit_listeners_hear_committed_entries(store: Any) -> None:
    heard: list[AuditEntry] = []
    store.add_audit_listener(heard.append)

    def broken(entry: AuditEntry) -> None:
        raise RuntimeError("listener bug")

    store.add_audit_listener(broken)  # a failing listener is logged; the write stands
    m = store.put(fact("heard")).memory
    store.delete("a", m.id)
    assert [(e.op, e.uri) for e in heard] == [("remember", m.uri), ("forget", m.uri)]
    store.remove_audit_listener(heard.append)
    store.remove_audit_listener(broken)
    store.put(fact("not heard"))
    assert len(heard) == 2


def test_change_listeners(store: Any) -> None:
    seen: list[tuple[set[int], list[int]]] = []

    def listener(upserted: list[Memory], removed: list[int]) -> None:
        seen.append(({m.label for m in upserted}, list(removed)))

    store.add_change_listener("a", listener)
    ms = [r.memory for r in store.put_many([fact("c1"), fact("c2"), fact("c1")])]
    store.put(fact("for b", actor="b"))  # another actor: not heard
    store.update("a", ms[0].id, importance=1.0)
    store.touch("a", [ms[1].label], ms[1].created_at)
    store.delete("a", ms[1].id)
    assert seen == [({ms[0].label, ms[1].label}, []), ({ms[0].label}, []), ({ms[1].label}, []), (set(), [ms[1].label])]
    store.remove_change_listener("a", listener)
    store.remove_change_listener("a", listener)  # twice is harmless
    store.put(fact("unheard"))
    assert len(seen) == 4


def _bytes_on_disk(store: Any, pg_server: Any) -> bytes:
    """Every byte of the files that hold the store's rows (not the server's write-ahead log)."""
    if not is_pg(store):
        path = Path(store.location)
        return b"".join(p.read_bytes() for p in (path, Path(f"{path}.wal")) if p.exists())
    data_dir = Path(pg_server.execute("SHOW data_directory")[0][0])
    files = raw_sql(
        store,
        """
        SELECT pg_relation_filepath(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'i', 't')
        UNION ALL SELECT pg_relation_filepath(t.reltoastrelid) FROM pg_class t
        JOIN pg_namespace n ON n.oid = t.relnamespace WHERE n.nspname = current_schema() AND t.reltoastrelid <> 0
    """,
    )
    out = b""
    for (rel,) in files:
        for segment in sorted(data_dir.glob(f"{rel}*")):
            out += segment.read_bytes()
    return out


def test_compact_erases_deleted_text(store: Any, request: pytest.FixtureRequest, backend: str) -> None:
    server = request.getfixturevalue("pg_server") if backend == "postgres" else None
    canary = "canary-7f3a9c-the-secret-that-must-vanish"
    keep = store.put(fact("a memory that stays")).memory
    gone = store.put(fact(f"{canary} " * 40)).memory
    store.put_vectors(
        "m", np.array([gone.label, keep.label]), np.ones((2, 3), np.float32), [gone.content_hash, keep.content_hash]
    )
    raw_sql(store, "CHECKPOINT")
    assert canary.encode() in _bytes_on_disk(store, server)
    store.delete("a", gone.id)
    store.compact()
    assert canary.encode() not in _bytes_on_disk(store, server)
    assert store.get("a", keep.id) == keep and store.vector_labels("a", "m").tolist() == [keep.label]
    assert store.verify_audit().ok
    assert store.put(fact("after compaction")).created


def rows_holding(store: Any, needle: str) -> dict[str, int]:
    """{table.column: rows} of every column of every table of the store whose text holds ``needle``."""
    columns = raw_sql(
        store,
        "SELECT table_name, column_name FROM information_schema.columns"
        " WHERE table_schema = current_schema() ORDER BY table_name, column_name",
    )
    out = {}
    for table, column in columns:
        found = raw_sql(store, f'SELECT count(*) FROM "{table}" WHERE CAST("{column}" AS VARCHAR) LIKE \'%{needle}%\'')
        if found[0][0]:
            out[f"{table}.{column}"] = int(found[0][0])
    return out


def queued(text: str) -> dict[str, Any]:
    return {"type": "fact", "text": text, "source": "llm", "confidence": 0.3, "importance": 0.5, "tags": ["t"]}


def test_deciding_a_review_item_keeps_no_text(store: Any) -> None:
    rejected = store.review_add("a", "memory", queued("canary-51c0 rejected text"))
    accepted = store.review_add("a", "memory", queued("canary-51c0 accepted text"))
    assert set(rows_holding(store, "canary-51c0")) == {"review_queue.payload"}
    store.review_close("a", rejected, "rejected", None)
    result = store.review_accept("a", accepted, fact("canary-51c0 accepted text"))
    assert rows_holding(store, "canary-51c0") == {"memories.text": 1}  # the accepted text lives on, once
    decided = {i.id: i for i in store.review_list("a", status=None)}
    assert decided[rejected].payload == {
        "type": "fact",
        "source": "llm",
        "confidence": 0.3,
        "importance": 0.5,
        "content_hash": content_hash("canary-51c0 rejected text"),
    }
    assert decided[accepted].status == "accepted" and decided[accepted].result_uri == result.memory.uri
    assert "text" not in decided[accepted].payload and "tags" not in decided[accepted].payload


def test_review_accept_is_one_transaction(store: Any) -> None:
    item = store.review_add("a", "memory", queued("accept me once"))
    result = store.review_accept("a", item, fact("accept me once"))
    assert result.created and store.review_get("a", item).status == "accepted"
    with pytest.raises(InvalidInput, match="not pending"):  # a second accept writes nothing
        store.review_accept("a", item, fact("a text that must not be stored"))
    assert store.query("a", limit=10) == [result.memory]
    # the closing step fails after the write: the write is rolled back and the item stays pending
    original = store.put(fact("the pattern to deprecate")).memory
    inversion = store.review_add("a", "inversion", {"uri": original.uri, "text": "AVOID: it"})
    with pytest.raises(MemoryNotFound):
        store.review_accept("a", inversion, fact("AVOID: it"), ("0000000000000000", {"confidence": 0.0}))
    assert store.review_get("a", inversion).status == "pending"
    assert {m.text for m in store.query("a", limit=10)} == {"accept me once", "the pattern to deprecate"}
    before = len(store.audit_entries())
    done = store.review_accept("a", inversion, fact("AVOID: it"), (original.id, {"confidence": 0.0}))
    after = store.get("a", original.id)
    assert after.superseded_by == done.memory.uri and after.confidence == 0.0
    assert [e.op for e in store.audit_entries()[before:]] == ["remember", "update", "review"]
    assert store.verify_audit().ok


def test_deleting_a_memory_purges_its_review_rows_and_injections(store: Any) -> None:
    canary = "canary-7e11 the user's passport number"
    accepted = store.review_add("a", "memory", queued(canary))
    memory = store.review_accept("a", accepted, fact(canary)).memory
    again = store.review_add("a", "memory", queued(canary))  # the same text queued again
    inversion = store.review_add("a", "inversion", {"uri": memory.uri, "text": "AVOID: canary-7e11"})
    unrelated = store.review_add("a", "memory", queued("something else"))
    theirs = store.review_add("b", "memory", queued("canary-7e11 of actor b"))
    store.record_injections("a", "t1", [(memory.uri, "pattern"), ("mem://a/pattern/0123456789abcdef", "pattern")])
    store.record_injections("b", "t1", [(memory.uri, "pattern")])  # another actor's rows are not touched
    assert [i.id for i in store.review_list("a", status=None)] == [accepted, again, inversion, unrelated]
    store.delete("a", memory.id)
    assert [i.id for i in store.review_list("a", status=None)] == [unrelated]
    assert [i.id for i in store.review_list("b")] == [theirs]
    assert store.injections("a", "t1") == [("mem://a/pattern/0123456789abcdef", "pattern")]
    assert store.injections("b", "t1") == [(memory.uri, "pattern")]
    assert rows_holding(store, "canary-7e11") == {"review_queue.payload": 1}  # b's item only
    forgets = [e.uri for e in store.audit_entries("a") if e.op == "forget"]
    assert forgets == [memory.uri, *sorted(f"review:{i}" for i in (accepted, again, inversion))]
    assert store.verify_audit().ok


def test_review_purge(store: Any) -> None:
    ids = [store.review_add("a", "memory", queued(f"canary-90aa {i}")) for i in range(3)]
    theirs = store.review_add("b", "memory", queued("canary-90aa of b"))
    store.review_close("a", ids[0], "rejected", None)
    assert store.review_purge("a", [ids[1], theirs, "unknown"]) == 1  # another actor's id is not ours
    assert [i.id for i in store.review_list("a", status=None)] == [ids[0], ids[2]]
    assert store.review_purge("a") == 2 and store.review_list("a", status=None) == []
    assert store.review_purge("a") == 0
    assert rows_holding(store, "canary-90aa") == {"review_queue.payload": 1}
    assert [e.op for e in store.audit_entries("a")] == ["review", "forget", "forget", "forget"]
    assert store.verify_audit().ok


def test_pager_forget_erases_the_review_queue(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """The pager in copilot mode on each backend: accept, forget by uri, forget by where, purge."""
    import mempager
    from mempager import PagerConfig

    location = tmp_path / "agent.duckdb" if backend == "duckdb" else str(request.getfixturevalue("pg_url"))
    with mempager.open(location, actor="neo", config=PagerConfig(embedder="hash", memory_mode="copilot")) as p:
        p.remember_fact("canary-3f2b the passport is in the drawer", source="llm", confidence=0.3)
        uri = p.decide(p.review()[0].id, accept=True)
        p.remember_fact("canary-3f2b the passport is in the drawer", source="llm", confidence=0.3)
        p.remember_fact("canary-3f2b maybe a second passport", source="llm", confidence=0.3)
        p.remember_fact("the user likes green tea", source="llm", confidence=0.3)
        assert uri is not None and p.forget(uri) == 1
        assert [i.payload["text"] for i in p.review()] == [
            "canary-3f2b maybe a second passport",
            "the user likes green tea",
        ]
        assert p.forget(actor="neo", where={"query": "passport"}) == 0
        assert rows_holding(p.store, "canary-3f2b") == {}
        assert [i.payload["text"] for i in p.review()] == ["the user likes green tea"]
        assert p.forget(actor="neo", where={}) == 0 and p.review(status=None) == []
        assert rows_holding(p.store, "green tea") == {} and p.verify_audit().ok
