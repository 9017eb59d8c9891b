"""export / import_memories on real DuckDB files: what a round trip keeps, idempotence, refusing a
bad file whole, vectors that need no re-embedding. (backup: test_backup.py)"""

from __future__ import annotations

import io
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mempager
from mempager import InvalidInput, PagerConfig, PatternSpec
from mempager.maintenance.transfer_format import FORMAT, InvalidImportLine
from mempager.store.tier_types import Crystal, Evidence, tiers_of

HASH = PagerConfig(embedder="hash")
QUIET = PagerConfig(embedder="hash", embed_workers=0)  # embeds nothing: vectors can only come from the file
FIELDS = {
    "id", "uri", "actor", "type", "text", "source", "scope", "confidence", "importance", "strength", "created_at",
    "updated_at", "last_accessed_at", "access_count", "tags", "metadata", "content_hash", "superseded_by",
    "valid_until",
}  # fmt: skip
ACCESSED = datetime(2024, 5, 6, 7, 8, 9, tzinfo=timezone.utc)
GROWN = datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=timezone.utc)  # when populate_tiers' crystal formed


def populate(p: Any) -> dict[str, str]:
    """Every kind of memory and field an export must carry; returns some of their uris."""
    uris = {
        "identity": p.set_identity("You are Neo's release assistant."),
        "rule": p.add_rule("Never print secrets."),
        "key": p.remember_fact(
            "The deploy key lives in vault path secret/deploy.",
            tags=["ops", "vault"],
            metadata={"ticket": "OPS-7", "nested": {"a": [1, 2.5, None, True]}},
            importance=0.9,
            confidence=0.8,
            source="user",
        ),
        "old": p.remember_fact("The staging host is alpha.", created_at="2023-01-02T03:04:05.123456Z"),
        "new": p.remember_fact("The staging host is beta.", created_at="2024-02-03T04:05:06Z"),
        "tea": p.remember_user_fact("Neo prefers green tea \u2028 over coffee."),  # U+2028 stays raw in JSON
        "e1": p.remember("event", "Standup: shipped PAY-1", created_at="2024-03-01T09:00:00Z"),
        "e2": p.remember("event", "Standup: shipped PAY-1", created_at="2024-03-02T09:00:00Z"),
        "expiring": p.remember_fact("The promo code is SPRING24."),
    }
    uris["pattern"] = p.write_pattern(
        PatternSpec(name="cut a release", trigger="release it", steps=["tag", "push"]), derived_from=[uris["key"]]
    )
    uris["outcome"] = p.record_outcome("Released 2.3", "success", uris["key"])
    p.remember_fact("The deploy key lives in vault path secret/deploy.")  # a repeat: strength, access count up
    p.update(uris["expiring"], valid_until="2030-01-01T00:00:00Z")
    _, _, old_id = uris["old"].rpartition("/")
    p.store.update(p.actor, old_id, superseded_by=uris["new"])  # supersession, as consolidation records it
    label = p.get(uris["tea"]).label
    p.store.touch(p.actor, [label], ACCESSED)
    return uris


def memory_audit(p: Any) -> list[Any]:
    """The audit entries about memories (opening a store may record its model: not a memory)."""
    return [e for e in p.audit() if e.uri.startswith("mem://")]


def export_lines(p: Any, *, vectors: bool = False) -> list[dict[str, Any]]:
    out = io.StringIO()
    p.export(out, vectors=vectors)
    return [json.loads(line) for line in out.getvalue().split("\n") if line]


def comparable(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Memory lines without what an import legitimately changes: ids and uris (new ones; references
    become the referenced memory's words), updated_at (the import's time), and last_accessed_at of
    memories never accessed (also the import's time), vectors compared elsewhere."""
    words = {r["uri"]: f"{r['type']}:{r['text']}" for r in records}

    def ref(value: Any) -> Any:
        if isinstance(value, str):
            return words.get(value, value)
        if isinstance(value, dict):
            return {k: ref(v) for k, v in value.items()}
        if isinstance(value, list):
            return [ref(v) for v in value]
        return value

    out = []
    for r in records:
        r = {k: ref(v) for k, v in r.items() if k not in ("id", "uri", "updated_at", "vectors")}
        if r["access_count"] == 0:
            r.pop("last_accessed_at")
        out.append(r)
    return out


def test_export_writes_a_header_and_every_field_oldest_first(store_path: Path) -> None:
    with mempager.open(store_path, actor="neo", config=HASH) as p:
        populate(p)
        records = export_lines(p)
        memories = p.recall(limit=100)
    header, body = records[0], records[1:]
    assert header == {
        "format": FORMAT,
        "store": str(store_path),
        "actor": "neo",
        "count": len(memories),
        "vectors": None,
        "models": {},
        "crystals": 0,
        "spores": 0,
    }
    assert len(body) == len(memories) == 11
    assert all(set(r) == FIELDS for r in body)
    assert [(r["created_at"], r["id"]) for r in body] == sorted((r["created_at"], r["id"]) for r in body)
    by_text = {r["text"]: r for r in body}
    key = by_text["The deploy key lives in vault path secret/deploy."]
    assert key["tags"] == ["ops", "vault"] and key["metadata"]["nested"] == {"a": [1, 2.5, None, True]}
    assert key["source"] == "user" and key["importance"] == 0.9 and key["access_count"] == 1
    assert by_text["The staging host is alpha."]["created_at"] == "2023-01-02T03:04:05.123456+00:00"
    assert by_text["The staging host is alpha."]["superseded_by"] == by_text["The staging host is beta."]["uri"]
    assert by_text["The promo code is SPRING24."]["valid_until"] == "2030-01-01T00:00:00+00:00"


def test_export_is_deterministic_and_a_path_is_written_whole(store_path: Path, tmp_path: Path) -> None:
    with mempager.open(store_path, actor="neo", config=HASH) as p:
        populate(p)
        assert p.sync(timeout=30)
        first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
        assert p.export(first, vectors=True) == p.export(second, vectors=True) == 11
    assert first.read_bytes() == second.read_bytes()
    assert sorted(x.name for x in tmp_path.iterdir() if x.name.endswith(".jsonl")) == ["a.jsonl", "b.jsonl"]


def test_round_trip_keeps_times_provenance_and_references(store_path: Path, tmp_path: Path) -> None:
    with mempager.open(store_path, actor="neo", config=HASH) as p:
        uris = populate(p)
        before = export_lines(p)
        p.export(tmp_path / "neo.jsonl")
    with mempager.open(tmp_path / "other.duckdb", actor="neo", config=QUIET) as q:
        report = q.import_memories(tmp_path / "neo.jsonl")
        after = export_lines(q)
        assert report.read == report.added == 11 and report.skipped == 0
        assert report.restored == 6  # 2 accessed, 1 superseded, 1 expiring, a pattern and an outcome naming a fact
        # new ids, and every reference follows its memory
        by_text = {m.text: m for m in q.recall(limit=100)}
        old = by_text["The staging host is alpha."]
        assert old.superseded_by == by_text["The staging host is beta."].uri != uris["new"]
        key = by_text["The deploy key lives in vault path secret/deploy."]
        pattern = next(m for m in by_text.values() if m.type.value == "pattern")
        assert pattern.metadata["derived_from"] == [key.uri]
        outcome = next(m for m in by_text.values() if m.type.value == "outcome")
        assert outcome.metadata["intent_ref"] == key.uri
        tea = by_text["Neo prefers green tea \u2028 over coffee."]
        assert tea.access_count == 1 and tea.last_accessed_at == ACCESSED
        assert q.verify_audit().ok and {e.op for e in memory_audit(q)} == {"remember", "import"}
    assert comparable(after[1:]) == comparable(before[1:])


def test_import_twice_adds_nothing_and_changes_nothing(store_path: Path, tmp_path: Path) -> None:
    with mempager.open(store_path, actor="neo", config=HASH) as p:
        populate(p)
        p.export(tmp_path / "neo.jsonl")
    with mempager.open(tmp_path / "other.duckdb", actor="neo", config=QUIET) as q:
        assert q.import_memories(tmp_path / "neo.jsonl").added == 11
        once = export_lines(q)
        audit = len(memory_audit(q))
        again = q.import_memories(tmp_path / "neo.jsonl")
        assert (again.read, again.added, again.skipped, again.vectors, again.restored) == (11, 0, 11, 0, 0)
        assert export_lines(q) == once  # not reinforced either: strength, access counts, times as they were
        assert len(memory_audit(q)) == audit
    with mempager.open(store_path, actor="neo", config=HASH) as p:  # into the store it came from: nothing new
        before = export_lines(p)
        assert p.import_memories(tmp_path / "neo.jsonl").added == 0
        assert export_lines(p) == before


def test_memories_stored_under_a_plain_key_are_recognised(store_path: Path, tmp_path: Path) -> None:
    """An event written without a time dedups by its words alone, a pattern written as plain text by
    its text; an import writes them with their time / structured key, and still finds them."""
    spec = PatternSpec(name="roll back", trigger="a deploy fails", steps=["revert", "page on-call"])
    with mempager.open(store_path, actor="neo", config=QUIET) as p:
        p.remember("event", "Lunch with Ana")
        p.remember("pattern", spec.encode())
        p.export(tmp_path / "neo.jsonl")
        before = export_lines(p)
        assert p.import_memories(tmp_path / "neo.jsonl").skipped == 2
        assert export_lines(p) == before
        p.remember("event", "Dinner", created_at="2024-01-01T19:00:00Z")  # timed: another time is another event
        later = {"type": "event", "text": "Dinner", "created_at": "2024-01-02T19:00:00Z"}
        (tmp_path / "later.jsonl").write_text(json.dumps(later))
        assert p.import_memories(tmp_path / "later.jsonl").added == 1


def test_repeated_and_hand_written_lines(store_path: Path, tmp_path: Path) -> None:
    lines = [
        {"type": "fact", "text": "Ana likes jazz."},
        {"type": "fact", "text": "ana likes jazz"},  # the same memory by the store's dedup rule
        {"type": "event", "text": "Lunch", "created_at": "2024-01-01T12:00:00Z"},
        {"type": "event", "text": "Lunch", "created_at": "2024-01-02T12:00:00Z"},  # another time: another event
        {"type": "belief", "text": "Ana likes jazz."},  # another type: another memory
    ]
    path = tmp_path / "hand.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    with mempager.open(store_path, actor="neo", config=QUIET) as p:
        report = p.import_memories(path)
        assert (report.read, report.added, report.skipped) == (5, 4, 1)
        assert sorted(m.text for m in p.recall(limit=10)) == ["Ana likes jazz.", "Ana likes jazz.", "Lunch", "Lunch"]
        assert all(m.actor == "neo" and m.source.value == "observed" for m in p.recall(limit=10))


BAD = [
    ("{not json", "not JSON"),
    ("[1, 2]", "expected a JSON object"),
    ('{"type": "fact"}', "at least 'type' and 'text'"),
    ('{"type": "gossip", "text": "x"}', "unknown memory type"),
    ('{"type": "fact", "text": "x", "colour": "red"}', "unknown fields ['colour']"),
    ('{"type": "fact", "text": "   "}', "empty"),
    ('{"type": "fact", "text": "x", "confidence": 3}', "confidence must be a number in [0, 1]"),
    ('{"type": "fact", "text": "x", "created_at": "someday"}', "not a time"),
    ('{"type": "fact", "text": "x", "actor": "../etc"}', "actor"),
    ('{"type": "fact", "text": "x", "access_count": -1}', "access_count"),
    ('{"type": "fact", "text": "x", "content_hash": "abc"}', "content_hash does not match text"),
    ('{"type": "fact", "text": "x", "vectors": [{"model": "m", "dim": 3, "values": [1, 2]}]}', "has 2 values"),
    ('{"type": "fact", "text": "x", "vectors": [{"model": "m", "dim": 1, "data": "!!"}]}', "not base64"),
    ('{"type": "fact", "text": "x", "vectors": [{"model": "m", "dim": 1, "values": [NaN]}]}', "NaN"),
    ('{"type": "fact", "text": "x", "vectors": [{"model": "m", "dim": 2, "values": [1, 2]}]}', "line 1 has it 1-d"),
    ('{"format": "mempager.export.v1"}', "may only be the first line"),
]


@pytest.mark.parametrize(("bad", "says"), BAD)
def test_a_bad_line_refuses_the_whole_file(store_path: Path, tmp_path: Path, bad: str, says: str) -> None:
    good = json.dumps({"type": "fact", "text": "fine", "vectors": [{"model": "m", "dim": 1, "values": [1]}]})
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([good, json.dumps({"type": "fact", "text": "also fine"}), "", bad, good]))
    with mempager.open(store_path, actor="neo", config=QUIET) as p:
        with pytest.raises(InvalidImportLine) as caught:
            p.import_memories(path)
        assert caught.value.line == 4 and str(caught.value).startswith("line 4: ") and says in str(caught.value)
        assert isinstance(caught.value, InvalidInput)
        assert p.recall(limit=10) == [] and memory_audit(p) == []


def test_a_truncated_or_foreign_file_is_refused(store_path: Path, tmp_path: Path) -> None:
    with mempager.open(store_path, actor="neo", config=HASH) as p:
        populate(p)
        p.export(tmp_path / "neo.jsonl")
    whole = (tmp_path / "neo.jsonl").read_text().split("\n")
    (tmp_path / "cut.jsonl").write_text("\n".join(whole[:5]))
    (tmp_path / "v9.jsonl").write_text("\n".join([json.dumps({"format": "mempager.export.v9"}), *whole[1:]]))
    (tmp_path / "latin1.jsonl").write_bytes('{"type": "fact", "text": "caf\xe9"}'.encode("latin-1"))
    with mempager.open(tmp_path / "other.duckdb", actor="neo", config=QUIET) as q:
        with pytest.raises(InvalidImportLine, match=r"^line 1: the header counts 11 memories but the file holds 4"):
            q.import_memories(tmp_path / "cut.jsonl")
        with pytest.raises(InvalidImportLine, match="is not 'mempager.export.v1'"):
            q.import_memories(tmp_path / "v9.jsonl")
        with pytest.raises(InvalidInput, match="not UTF-8"):
            q.import_memories(tmp_path / "latin1.jsonl")
        with pytest.raises(InvalidInput, match="cannot read"):
            q.import_memories(tmp_path / "missing.jsonl")
        assert q.recall(limit=10) == []


def test_vectors_round_trip_so_nothing_is_re_embedded(store_path: Path, tmp_path: Path) -> None:
    with mempager.open(store_path, actor="neo", config=HASH) as p:
        populate(p)
        assert p.sync(timeout=30)
        model = p.semantic.model
        p.export(tmp_path / "neo.jsonl", vectors=True)
        labels, matrix = p.store.vectors("neo", model)
        hashes = p.store.content_hashes("neo")
        original = {hashes[int(lab)]: row for lab, row in zip(labels, matrix, strict=True)}
    header = json.loads((tmp_path / "neo.jsonl").read_text().split("\n")[0])
    assert header["vectors"] == "float32-le-base64" and header["models"] == {model: 384}
    with mempager.open(tmp_path / "other.duckdb", actor="neo", config=QUIET) as q:
        report = q.import_memories(tmp_path / "neo.jsonl")
        assert report.vectors == 11 and q.stats()["pending_embeddings"] == 0
        assert q.store.pending_stats("neo", model).count == 0 and len(q.semantic) == 11
        labels, matrix = q.store.vectors("neo", model)
        hashes = q.store.content_hashes("neo")
        assert {hashes[int(lab)] for lab in labels} == set(original)
        for lab, row in zip(labels, matrix, strict=True):
            assert np.array_equal(row, original[hashes[int(lab)]])  # bit for bit
        hits = q.retrieve("where is the deploy key vault?")
        assert "semantic" in hits[0].lanes and "secret/deploy" in hits[0].text
    with mempager.open(tmp_path / "other.duckdb", actor="neo", config=QUIET) as again:  # the saved index too
        assert len(again.semantic) == 11 and again.stats()["pending_embeddings"] == 0


def test_vectors_of_another_width_are_refused_before_writing(store_path: Path, tmp_path: Path) -> None:
    with mempager.open(store_path, actor="neo", config=QUIET) as p:
        model = p.semantic.model
        line = {"type": "fact", "text": "x", "vectors": [{"model": model, "dim": 2, "values": [0.6, 0.8]}]}
        (tmp_path / "narrow.jsonl").write_text(json.dumps({"type": "fact", "text": "y"}) + "\n" + json.dumps(line))
        with pytest.raises(InvalidImportLine, match=f"line 2: vectors of '{model}' are 2-d, this store's are 384-d"):
            p.import_memories(tmp_path / "narrow.jsonl")
        assert p.recall(limit=10) == []


def test_an_interrupted_import_is_completed_by_running_it_again(store_path: Path, tmp_path: Path) -> None:
    with mempager.open(store_path, actor="neo", config=HASH) as p:
        populate(p)
        assert p.sync(timeout=30)
        p.export(tmp_path / "neo.jsonl", vectors=True)
    with mempager.open(tmp_path / "other.duckdb", actor="neo", config=QUIET) as q:
        q.transfer.batch_size = 5
        calls = []

        def fail_third_batch(done: int, total: int) -> None:
            calls.append(done)
            if done == 10:
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            q.import_memories(tmp_path / "neo.jsonl", progress=fail_third_batch)
        assert len(q.recall(limit=100)) == 10
        report = q.import_memories(tmp_path / "neo.jsonl")
        assert (report.added, report.skipped) == (1, 10)
        assert q.stats()["pending_embeddings"] == 0 and len(q.recall(limit=100)) == 11


def test_vectors_imported_later_fill_in_memories_already_there(store_path: Path, tmp_path: Path) -> None:
    with mempager.open(store_path, actor="neo", config=HASH) as p:
        populate(p)
        assert p.sync(timeout=30)
        p.export(tmp_path / "bare.jsonl")
        p.export(tmp_path / "full.jsonl", vectors=True)
    with mempager.open(tmp_path / "other.duckdb", actor="neo", config=QUIET) as q:
        assert q.import_memories(tmp_path / "bare.jsonl").vectors == 0
        assert q.stats()["pending_embeddings"] == 11
        once = export_lines(q)
        report = q.import_memories(tmp_path / "full.jsonl")
        assert (report.added, report.skipped, report.vectors) == (0, 11, 11)
        assert q.stats()["pending_embeddings"] == 0 and len(q.semantic) == 11
        assert export_lines(q) == once  # the memories themselves untouched
        assert q.import_memories(tmp_path / "full.jsonl").vectors == 0  # and only what was missing


def test_keep_actor_writes_each_line_for_its_own_actor(store_path: Path, tmp_path: Path) -> None:
    with mempager.open(store_path, actor="neo", config=HASH) as p:
        p.remember_fact("Neo's fact.")
        p.export(tmp_path / "neo.jsonl")
    with mempager.open(tmp_path / "other.duckdb", actor="admin", config=QUIET) as q:
        assert q.import_memories(tmp_path / "neo.jsonl", keep_actor=True).added == 1
        assert q.recall(limit=10) == []
        assert [m.text for m in q.store.query("neo", limit=10)] == ["Neo's fact."]
        assert q.import_memories(tmp_path / "neo.jsonl").added == 1  # default: the opened actor
        assert [m.text for m in q.recall(limit=10)] == ["Neo's fact."]


# -- crystals and spores (issue 21: the crystallized tier and spores go with the memories) ----------
def populate_tiers(p: Any, uris: dict[str, str]) -> None:
    """Two crystals (one citing two memories of ``populate``, one written by a human) and three
    spores: open with a cue and a due time, open bare, and done."""
    cited = [p.get(uris["key"]), p.get(uris["rule"])]
    evidence = tuple(Evidence(m.id, m.label) for m in cited)
    proven = Crystal(p.actor, "c0ffee000001", "deploy via vault", "Deploy via vault", "Read the key from vault.",
                     evidence, "consolidation", GROWN)  # fmt: skip
    tiers_of(p.store).add_crystal(proven)  # as an accepted proposal writes it (the review path: test_crystal.py)
    p.tiers.crystals.add("Tag before pushing", "Tag the release, then push the tag.")
    p.spore("Rotate the deploy key", cue="deploy key", due="2030-01-01T09:00:00Z")
    p.spore("Write the retro")
    done = p.spore("Ship PAY-1")
    p.complete_spore(done.id)


def tier_audit(p: Any) -> list[Any]:
    return [e for e in p.audit() if e.uri.startswith(("crystal://", "spore://"))]


def tier_lines(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records[1:] if "kind" in r]


def evidence_texts(p: Any, crystal: Crystal) -> list[str]:
    """What a crystal's evidence points at, in this store (by label: the graph's key, so it must be here)."""
    by_label = p.store.get_many(p.actor, [e.label for e in crystal.evidence])
    assert [by_label[e.label].id for e in crystal.evidence] == [e.id for e in crystal.evidence]
    return [by_label[e.label].text for e in crystal.evidence]


def test_crystals_and_spores_round_trip_with_evidence_and_completion(store_path: Path, tmp_path: Path) -> None:
    with mempager.open(store_path, actor="neo", config=HASH) as p:
        populate_tiers(p, populate(p))
        before = export_lines(p)
        crystals, spores = p.crystals(), p.spores("all")
        cited = evidence_texts(p, crystals[0])
        p.export(tmp_path / "neo.jsonl")
    header, tiers = before[0], tier_lines(before)
    assert (header["count"], header["crystals"], header["spores"]) == (11, 2, 3)
    assert [r["kind"] for r in before[12:]] == ["crystal", "crystal", "spore", "spore", "spore"]  # after the memories
    memory_uris = {r["id"]: r["uri"] for r in before[1:12]}
    assert tiers[0]["evidence"] == [{"id": e.id, "uri": memory_uris[e.id]} for e in crystals[0].evidence]
    # A reader from before these records knew only the memory fields and refused any other: it stops
    # at the first crystal line (before writing anything) rather than taking it for a memory.
    assert all("kind" in set(r) - (FIELDS | {"vectors"}) for r in tiers)
    with mempager.open(tmp_path / "other.duckdb", actor="neo", config=QUIET) as q:
        report = q.import_memories(tmp_path / "neo.jsonl")
        assert (report.added, report.crystals, report.spores, report.tiers_skipped, report.evidence_dropped) == (
            11, 2, 3, 0, 0,
        )  # fmt: skip
        got = q.crystals()
        assert [(c.id, c.key, c.name, c.body, c.source, c.created_at) for c in got] == [
            (c.id, c.key, c.name, c.body, c.source, c.created_at) for c in crystals
        ]
        assert got[0].created_at == GROWN and got[1].evidence == ()
        new_ids = {m.id for m in q.recall(limit=100)}
        assert {e.id for e in got[0].evidence} <= new_ids  # the new memories, not the source's ids
        assert not {e.id for e in got[0].evidence} & set(memory_uris)
        assert evidence_texts(q, got[0]) == cited
        assert q.spores("all") == spores  # ids, cue, due, status, created and completion times as they were
        done = q.spores("done")
        assert [s.text for s in done] == ["Ship PAY-1"] and done[0].done_at is not None
        assert [s.text for s in q.spores()] == ["Rotate the deploy key", "Write the retro"]
        assert [(e.op, e.uri) for e in tier_audit(q)] == [("import", c.uri) for c in crystals] + [
            ("import", s.uri) for s in spores
        ]
        assert q.verify_audit().ok
        hits = q.crystal_recall("what does the deploy key rule say about vault?")
        assert hits and hits[0].crystal.id == "c0ffee000001"  # the tier works in the new store
        after = export_lines(q)
    strip = [{k: v for k, v in r.items() if k != "evidence"} for r in tier_lines(after)]
    assert strip == [{k: v for k, v in r.items() if k != "evidence"} for r in tiers]


def test_crystals_and_spores_import_twice_add_nothing(store_path: Path, tmp_path: Path) -> None:
    with mempager.open(store_path, actor="neo", config=HASH) as p:
        populate_tiers(p, populate(p))
        p.export(tmp_path / "neo.jsonl")
    with mempager.open(tmp_path / "other.duckdb", actor="neo", config=QUIET) as q:
        assert q.import_memories(tmp_path / "neo.jsonl").crystals == 2
        once, audit = export_lines(q), len(tier_audit(q)) + len(memory_audit(q))
        again = q.import_memories(tmp_path / "neo.jsonl")
        assert (again.added, again.crystals, again.spores, again.tiers_skipped) == (0, 0, 0, 5)
        assert export_lines(q) == once and len(tier_audit(q)) + len(memory_audit(q)) == audit
    with mempager.open(store_path, actor="neo", config=HASH) as p:  # into the store it came from
        before = export_lines(p)
        report = p.import_memories(tmp_path / "neo.jsonl")
        assert (report.crystals, report.spores, report.tiers_skipped) == (0, 0, 5)
        assert export_lines(p) == before


def test_a_file_without_crystals_or_spores_still_imports(store_path: Path, tmp_path: Path) -> None:
    """A file written before crystals and spores were exported: no kind lines, no header counts."""
    with mempager.open(store_path, actor="neo", config=HASH) as p:
        populate_tiers(p, populate(p))
        records = export_lines(p)
    header = {k: v for k, v in records[0].items() if k not in ("crystals", "spores")}
    old = [header, *(r for r in records[1:] if "kind" not in r)]
    (tmp_path / "old.jsonl").write_text("\n".join(json.dumps(r) for r in old) + "\n")
    with mempager.open(tmp_path / "other.duckdb", actor="neo", config=QUIET) as q:
        report = q.import_memories(tmp_path / "old.jsonl")
        assert (report.added, report.crystals, report.spores) == (11, 0, 0)
        assert q.crystals() == [] and q.spores("all") == []


def test_evidence_follows_the_actor_and_a_missing_memory_is_dropped(store_path: Path, tmp_path: Path) -> None:
    with mempager.open(store_path, actor="neo", config=QUIET) as p:
        kept = p.get(p.remember_fact("The vault is at vault.internal."))
        gone = p.get(p.remember_fact("A fact forgotten before the export."))
        evidence = (Evidence(kept.id, kept.label), Evidence(gone.id, gone.label))
        tiers_of(p.store).add_crystal(Crystal("neo", "c1", "vault first", "Vault first", "b", evidence, "user", GROWN))
        p.spore("Renew the vault token")
        p.forget(gone.uri)
        p.export(tmp_path / "neo.jsonl")
    assert tier_lines(export_lines_of(tmp_path / "neo.jsonl"))[0]["evidence"][1] == {"id": gone.id, "uri": None}
    with mempager.open(tmp_path / "other.duckdb", actor="admin", config=QUIET) as q:
        kept_actor = q.import_memories(tmp_path / "neo.jsonl", keep_actor=True)
        assert (kept_actor.crystals, kept_actor.spores, kept_actor.evidence_dropped) == (1, 1, 1)
        assert q.crystals() == [] and q.spores() == []  # neo's, never admin's
        (neo,) = tiers_of(q.store).crystals("neo")
        assert [q.store.get("neo", e.id).text for e in neo.evidence] == ["The vault is at vault.internal."]
        assert [s.text for s in tiers_of(q.store).spores("neo")] == ["Renew the vault token"]
        mine = q.import_memories(tmp_path / "neo.jsonl")  # default: the opened actor, its own memories cited
        assert (mine.crystals, mine.spores) == (1, 1)
        (crystal,) = q.crystals()
        assert crystal.actor == "admin" and evidence_texts(q, crystal) == ["The vault is at vault.internal."]
        assert crystal.evidence[0].id != neo.evidence[0].id


def export_lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().split("\n") if line]


BAD_TIERS = [
    ('{"kind": "crystal"}', "a crystal needs at least 'name'"),
    ('{"kind": "crystal", "name": "x", "colour": "red"}', "unknown fields ['colour'] of a crystal"),
    ('{"kind": "crystal", "name": "x", "key": "y"}', "is not the pattern key of the name"),
    ('{"kind": "crystal", "name": "x", "source": "llm"}', "source is one of consolidation, user"),
    ('{"kind": "crystal", "name": "x", "evidence": "m1"}', "evidence must be a list"),
    ('{"kind": "crystal", "name": "x", "evidence": [{"id": "m1"}]}', "each evidence entry is"),
    ('{"kind": "crystal", "name": "x", "evidence": [{"uri": "m1"}]}', "is not a memory uri"),
    ('{"kind": "crystal", "name": "x", "id": "a/b"}', "is not 1-64 letters"),
    ('{"kind": "crystal", "name": "x", "created_at": "someday"}', "not a time"),
    ('{"kind": "crystal", "name": "   "}', "empty"),
    ('{"kind": "spore"}', "a spore needs at least 'text'"),
    ('{"kind": "spore", "text": "x", "status": "later"}', "status is one of open, done"),
    ('{"kind": "spore", "text": "x", "status": "done"}', "a done spore needs its done_at"),
    ('{"kind": "spore", "text": "x", "done_at": "2024-01-01T00:00:00Z"}', "a done spore needs its done_at"),
    ('{"kind": "spore", "text": "x", "due_at": "someday"}', "not a time"),
    ('{"kind": "spore", "text": "x", "actor": "../etc"}', "actor"),
    ('{"kind": "spore", "text": "x", "uri": "mem://neo/fact/x"}', "a spore's uri starts with spore://"),
    ('{"kind": "spore", "text": "x", "cue": 3}', "cue must be a str"),
    ('{"kind": "mushroom", "text": "x"}', "unknown kind 'mushroom'"),
]


@pytest.mark.parametrize(("bad", "says"), BAD_TIERS)
def test_a_bad_crystal_or_spore_line_refuses_the_whole_file(
    store_path: Path, tmp_path: Path, bad: str, says: str
) -> None:
    good = [
        json.dumps({"type": "fact", "text": "fine"}),
        json.dumps(
            {"kind": "crystal", "name": "Fine crystal", "evidence": [{"uri": "mem://neo/fact/00000000000000ff"}]}
        ),
        json.dumps({"kind": "spore", "text": "fine spore", "status": "done", "done_at": "2024-01-01T00:00:00Z"}),
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([*good[:2], "", bad, good[2]]))
    with mempager.open(store_path, actor="neo", config=QUIET) as p:
        with pytest.raises(InvalidImportLine) as caught:
            p.import_memories(path)
        assert caught.value.line == 4 and str(caught.value).startswith("line 4: ") and says in str(caught.value)
        assert str(caught.value).endswith("nothing was imported")
        assert p.recall(limit=10) == [] and p.crystals() == [] and p.spores("all") == []
        assert memory_audit(p) == [] and tier_audit(p) == []
        path.write_text("\n".join(good))  # the same lines without the bad one: all of them go in
        report = p.import_memories(path)
        assert (report.added, report.crystals, report.spores, report.evidence_dropped) == (1, 1, 1, 1)
        again = p.import_memories(path)  # lines without ids get ids from their content: still idempotent
        assert (again.crystals, again.spores, again.tiers_skipped) == (0, 0, 2) and len(p.spores("all")) == 1


def test_a_file_cut_in_its_crystals_or_spores_is_refused(store_path: Path, tmp_path: Path) -> None:
    with mempager.open(store_path, actor="neo", config=HASH) as p:
        populate_tiers(p, populate(p))
        p.export(tmp_path / "neo.jsonl")
    whole = (tmp_path / "neo.jsonl").read_text().rstrip("\n").split("\n")
    (tmp_path / "cut.jsonl").write_text("\n".join(whole[:-1]))  # the last spore lost
    (tmp_path / "late.jsonl").write_text("\n".join([whole[-1], *whole]))  # a header after a spore line
    with mempager.open(tmp_path / "other.duckdb", actor="neo", config=QUIET) as q:
        with pytest.raises(InvalidImportLine, match=r"^line 1: the header counts 3 spores but the file holds 2"):
            q.import_memories(tmp_path / "cut.jsonl")
        with pytest.raises(InvalidImportLine, match="^line 2: a header line"):
            q.import_memories(tmp_path / "late.jsonl")
        assert q.recall(limit=10) == [] and q.crystals() == [] and q.spores("all") == []
