"""What only the DuckDB store has: file migrations, the single-writer lock, durability under SIGKILL.

Everything both stores share (round trips, dedup, isolation, vectors, the journal) is in
``tests/store_contract``, which runs each test on DuckDB and on PostgreSQL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from mempager.errors import SchemaTooNew, StoreLocked
from mempager.store.duckdb import DuckDBStore
from mempager.store.migrations import LATEST


def test_migrations_recorded_and_newer_schema_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.duckdb"
    s = DuckDBStore(path)
    assert s.db.fetch("SELECT max(version) FROM schema_migrations")[0][0] == LATEST
    s.db.fetch("INSERT INTO schema_migrations (version, name) VALUES (?, 'from the future')", [LATEST + 1])
    s.close()
    with pytest.raises(SchemaTooNew, match="upgrade mempager"):
        DuckDBStore(path)


def test_second_process_gets_store_locked(tmp_path: Path) -> None:
    path = tmp_path / "locked.duckdb"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import sys, time
            from mempager.store.duckdb import DuckDBStore
            s = DuckDBStore({str(path)!r}); print("ready", flush=True); time.sleep(60)
        """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        with pytest.raises(StoreLocked) as info:
            DuckDBStore(path)
        message = str(info.value)
        assert str(path) in message and "another process" in message
    finally:
        holder.kill()
        holder.wait()


WRITER = """
import sys
from mempager.store.duckdb import DuckDBStore
from mempager.types import NewMemory, MemoryType
s = DuckDBStore(sys.argv[1])
i = 0
while True:
    if i % 7 == 3:
        batch = [NewMemory(actor="w", type=MemoryType.EVENT, text=f"batch {i} item {j}") for j in range(50)]
        s.put_many(batch)
        print(f"B {i}", flush=True)
    else:
        s.put(NewMemory(actor="w", type=MemoryType.FACT, text=f"fact number {i}"))
        print(f"A {i}", flush=True)
    i += 1
"""


@pytest.mark.parametrize("round_", range(10))
def test_acknowledged_writes_survive_sigkill(tmp_path: Path, round_: int) -> None:
    path = tmp_path / f"crash{round_}.duckdb"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    acked: list[str] = []
    assert proc.stdout is not None
    deadline = time.monotonic() + 0.4 + 0.15 * round_
    for line in proc.stdout:
        acked.append(line.strip())
        if time.monotonic() > deadline and len(acked) > 5:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    s = DuckDBStore(path)
    texts = {m.text for m in s.query("w", limit=10_000_000)}
    for ack in acked:
        kind, i = ack.split()
        if kind == "A":
            assert f"fact number {i}" in texts
        else:
            assert all(f"batch {i} item {j}" in texts for j in range(50))
    # no partial batch: every batch is all-or-nothing
    batches: dict[str, int] = {}
    for t in texts:
        if t.startswith("batch "):
            batches[t.split()[1]] = batches.get(t.split()[1], 0) + 1
    assert all(n == 50 for n in batches.values())
    s.close()


def test_the_write_ahead_log_checkpoints_at_its_own_size_also_after_a_compaction(tmp_path: Path) -> None:
    """DuckDB's default (16 MiB) checkpointed every ~25k memories, rewriting every index each time."""
    from mempager.store.base import CHECKPOINT_AT
    from mempager.types import MemoryType, NewMemory

    def threshold(store: DuckDBStore) -> str:
        return str(store.db.fetch("SELECT current_setting('checkpoint_threshold')")[0][0])

    store = DuckDBStore(tmp_path / "w.duckdb")
    try:
        assert CHECKPOINT_AT == "256MiB" and threshold(store) == "256.0 MiB"
        store.put_many([NewMemory(actor="a", type=MemoryType.FACT, text=f"fact {i}") for i in range(20)])
        store.compact()  # reconnects to the rewritten file
        assert threshold(store) == "256.0 MiB"
        assert len(store.query("a", limit=100)) == 20
    finally:
        store.close()
