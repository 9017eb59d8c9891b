"""The hash-chained audit trail: every mutation, content hashes only, tamper detection."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

import mempager
from mempager import PagerConfig, PatternSpec
from mempager.types import AuditEntry


def test_every_mutation_appends_a_chained_entry(store_path: Path) -> None:
    seen: list[AuditEntry] = []
    cfg = PagerConfig(embedder="hash", memory_mode="copilot")
    with mempager.open(store_path, actor="neo", config=cfg, on_audit_event=seen.append) as p:
        uri = p.remember_fact("The vault path is secret/billing.")
        p.remember_fact("the vault path is secret/billing")  # dedup -> reinforce
        p.remember_many([{"type": "event", "text": f"event {i}"} for i in range(3)])
        for _ in range(3):
            p.reinforce_pattern(PatternSpec(name="ship", trigger="ship it", steps=["a"]))
        p.page("q", goal="ship it", turn="t1")
        p.feedback("t1", "success")
        held = p.remember_fact("maybe", source="llm", confidence=0.1)
        p.decide(p.review()[0].id, accept=False)
        assert held.startswith("review://")
        p.forget(uri)
        ops = [e.op for e in p.audit()]
        assert ops == [
            "migration",  # the first open records the actor's active embedding model
            "remember",
            "reinforce",
            "remember",
            "remember",
            "remember",
            "remember",
            "reinforce",
            "reinforce",
            "feedback",
            "feedback",
            "review",
            "forget",
        ]
        assert [e.seq for e in seen] == [e.seq for e in p.audit()]  # the callback saw every entry
        assert p.verify_audit().ok
        entries = p.audit()
        assert all(b.prev_hash == a.hash for a, b in zip(entries, entries[1:], strict=False))
        assert p.audit(since="1h") == entries and p.audit(since="2999-01-01") == []


def test_erasure_keeps_the_chain_and_no_content(store_path: Path) -> None:
    with mempager.open(store_path, actor="neo", config=PagerConfig(embedder="hash")) as p:
        uri = p.remember_fact("CANARY-audit-4412 the user's passport number")
        p.forget(uri)
        assert p.verify_audit().ok
        for e in p.audit():
            assert "CANARY" not in f"{e.uri}{e.content_hash}{e.op}"


def test_tampering_is_detected_and_named(store_path: Path) -> None:
    with mempager.open(store_path, actor="neo", config=PagerConfig(embedder="hash")) as p:
        for i in range(5):
            p.remember_fact(f"fact {i}")
    con = duckdb.connect(str(store_path))
    con.execute("UPDATE audit SET op = 'forget' WHERE seq = 3")
    con.close()
    with mempager.open(store_path, actor="neo", config=PagerConfig(embedder="hash")) as p:
        report = p.verify_audit()
        assert not report.ok and report.first_broken == 3
    con = duckdb.connect(str(store_path))
    con.execute("UPDATE audit SET op = 'remember' WHERE seq = 3")
    con.execute("DELETE FROM audit WHERE seq = 2")
    con.close()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mempager",
            "audit",
            "verify",
            "--store",
            str(store_path),
            "--actor",
            "neo",
            "--embedder",
            "hash",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1 and "BROKEN at entry 3" in proc.stdout
    listed = subprocess.run(
        [
            sys.executable,
            "-m",
            "mempager",
            "audit",
            "--since",
            "7d",
            "--store",
            str(store_path),
            "--actor",
            "neo",
            "--embedder",
            "hash",
        ],
        capture_output=True,
        text=True,
    )
    assert listed.returncode == 0 and listed.stdout.count("remember") == 4


def test_failed_write_leaves_no_audit_entry(store_path: Path) -> None:
    with mempager.open(store_path, actor="neo", config=PagerConfig(embedder="hash")) as p:
        p.remember_fact("ok")
        with pytest.raises(mempager.EmptyText):
            p.remember_fact("")
        assert [e.op for e in p.audit()] == ["migration", "remember"]  # the active model, then the write
        assert p.verify_audit().ok
