"""backup on real DuckDB files: a consistent copy taken while another thread writes, that opens
and takes writes; never overwriting; a server store refused (tests/store_contract/test_pg_transfer.py)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import mempager
from mempager import InvalidInput, PagerConfig
from mempager.maintenance.backup import BackupUnsupported

HASH = PagerConfig(embedder="hash")
QUIET = PagerConfig(embedder="hash", embed_workers=0)


def test_backup_while_another_thread_writes(store_path: Path, tmp_path: Path) -> None:
    with mempager.open(store_path, actor="neo", config=HASH) as p:
        committed: list[str] = []
        stop = threading.Event()

        def writer() -> None:
            i = 0
            while not stop.is_set():
                committed.append(p.remember_fact(f"fact number {i} written during the backup"))
                i += 1

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            while len(committed) < 50:
                time.sleep(0.005)
            before = list(committed)
            dest = p.backup(tmp_path / "copy.duckdb")
            while len(committed) < len(before) + 20:  # the store goes on taking writes
                time.sleep(0.005)
        finally:
            stop.set()
            thread.join()
        total = len(p.recall(limit=100_000))
    assert dest == tmp_path / "copy.duckdb" and sorted(x.name for x in tmp_path.iterdir()) == [
        "agent.duckdb",
        "agent.duckdb.index",
        "copy.duckdb",
    ]
    with mempager.open(dest, actor="neo", config=HASH) as copy:
        held = [m.uri for m in copy.recall(limit=100_000)]
        assert set(before) <= set(held)  # every memory committed before the backup
        assert set(held) == set(committed[: len(held)])  # and a consistent cut: a prefix of the writes
        assert len(held) < total
        assert copy.verify_audit().ok
        assert copy.remember_fact("written to the copy").startswith("mem://neo/fact/")  # it takes new writes
        assert copy.sync(timeout=30)


def test_backup_refuses_to_overwrite_and_accepts_a_directory(store_path: Path, tmp_path: Path) -> None:
    (tmp_path / "backups").mkdir()
    with mempager.open(store_path, actor="neo", config=QUIET) as p:
        uri = p.remember_fact("kept")
        dest = p.backup(tmp_path / "backups")
        assert dest == tmp_path / "backups" / "agent.duckdb"
        with pytest.raises(InvalidInput, match="already exists"):
            p.backup(dest)
        with pytest.raises(InvalidInput, match="is the store itself|already exists"):
            p.backup(store_path)
        with pytest.raises(InvalidInput, match="not a directory"):
            p.backup(tmp_path / "nowhere" / "copy.duckdb")
    with mempager.open(dest, actor="neo", config=QUIET) as copy:
        assert copy.get(uri).text == "kept"
    assert issubclass(BackupUnsupported, mempager.StoreError)
