"""Crystals and spores through export / import on DuckDB and on PostgreSQL: the store's
``import_tiers`` (ids, times and completion kept; what the actor holds is left out; audited),
a DuckDB export imported here and exported back, idempotence, a file without them, and a bad
crystal line that leaves the store as it was."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import mempager
from mempager.maintenance.transfer_format import InvalidImportLine
from mempager.store.tier_types import Crystal, Evidence, Spore, tiers_of

from ..pager.test_transfer import (
    HASH,
    QUIET,
    evidence_texts,
    export_lines,
    memory_audit,
    populate,
    populate_tiers,
    tier_audit,
    tier_lines,
)

NOW = datetime(2026, 6, 1, 9, 0, 0, 123000, tzinfo=timezone.utc)


def test_import_tiers_keeps_ids_times_and_completion_and_skips_what_is_held(store: Any) -> None:
    t = tiers_of(store)
    t.add_crystal(Crystal("a", "c1", "k1", "n1", "b1", (), "user", NOW))
    t.add_spore(Spore("a", "s1", "held", None, None, "open", NOW, None))
    crystals = [
        Crystal("a", "c1", "k9", "n9", "same id", (), "user", NOW),  # held: same id
        Crystal("a", "c2", "k1", "n1", "same key", (), "user", NOW),  # held: same pattern key
        Crystal("a", "c3", "k3", "n3", "new", (Evidence("m1", 7),), "consolidation", NOW),
        Crystal("a", "c4", "k3", "n3", "repeated in the call", (), "user", NOW),
        Crystal("b", "c1", "k1", "n1", "another actor's own", (), "user", NOW),
    ]
    done = Spore("a", "s2", "shipped", "ship", NOW + timedelta(days=1), "done", NOW, NOW + timedelta(hours=2))
    spores = [
        Spore("a", "s1", "same id", None, None, "open", NOW, None),
        done,
        done,
        Spore("b", "s1", "b's", None, None, "open", NOW, None),
    ]
    added_c, added_s = t.import_tiers(crystals, spores)
    assert [(c.actor, c.id) for c in added_c] == [("a", "c3"), ("b", "c1")]
    assert [(s.actor, s.id) for s in added_s] == [("a", "s2"), ("b", "s1")]
    assert t.crystals("a")[1] == crystals[2] and t.spores("a", "done") == [done]  # times and completion as given
    assert [c.body for c in t.crystals("a")] == ["b1", "new"] and [s.text for s in t.spores("a")] == ["held", "shipped"]
    ops = [(e.op, e.uri) for e in store.audit_entries("a")]
    assert ops[2:] == [("import", "crystal://a/c3"), ("import", "spore://a/s2")] and store.verify_audit().ok
    assert t.import_tiers(crystals, spores) == ([], [])  # again: nothing, and no audit entry
    assert len(store.audit_entries("a")) == len(ops)


def test_crystals_and_spores_from_duckdb_round_trip_here(location: str | Path, tmp_path: Path) -> None:
    with mempager.open(tmp_path / "src.duckdb", actor="neo", config=HASH) as src:
        populate_tiers(src, populate(src))
        source = export_lines(src)
        crystals, spores = src.crystals(), src.spores("all")
        cited = evidence_texts(src, crystals[0])
        src.export(tmp_path / "neo.jsonl")
    with mempager.open(location, actor="neo", config=QUIET) as here:
        report = here.import_memories(tmp_path / "neo.jsonl")
        assert (report.added, report.crystals, report.spores, report.evidence_dropped) == (11, 2, 3, 0)
        got = here.crystals()
        assert [(c.id, c.key, c.body, c.created_at) for c in got] == [
            (c.id, c.key, c.body, c.created_at) for c in crystals
        ]
        assert evidence_texts(here, got[0]) == cited and here.spores("all") == spores
        once, audit = export_lines(here), len(tier_audit(here)) + len(memory_audit(here))
        again = here.import_memories(tmp_path / "neo.jsonl")
        assert (again.added, again.crystals, again.spores, again.tiers_skipped) == (0, 0, 0, 5)
        assert export_lines(here) == once and len(tier_audit(here)) + len(memory_audit(here)) == audit
        here.export(tmp_path / "back.jsonl")  # this backend's export
    strip = [{k: v for k, v in r.items() if k != "evidence"} for r in tier_lines(once)]
    assert strip == [{k: v for k, v in r.items() if k != "evidence"} for r in tier_lines(source)]
    with mempager.open(tmp_path / "back.duckdb", actor="neo", config=QUIET) as back:
        assert back.import_memories(tmp_path / "back.jsonl").crystals == 2
        assert evidence_texts(back, back.crystals()[0]) == cited and back.spores("all") == spores


def test_an_old_file_imports_and_a_bad_crystal_line_changes_nothing(location: str | Path, tmp_path: Path) -> None:
    old = [{"format": "mempager.export.v1", "count": 1}, {"type": "fact", "text": "The vault is at vault.internal."}]
    (tmp_path / "old.jsonl").write_text("\n".join(json.dumps(r) for r in old))
    bad = [
        {"kind": "spore", "text": "Renew the vault token", "cue": "vault"},
        {"type": "fact", "text": "Another fact."},
        {
            "kind": "crystal",
            "name": "Vault first",
            "evidence": [{"uri": "mem://neo/fact/0123456789abcdef", "label": 3}],
        },
    ]
    (tmp_path / "bad.jsonl").write_text("\n".join(json.dumps(r) for r in bad))
    with mempager.open(location, actor="neo", config=QUIET) as here:
        report = here.import_memories(tmp_path / "old.jsonl")
        assert (report.added, report.crystals, report.spores) == (1, 0, 0)
        here.spore("Check the vault audit log")
        before, audit = export_lines(here), len(tier_audit(here)) + len(memory_audit(here))
        with pytest.raises(InvalidImportLine, match=r"^line 3: each evidence entry is"):
            here.import_memories(tmp_path / "bad.jsonl")
        assert export_lines(here) == before and len(tier_audit(here)) + len(memory_audit(here)) == audit
