"""The store contract, crystals and spores (``TierStore``): writes, per-actor reads, the audit, an
accepted crystal proposal closing its review item in the same transaction, and deleted rows'
bytes gone after ``compact``. Every test runs on DuckDB and on PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from mempager.errors import InvalidInput, MemoryNotFound
from mempager.store.tier_types import Crystal, Evidence, Spore, tiers_of

from .test_contract_journal import _bytes_on_disk

NOW = datetime(2026, 6, 1, 9, 0, tzinfo=timezone.utc)
CANARY = "canary-t13r5-the-intention-that-must-vanish"


def _crystal(actor: str, cid: str, key: str = "k") -> Crystal:
    return Crystal(actor, cid, key, f"name {key}", f"body of {key}", (Evidence("m1", 7),), "user", NOW)


def _spore(actor: str, sid: str, text: str = "do it", due: datetime | None = None) -> Spore:
    return Spore(actor, sid, text, "cue words", due, "open", NOW, None)


def test_crystals_per_actor_unique_per_pattern_and_audited(store: Any) -> None:
    t = tiers_of(store)
    assert t.add_crystal(_crystal("a", "c1")) == _crystal("a", "c1")
    t.add_crystal(_crystal("b", "c1"))  # the same id and key under another actor: its own
    with pytest.raises(InvalidInput, match="crystallized already"):
        t.add_crystal(_crystal("a", "c2"))  # one crystal per pattern key
    assert t.crystals("a") == [_crystal("a", "c1")] and [c.actor for c in t.crystals("b")] == ["b"]
    assert t.delete_crystals("a", ["c1", "nope"]) == [_crystal("a", "c1")]
    assert t.crystals("a") == [] and len(t.crystals("b")) == 1
    assert t.delete_crystals("b", None)[0].actor == "b" and t.crystals("b") == []
    ops = [(e.op, e.uri) for e in store.audit_entries("a")]
    assert ops == [("crystallize", "crystal://a/c1"), ("forget", "crystal://a/c1")] and store.verify_audit().ok


def test_an_accepted_proposal_closes_its_review_item_in_the_same_transaction(store: Any) -> None:
    t = tiers_of(store)
    rid = store.review_add("a", "crystal", {"text": "body", "key": "k", "name": "n"})
    t.add_crystal(_crystal("a", "c1"), rid)
    item = store.review_get("a", rid)
    assert (item.status, item.result_uri, "text" in item.payload) == ("accepted", "crystal://a/c1", False)
    other = store.review_add("a", "crystal", {"text": "body", "key": "k", "name": "n"})
    with pytest.raises(InvalidInput):
        t.add_crystal(_crystal("a", "c2"), other)  # refused: the item stays pending, nothing written
    assert store.review_get("a", other).status == "pending" and [c.id for c in t.crystals("a")] == ["c1"]


def test_spores_open_complete_delete_per_actor(store: Any) -> None:
    t = tiers_of(store)
    t.add_spore(_spore("a", "s1", due=NOW + timedelta(hours=1)))
    t.add_spore(_spore("a", "s2"))
    t.add_spore(_spore("b", "s1"))
    assert [s.id for s in t.spores("a")] == ["s1", "s2"] and t.spores("a", "open")[0].due_at == NOW + timedelta(hours=1)
    done = t.complete_spore("a", "s1", NOW + timedelta(minutes=5))
    assert (done.status, done.done_at) == ("done", NOW + timedelta(minutes=5))
    assert t.complete_spore("a", "s1", NOW + timedelta(days=9)).done_at == done.done_at  # completing twice: once
    assert [s.id for s in t.spores("a", "done")] == ["s1"] and t.spores("b", "open")[0].status == "open"
    with pytest.raises(MemoryNotFound):
        t.complete_spore("a", "nope", NOW)
    assert [s.id for s in t.delete_spores("a", ["s1"], "spore.clean")] == ["s1"]
    assert [s.id for s in t.delete_spores("a", None)] == ["s2"] and len(t.spores("b")) == 1
    ops = [e.op for e in store.audit_entries("a")]
    assert ops == ["spore", "spore", "spore.done", "spore.clean", "forget"] and store.verify_audit().ok


def test_compact_erases_deleted_crystals_and_spores(store: Any, request: pytest.FixtureRequest, backend: str) -> None:
    server = request.getfixturevalue("pg_server") if backend == "postgres" else None
    t = tiers_of(store)
    t.add_spore(_spore("a", "s1", f"{CANARY} " * 40))
    t.add_crystal(Crystal("a", "c1", "k", "n", f"{CANARY}-crystal " * 40, (), "user", NOW))
    t.add_spore(_spore("a", "s2", "a spore that stays"))
    store.checkpoint() if backend == "duckdb" else store._db.rows("CHECKPOINT")
    assert CANARY.encode() in _bytes_on_disk(store, server)
    t.delete_spores("a", ["s1"])
    t.delete_crystals("a", None)
    store.compact()
    assert CANARY.encode() not in _bytes_on_disk(store, server)
    assert [s.text for s in t.spores("a")] == ["a spore that stays"]
