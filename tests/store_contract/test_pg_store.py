"""PostgreSQL-only behaviour: URLs and options, errors that keep the password out, migrations
under the lock, reconnection, atomic batches, the claimed embedding queue."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import numpy as np
import pytest

from mempager.errors import ConfigError, InvalidInput, SchemaTooNew, StoreError
from mempager.store.pg import PgOptions, open_pg_store
from mempager.store.pg.migrations import LATEST
from mempager.store.pg.options import password_of, scrub, split_options, typed_options
from mempager.types import MemoryType, NewMemory

from .conftest import PgServer

CANARY = "s3cret-Canary-9dx"


def fact(text: str, actor: str = "a") -> NewMemory:
    return NewMemory(actor=actor, type=MemoryType.FACT, text=text)


def test_url_parsing_and_redaction() -> None:
    url = f"postgresql://agent:{CANARY}@db.internal:5433/memory?sslmode=require&schema=team_a"
    assert split_options(url + "&pool_max=16") == (
        f"postgresql://agent:{CANARY}@db.internal:5433/memory?sslmode=require",
        {"schema": "team_a", "pool_max": "16"},
    )
    assert split_options("postgresql:///db") == ("postgresql:///db", {})
    assert typed_options({"pool_max": "16", "claim_seconds": "2.5", "schema": "x"}) == {
        "pool_max": 16,
        "claim_seconds": 2.5,
        "schema": "x",
    }
    assert password_of(url) == CANARY
    assert password_of(f"host=x password='{CANARY}' dbname=y") == CANARY
    assert CANARY not in scrub(f"failed for {url} and password={CANARY}", CANARY)


def test_options_are_validated_with_the_bad_value() -> None:
    with pytest.raises(ConfigError, match="'Team-A'"):
        PgOptions(schema="Team-A")
    with pytest.raises(ConfigError, match="pool_max=0"):
        PgOptions(pool_max=0)
    with pytest.raises(ConfigError, match="unknown PostgreSQL store options"):
        open_pg_store("postgresql:///x", pool_size=3)
    with pytest.raises(ConfigError, match="schema given twice"):
        open_pg_store("postgresql:///x?schema=a", schema="b")
    with pytest.raises(ConfigError, match="'many'"):
        open_pg_store("postgresql:///x?pool_max=many")


def test_server_down_is_a_store_error_without_the_password(tmp_path: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    url = f"postgresql://agent:{CANARY}@/memory?host={tmp_path}&connect_timeout=2"
    started = time.monotonic()
    with pytest.raises(StoreError) as info:
        open_pg_store(url)
    assert time.monotonic() - started < 30  # a clear error, not a hang
    message = str(info.value)
    assert "postgresql://agent@" in message and CANARY not in message
    assert CANARY not in caplog.text
    bad = f"postgresql://agent:{CANARY} x@/memory"
    with pytest.raises(ConfigError) as parse:
        open_pg_store(bad)
    assert CANARY not in str(parse.value) and parse.value.__cause__ is None


def test_location_hides_the_password(pg_server: PgServer, pg_schema: str) -> None:
    url = pg_server.schema_url(pg_schema).replace("postgres:@", f"postgres:{CANARY}@")
    store = open_pg_store(url)  # the test server trusts local users, so any password is accepted
    try:
        assert CANARY not in store.location and CANARY not in repr(store)
        assert store.location.endswith(f"schema={pg_schema}")
        assert open_pg_store(url) is store  # one store (one pool) per URL and options in a process
        tuned = open_pg_store(url + "&pool_max=3&ef_search=40")  # options ride in the URL (CLI, MCP)
        assert (tuned.options.pool_max, tuned.options.ef_search) == (3, 40) and tuned is not store
        tuned.close()
        store.close()
        assert not store.closed
    finally:
        store.close()
    assert store.closed


def test_newer_schema_is_refused(pg_url: str, pg_schema: str, pg_server: PgServer) -> None:
    open_pg_store(pg_url).close()
    pg_server.execute(f"INSERT INTO {pg_schema}.schema_migrations (version, name) VALUES ({LATEST + 1}, 'future')")
    with pytest.raises(SchemaTooNew, match="upgrade mempager"):
        open_pg_store(pg_url)


def test_concurrent_openers_migrate_once(pg_url: str, pg_schema: str, pg_server: PgServer) -> None:
    barrier = threading.Barrier(6)
    opened: list[Any] = []
    errors: list[BaseException] = []

    def opener(i: int) -> None:
        barrier.wait()
        try:
            opened.append(open_pg_store(pg_url, pool_max=i + 1))  # distinct options: distinct stores
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=opener, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(opened) == 6
    rows = pg_server.execute(f"SELECT version FROM {pg_schema}.schema_migrations ORDER BY version")
    assert [r[0] for r in rows] == list(range(1, LATEST + 1))
    assert len({s.store_id for s in opened}) == 1
    for s in opened:
        s.close()


def test_batch_failing_at_commit_time_leaves_nothing(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_pg_store(pg_url)
    store.put(fact("before"))
    from mempager.store.pg.db import Db

    def failing_seal(conn: Any, rows: Any) -> Any:
        conn.execute("SELECT 1/0")  # a server-side error after every row of the batch was inserted

    monkeypatch.setattr(Db, "_seal", staticmethod(failing_seal))
    with pytest.raises(StoreError, match="22012"):
        store.put_many([fact(f"batch {i}") for i in range(50)])
    monkeypatch.undo()
    assert [m.text for m in store.query("a", limit=100)] == ["before"]
    assert store.pending_stats("a", "m").count == 1 and store.verify_audit().ok
    store.close()


def test_text_postgres_cannot_hold_is_refused_before_sending(pg_url: str) -> None:
    store = open_pg_store(pg_url)
    with pytest.raises(InvalidInput, match="NUL"):
        store.put(NewMemory(actor="a", type=MemoryType.FACT, text="ok", tags=("bad\x00tag",)))
    m = store.put(fact("fine")).memory
    with pytest.raises(InvalidInput, match="NUL"):
        store.update("a", m.id, text="nul\x00here")
    assert store.counts("a") == {"fact": 1}
    store.close()


def test_pool_recovers_from_killed_connections(pg_url: str, pg_server: PgServer) -> None:
    store = open_pg_store(pg_url)
    store.put(fact("before the kill"))
    killed = pg_server.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'mempager'"
    )
    assert killed
    assert store.put(fact("after the kill")).created
    assert {m.text for m in store.query("a")} == {"before the kill", "after the kill"}
    store.close()


def test_reconnects_after_a_server_restart(pg_url: str, pg_server: PgServer) -> None:
    store = open_pg_store(pg_url)
    acked = [store.put(fact(f"before {i}")).memory.id for i in range(20)]
    pg_server.restart()
    acked += [store.put(fact(f"after {i}")).memory.id for i in range(20)]
    assert {m.id for m in store.query("a", limit=100)} == set(acked)
    assert store.verify_audit().ok
    store.close()


def test_claims_share_the_queue_between_processes(pg_url: str) -> None:
    one = open_pg_store(pg_url, claim_seconds=1)
    two = open_pg_store(pg_url, claim_seconds=1, pool_max=2)  # another store object: another claimer
    assert one is not two and one.claimer != two.claimer
    labels = [r.memory.label for r in one.put_many([fact(f"job {i}") for i in range(10)])]
    first = [p.label for p in one.pending("a", "m", 4)]
    assert first == labels[:4] and [p.label for p in one.pending("a", "m", 4)] == first  # own claims repeat
    second = [p.label for p in two.pending("a", "m", 100)]
    assert second == labels[4:]  # nothing twice
    assert two.pending_stats("a", "m").count == 10  # claimed jobs are still pending
    one.record_embed_failure("m", first[:2], "embedder down")  # a failure releases the claim at once
    assert [p.label for p in two.pending("a", "m", 100)] == labels[4:] + first[:2]
    time.sleep(1.2)  # the lease on first[2:] runs out (a crashed worker's jobs go back to the queue)
    assert set(first[2:]) <= {p.label for p in two.pending("a", "m", 100)}
    hashes = two.get_many("a", labels)
    two.put_vectors("m", np.array(labels), np.ones((10, 3), np.float32), [hashes[x].content_hash for x in labels])
    assert one.pending("a", "m", 100) == [] and one.pending_stats("a", "m").count == 0
    one.close()
    two.close()


def test_high_dimensional_models(pg_url: str) -> None:
    store = open_pg_store(pg_url)
    ms = [r.memory for r in store.put_many([fact(f"wide {i}") for i in range(6)])]
    rng = np.random.default_rng(3)
    for model, dim in (("half", 2500), ("exact", 4100)):  # halfvec index, and no index at all
        vectors = rng.normal(size=(6, dim)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        store.put_vectors(model, np.array([m.label for m in ms]), vectors, [m.content_hash for m in ms])
        hits = store.search_vectors("a", model, vectors[2], 3)
        assert hits[0][0] == ms[2].label and hits[0][1] == pytest.approx(1.0, abs=1e-3) and len(hits) == 3
    store.close()
