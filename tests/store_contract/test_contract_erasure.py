"""Deferred erasure on both stores: the durable mark, the pass, and an open after a crash.

On PostgreSQL the pass is VACUUM FULL (fresh table, TOAST and index files written from the live
rows; the old files are unlinked), followed by a CHECKPOINT so the WAL holding the old rows can be
recycled. The byte scan covers the relation files (not the WAL: recycling is the server's)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import mempager
from mempager import PagerConfig

from .conftest import child_env, raw_sql
from .test_contract_journal import _bytes_on_disk

CANARY = "canary-e1a5e-the-words-that-must-vanish"
SLOW = PagerConfig(embedder="hash", erase_delay_seconds=3600)


def location(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    return str(tmp_path / "agent.duckdb") if backend == "duckdb" else str(request.getfixturevalue("pg_url"))


def seeded(where: str, server: Any) -> str:
    with mempager.open(where, actor="neo", config=SLOW) as p:
        p.remember_fact("a memory that stays")
        uri = p.remember_fact(f"{CANARY} " * 40)
        assert p.sync(timeout=60)
        raw_sql(p.store, "CHECKPOINT")
        assert CANARY.encode() in _bytes_on_disk(p.store, server)
    return uri


def test_mark_pass_and_clear(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    server = request.getfixturevalue("pg_server") if backend == "postgres" else None
    where = location(backend, tmp_path, request)
    uri = seeded(where, server)
    with mempager.open(where, actor="neo", config=SLOW) as p:
        assert p.forget(uri) == 1
        assert set(p.store.erasure_marks()) == {"neo"}  # durable before the delete
        token = p.store.erasure_marks()["neo"]
        assert p.store.clear_erasure("neo", "not-the-token") is False  # compare-and-delete
        p.erase_now()
        assert CANARY.encode() not in _bytes_on_disk(p.store, server)
        assert p.store.erasure_marks() == {} and p.store.clear_erasure("neo", token) is False
        assert [m.text for m in p.recall()] == ["a memory that stays"]
        assert p.verify_audit().ok and p.audit()[-1].op == "erase"


CHILD = r"""
import os, signal, sys
import mempager
from mempager import PagerConfig

p = mempager.open(sys.argv[1], actor="neo", config=PagerConfig(embedder="hash", erase_delay_seconds=3600))
assert p.forget(sys.argv[2]) == 1
print("forgot", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_open_after_a_crash_erases_before_serving(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    server = request.getfixturevalue("pg_server") if backend == "postgres" else None
    where = location(backend, tmp_path, request)
    uri = seeded(where, server)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, where, uri],
        capture_output=True,
        text=True,
        timeout=300,
        env=child_env(),
        check=False,
    )
    assert done.returncode == -signal.SIGKILL and done.stdout.strip() == "forgot", done.stderr
    with mempager.open(where, actor="bob", config=SLOW) as b:  # any actor's open finishes it
        assert CANARY.encode() not in _bytes_on_disk(b.store, server)
        assert b.store.erasure_marks() == {}
    with mempager.open(where, actor="neo", config=SLOW) as p:
        assert [m.text for m in p.recall()] == ["a memory that stays"] and p.verify_audit().ok
