"""The pager's lanes over PostgreSQL: pgvector search with the actor filter inside the query, and
BM25 fed from the database. Two store objects stand in for two processes (no shared listeners)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mempager.embedders import HashEmbedder
from mempager.store.pg import open_pg_store
from mempager.store.pg.lanes import PgLexicalLane, PgSemanticLane
from mempager.types import MemoryType, NewMemory


class Named:
    """An embedder that only has a name: these tests store their own vectors."""

    name, dim = "m", 32

    def embed(self, texts: Any, role: str = "document") -> Any:
        raise AssertionError("not used")


def put(store: Any, texts: list[str], actor: str) -> list[Any]:
    return [r.memory for r in store.put_many([NewMemory(actor=actor, type=MemoryType.FACT, text=t) for t in texts])]


@pytest.fixture
def two(pg_url: str) -> Any:
    writer = open_pg_store(pg_url)
    reader = open_pg_store(pg_url, pool_max=3)  # other options: another store, as in another process
    assert writer is not reader
    yield writer, reader
    writer.close()
    reader.close()


def test_filtered_vector_search_returns_k_for_every_actor(two: Any) -> None:
    writer, reader = two
    rng = np.random.default_rng(7)
    actors = {f"big{i}": 150 for i in range(8)} | {"tiny": 4}
    vectors: dict[str, tuple[list[int], np.ndarray]] = {}
    for actor, n in actors.items():
        ms = put(writer, [f"{actor} memory {j}" for j in range(n)], actor)
        v = rng.normal(size=(n, 32)).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        writer.put_vectors("m", np.array([m.label for m in ms]), v, [m.content_hash for m in ms])
        vectors[actor] = ([m.label for m in ms], v)
    lane = PgSemanticLane(reader, "tiny", Named())
    query = vectors["tiny"][1][1]
    hits = lane.search_vector(query, 10)
    assert sorted(h[0] for h in hits) == sorted(vectors["tiny"][0])  # all 4 of its own, none of the others
    found, recall = 0, 0.0
    for actor in ("big0", "big5"):
        labels, v = vectors[actor]
        for qi in range(20):
            q = v[qi] * 0.9 + rng.normal(size=32).astype(np.float32) * 0.1
            got = reader.search_vectors(actor, "m", q, 10)
            assert len(got) == 10 and {h[0] for h in got} <= set(labels)
            exact = {labels[i] for i in np.argsort(-(v @ q))[:10]}
            recall += len(exact & {h[0] for h in got}) / 10
            found += 1
    assert recall / found >= 0.9
    scores = reader.vector_scores("big0", "m", query, vectors["big0"][0][:3] + vectors["tiny"][0][:1])
    assert set(scores) == set(vectors["big0"][0][:3])  # another actor's label scores nothing
    assert scores[vectors["big0"][0][0]] == pytest.approx(float(vectors["big0"][1][0] @ query), abs=1e-5)


def test_semantic_lane_sees_another_process_vectors(two: Any) -> None:
    writer, reader = two
    embedder = HashEmbedder(64)
    lane = PgSemanticLane(reader, "a", embedder)
    lane.open()
    ms = put(writer, ["the blue whale migrates in spring", "tax forms are due in april"], "a")
    assert sorted(lane.unembedded_labels()) == [m.label for m in ms] and len(lane) == 0
    writer.put_vectors(
        embedder.name,
        np.array([m.label for m in ms]),
        embedder.embed([m.text for m in ms]),
        [m.content_hash for m in ms],
    )
    assert lane.unembedded_labels() == [] and len(lane) == 2 and ms[0].label in lane
    assert lane.search("blue whale", 1)[0][0] == ms[0].label


def test_lexical_lane_follows_another_process(two: Any) -> None:
    writer, reader = two
    lane = PgLexicalLane(reader, "a")
    old = put(writer, ["the build broke in src/app/main.py", "noise about gardening"], "a")
    put(writer, ["src/app/main.py belongs to someone else"], "b")
    lane.open()
    assert len(lane) == 2
    fresh = put(writer, ["crash at address 0xdeadbeef during deploy"], "a")[0]
    assert [h[0] for h in lane.match("0xdeadbeef")] == [fresh.label]  # caught up before answering
    assert [h[0] for h in lane.match("src/app/main.py")] == [old[0].label]
    assert lane.search_scored("main.py deploy", 5, [old[1].label])[1] == {old[1].label: 0.0}
    writer.update("a", old[1].id, text="gardening moved to the deploy runbook")
    writer.delete("a", old[0].id)
    writer.put_many([NewMemory(actor="a", type=MemoryType.FACT, text="crash at address 0xdeadbeef during deploy")])
    assert [h[0] for h in lane.match("deploy -crash")] == [old[1].label]
    assert lane.match("src/app/main.py") == [] and len(lane) == 2
    assert lane.catch_up() == 0
    lane.rebuild("purge")
    assert sorted(h[0] for h in lane.search("deploy", 5)) == sorted([old[1].label, fresh.label])
