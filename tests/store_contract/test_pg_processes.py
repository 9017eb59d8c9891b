"""Many processes on one PostgreSQL store: concurrent dedup, visibility, restarts, isolation, shared embedding.

Every child is a real Python process with its own pool; they meet only in the database.
"""

from __future__ import annotations

import json
import threading
from collections import Counter

import pytest

import mempager
from mempager import MemoryNotFound, PagerConfig
from mempager.embedders import HashEmbedder
from mempager.store.pg import open_pg_store
from mempager.store.pg.migrations import LATEST
from mempager.types import MemoryType, NewMemory

from .conftest import PgServer, finish, line, spawn, tell

HASH = PagerConfig(embedder="hash")

WRITER = """
import sys
from mempager.store.pg import open_pg_store
from mempager.types import MemoryType, NewMemory
url, start = sys.argv[1], int(sys.argv[2])
store = open_pg_store(url)
print("ready", flush=True)
sys.stdin.readline()
for j in range(start, start + 500):
    result = store.put(NewMemory(actor="team", type=MemoryType.FACT, text=f"shared fact number {j}"))
    print(result.memory.id, flush=True)
store.close()
"""


def test_four_writers_overlapping_texts_dedup_exactly(pg_url: str) -> None:
    # process i writes facts 250*i .. 250*i+499: neighbours overlap by 250 texts, 1,250 distinct in all
    procs = [spawn(WRITER, pg_url, str(250 * i)) for i in range(4)]
    for proc in procs:
        assert line(proc) == "ready"
    for proc in procs:
        tell(proc)  # all four start together
    acked = [finish(proc).split() for proc in procs]
    assert [len(a) for a in acked] == [500] * 4
    store = open_pg_store(pg_url)
    memories = store.query("team", limit=10_000)
    texts = Counter(m.text for m in memories)
    assert len(memories) == 1250 and max(texts.values()) == 1  # exactly the distinct texts, no duplicate
    assert texts.keys() == {f"shared fact number {j}" for j in range(1250)}
    assert sum(1 + m.access_count for m in memories) == 2000  # every write landed: created or reinforced
    assert {i for a in acked for i in a} == {m.id for m in memories}  # each acknowledged id exists
    assert store.verify_audit().ok and len(store.audit_entries(limit=10_000)) == 2000
    store.close()


REMEMBERER = """
import sys, mempager
p = mempager.open(sys.argv[1], actor="neo", config=mempager.PagerConfig(embedder="hash"))
for i in range(25):
    print(p.remember_fact(f"observation {i} mentions the token zq{i}x"), flush=True)
    sys.stdin.readline()  # the reader checks before the next write
assert p.sync(timeout=60)
print("synced", flush=True)
sys.stdin.readline()
print(p.forget(sys.stdin.readline().strip()), flush=True)
p.close()
"""


def test_a_reader_in_another_process_sees_each_write_when_it_returns(pg_url: str) -> None:
    writer = spawn(REMEMBERER, pg_url)
    uris = []
    with mempager.open(pg_url, actor="neo", config=HASH) as p:
        for i in range(25):
            uri = line(writer)
            uris.append(uri)
            assert p.get(uri).text == f"observation {i} mentions the token zq{i}x"
            assert [m.uri for m in p.recall(f"zq{i}x")] == [uri]  # the lexical lane caught up
            assert uri in [s.uri for s in p.retrieve(f"zq{i}x")]
            tell(writer)
        assert line(writer) == "synced"
        for i, uri in enumerate(uris):  # after the writer's sync its vectors answer here
            label = p.get(uri).label
            vector = p.semantic.embed_query(f"observation {i} mentions the token zq{i}x")
            assert label in [hit[0] for hit in p.semantic.search_vector(vector, 3)]
        assert p.stats()["vectors_indexed"] == 25 and p.stats()["pending_embeddings"] == 0
        tell(writer)
        tell(writer, uris[0])
        assert line(writer) == "1"
        with pytest.raises(MemoryNotFound):
            p.get(uris[0])
        assert p.recall("zq0x") == [] and uris[0] not in [s.uri for s in p.retrieve("zq0x")]
    finish(writer)


CLIENT = """
import sys, time
from mempager.errors import StoreError
from mempager.store.pg import open_pg_store
from mempager.types import MemoryType, NewMemory
url, name = sys.argv[1], sys.argv[2]
store = open_pg_store(url, pool_timeout_s=3)
retries = 0
for i in range(120):
    item = NewMemory(actor="team", type=MemoryType.FACT, text=f"{name} write {i}")
    while True:
        try:
            result = store.put(item)
            break
        except StoreError:
            retries += 1
    print("ack", result.memory.id, flush=True)
    time.sleep(0.05)  # paced, so the restart after 30 acks lands mid-run even when the test is slow to act
print("retries", retries, flush=True)
store.close()
"""


def test_server_restart_mid_run_loses_nothing_acknowledged(pg_url: str, pg_server: PgServer) -> None:
    clients = [spawn(CLIENT, pg_url, f"client{c}") for c in range(2)]
    acked: list[list[str]] = [[], []]
    counts = [threading.Semaphore(0), threading.Semaphore(0)]
    tails: list[str] = ["", ""]

    def follow(c: int) -> None:
        assert clients[c].stdout is not None
        for out in clients[c].stdout:
            if out.startswith("ack "):
                acked[c].append(out.split()[1])
                counts[c].release()
            else:
                tails[c] = out.strip()

    readers = [threading.Thread(target=follow, args=(c,), daemon=True) for c in range(2)]
    for r in readers:
        r.start()
    for sem in counts:
        for _ in range(30):
            assert sem.acquire(timeout=60)
    before = [len(a) for a in acked]
    started = pg_server.execute("SELECT pg_postmaster_start_time()")[0][0]
    pg_server.restart()  # fast shutdown: every client connection is cut mid-run
    assert pg_server.execute("SELECT pg_postmaster_start_time()")[0][0] > started
    for proc in clients:
        assert proc.wait(120) == 0, proc.stderr.read() if proc.stderr else ""
    for r in readers:
        r.join(10)
    assert all(n < 120 for n in before)  # the restart really happened mid-run
    assert [len(a) for a in acked] == [120, 120] and all(t.startswith("retries") for t in tails)
    store = open_pg_store(pg_url)
    stored = {m.id for m in store.query("team", limit=1000)}
    assert set(acked[0]) | set(acked[1]) <= stored  # nothing acknowledged was lost
    assert len(stored) == 240 and store.verify_audit().ok
    store.close()


ALICE = """
import sys, mempager
p = mempager.open(sys.argv[1], actor="alice", config=mempager.PagerConfig(embedder="hash"))
uri = p.remember_fact("alice's launch code is 7731-orchid")
p.add_rule("alice never shares the launch code")
assert p.sync(timeout=60)
print(uri, flush=True)
p.close()
"""


def test_actor_isolation_across_processes(pg_url: str) -> None:
    secret_uri = finish(spawn(ALICE, pg_url)).strip()
    with mempager.open(pg_url, actor="bob", config=HASH) as bob:
        bob.remember_fact("bob likes chess")
        assert bob.sync(timeout=60)
        assert all("alice" not in s.uri and "7731" not in s.text for s in bob.retrieve("launch code 7731-orchid"))
        assert bob.recall("7731-orchid") == [] and [m.text for m in bob.recall()] == ["bob likes chess"]
        assert "launch code" not in bob.pinned()
        with pytest.raises(MemoryNotFound):
            bob.get(secret_uri)
        with pytest.raises(MemoryNotFound):
            bob.forget(secret_uri)
        assert bob.stats()["memories"] == 1 and bob.stats()["vectors_indexed"] == 1
        assert all(e.actor == "bob" for e in bob.audit())
    with mempager.open(pg_url, actor="alice", config=HASH) as alice:
        assert alice.get(secret_uri).text == "alice's launch code is 7731-orchid"  # bob's forget did nothing


EMBEDDER = """
import json, sys, mempager
from mempager.embedders import HashEmbedder

class Counting(HashEmbedder):
    documents = 0
    def embed(self, texts, role="document"):
        if role == "document":
            Counting.documents += len(texts)
        return super().embed(texts, role)

config = mempager.PagerConfig(embedder="hash", embed_batch_size=8)
p = mempager.open(sys.argv[1], actor="team", config=config, embedder=Counting(64))
print("ready", flush=True)
sys.stdin.readline()
assert p.sync(timeout=120)
print(json.dumps({"embedded": Counting.documents}), flush=True)
p.close()
"""


def test_embedding_work_is_shared_without_double_work(pg_url: str) -> None:
    workers = [spawn(EMBEDDER, pg_url) for _ in range(3)]
    for proc in workers:
        assert line(proc) == "ready"
    store = open_pg_store(pg_url)
    for batch in range(8):
        store.put_many([NewMemory(actor="team", type=MemoryType.FACT, text=f"job {batch}-{i}") for i in range(30)])
    for proc in workers:
        tell(proc)
    counts = [json.loads(finish(proc).strip().splitlines()[-1])["embedded"] for proc in workers]
    assert sum(counts) == 240  # each memory embedded exactly once, across three processes
    model = HashEmbedder(64).name
    assert store.vector_models("team") == {model: 240} and store.pending_stats("team", model).count == 0
    store.close()


OPENER = """
import sys
from mempager.store.pg import open_pg_store
sys.stdin.readline()
store = open_pg_store(sys.argv[1])
print(store.store_id, flush=True)
store.close()
"""


def test_migrations_run_once_when_processes_start_together(pg_url: str, pg_schema: str, pg_server: PgServer) -> None:
    procs = [spawn(OPENER, pg_url) for _ in range(4)]
    for proc in procs:
        tell(proc)
    ids = {finish(proc).strip() for proc in procs}
    assert len(ids) == 1 and "" not in ids
    rows = pg_server.execute(f"SELECT version FROM {pg_schema}.schema_migrations ORDER BY version")
    assert [r[0] for r in rows] == list(range(1, LATEST + 1))
