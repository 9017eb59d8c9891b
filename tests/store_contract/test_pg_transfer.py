"""export / import between DuckDB and a real PostgreSQL: DuckDB -> JSONL -> PostgreSQL -> JSONL
compares equal (but for what an import legitimately renews), vectors included; idempotent on the
server too; a bad file stores nothing; backup of a server store is refused with what to use."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import mempager
from mempager import PagerConfig

from ..pager.test_transfer import ACCESSED, HASH, QUIET, comparable, export_lines, memory_audit, populate
from .conftest import REPO, child_env

PG_QUIET = PagerConfig(embedder="hash", embed_workers=0)


def vectors_by_hash(p: mempager.Pager) -> dict[str, np.ndarray]:
    labels, matrix = p.store.vectors(p.actor, p.semantic.model)
    hashes = p.store.content_hashes(p.actor)
    return {hashes[int(label)]: row for label, row in zip(labels, matrix, strict=True)}


def test_duckdb_to_postgres_and_back_compares_equal(pg_url: str, tmp_path: Path) -> None:
    with mempager.open(tmp_path / "src.duckdb", actor="neo", config=HASH) as src:
        populate(src)
        assert src.sync(timeout=60)
        source = export_lines(src, vectors=True)
        src.export(tmp_path / "duck.jsonl", vectors=True)
        original = vectors_by_hash(src)
        model = src.semantic.model
    with mempager.open(pg_url, actor="neo", config=PG_QUIET) as pg:
        report = pg.import_memories(tmp_path / "duck.jsonl")
        assert (report.read, report.added, report.skipped, report.vectors, report.restored) == (11, 11, 0, 11, 6)
        # nothing to re-embed: the server's queue for the model holds none of them
        assert pg.store.pending_stats("neo", model).count == 0 and pg.stats()["pending_embeddings"] == 0
        copied = vectors_by_hash(pg)
        assert copied.keys() == original.keys()
        assert all(np.array_equal(copied[h], original[h]) for h in original)
        tea = next(m for m in pg.recall(limit=100) if "green tea" in m.text)
        assert tea.access_count == 1 and tea.last_accessed_at == ACCESSED
        hits = pg.retrieve("where is the deploy key vault?")
        assert "semantic" in hits[0].lanes and "secret/deploy" in hits[0].text
        through_pg = export_lines(pg, vectors=True)
        pg.export(tmp_path / "pg.jsonl", vectors=True)
        assert pg.verify_audit().ok
    assert through_pg[0]["count"] == 11 and through_pg[0]["store"].startswith("postgresql://")
    assert comparable(through_pg[1:]) == comparable(source[1:])
    assert [[v["data"] for v in r["vectors"]] for r in through_pg[1:]] == [
        [v["data"] for v in r["vectors"]] for r in source[1:]
    ]
    with mempager.open(tmp_path / "back.duckdb", actor="neo", config=QUIET) as back:  # and home again
        assert back.import_memories(tmp_path / "pg.jsonl").added == 11
        assert comparable(export_lines(back)[1:]) == comparable(source[1:])
        assert back.stats()["pending_embeddings"] == 0


def test_import_into_postgres_twice_adds_nothing(pg_url: str, tmp_path: Path) -> None:
    with mempager.open(tmp_path / "src.duckdb", actor="neo", config=HASH) as src:
        populate(src)
        src.export(tmp_path / "duck.jsonl")
    with mempager.open(pg_url, actor="neo", config=PG_QUIET) as pg:
        assert pg.import_memories(tmp_path / "duck.jsonl").added == 11
        once = export_lines(pg)
        again = pg.import_memories(tmp_path / "duck.jsonl")
        assert (again.added, again.skipped, again.restored) == (0, 11, 0)
        assert export_lines(pg) == once


def test_a_bad_line_stores_nothing_on_postgres(pg_url: str, tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"type": "fact", "text": "fine"}) + "\n" + json.dumps({"type": "fact"}) + "\n")
    with mempager.open(pg_url, actor="neo", config=PG_QUIET) as pg:
        with pytest.raises(mempager.InvalidInput, match="^line 2: "):
            pg.import_memories(path)
        assert pg.recall(limit=10) == [] and memory_audit(pg) == []


def test_backup_of_a_server_store_names_pg_dump_and_export(pg_url: str, tmp_path: Path) -> None:
    from mempager.maintenance.backup import BackupUnsupported

    with mempager.open(pg_url, actor="neo", config=PG_QUIET) as pg:
        with pytest.raises(BackupUnsupported, match="pg_dump") as caught:
            pg.backup(tmp_path / "copy.duckdb")
        assert "mempager export --vectors" in str(caught.value)
    assert not (tmp_path / "copy.duckdb").exists()


def test_cli_import_into_postgres_from_stdin(pg_url: str, tmp_path: Path) -> None:
    with mempager.open(tmp_path / "src.duckdb", actor="default", config=HASH) as src:
        populate(src)
        assert src.sync(timeout=60)
        src.export(tmp_path / "duck.jsonl", vectors=True)
    env = {**child_env(), "MEMPAGER_STORE": pg_url, "MEMPAGER_EMBEDDER": "hash"}
    proc = subprocess.run(
        [sys.executable, "-m", "mempager", "import", "-", "--json"],
        input=(tmp_path / "duck.jsonl").read_text(),
        capture_output=True,
        text=True,
        env=env,
        cwd=str(REPO),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["added"] == 11 and json.loads(proc.stdout)["vectors"] == 11
    backup = subprocess.run(
        [sys.executable, "-m", "mempager", "backup", str(tmp_path / "x.duckdb")],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(REPO),
        timeout=120,
    )
    assert backup.returncode == 2 and backup.stderr.startswith("mempager: error: backup copies an embedded DuckDB")
    with mempager.open(pg_url, actor="default", config=PG_QUIET) as pg:
        assert pg.stats()["memories"] == 11 and pg.stats()["pending_embeddings"] == 0
