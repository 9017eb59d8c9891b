"""The reads a page fault makes on PostgreSQL: values written into the statements stay values, and
each statement is planned once, not at every call (what made ``retrieve`` slow at 100k memories)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from mempager.store.pg import open_pg_store
from mempager.store.pg.lanes import PgLexicalLane
from mempager.store.pg.rows import MEMORY_COLUMNS, row_to_memory
from mempager.types import MemoryType, NewMemory

# Quotes, backslashes and psycopg's own placeholder syntax: an actor or model named like this must
# be matched as written, never read as SQL or as a parameter.
AWKWARD = ["a%sb", "50%", "o'neil", "back\\slash", "%(q)b"]


def put(store: Any, texts: list[str], actor: str) -> list[Any]:
    return [r.memory for r in store.put_many([NewMemory(actor=actor, type=MemoryType.FACT, text=t) for t in texts])]


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.normal(size=(n, 16)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture
def store(pg_url: str) -> Any:
    s = open_pg_store(pg_url, pool_min=1, pool_max=1)  # one connection: its prepared statements are ours to see
    yield s
    s.close()


def test_awkward_actor_and_model_names_are_values(store: Any) -> None:
    rng = np.random.default_rng(3)
    mine: dict[str, list[int]] = {}
    for actor in [*AWKWARD, "plain"]:
        ms = put(store, [f"{actor} remembers item {i}" for i in range(3)], actor)
        store.put_vectors(AWKWARD[0], np.array([m.label for m in ms]), unit(rng, 3), [m.content_hash for m in ms])
        mine[actor] = [m.label for m in ms]
    query = unit(rng, 1)[0]
    for actor in [*AWKWARD, "plain"]:
        hits = store.search_vectors(actor, AWKWARD[0], query, 10)
        assert sorted(h[0] for h in hits) == sorted(mine[actor])  # its own three, nobody else's
        assert [h[1] for h in hits] == sorted((h[1] for h in hits), reverse=True)
        lane = PgLexicalLane(store, actor)
        lane.open()
        fresh = put(store, [f"later note {actor} zebra"], actor)[0]
        assert [h[0] for h in lane.match("zebra")] == [fresh.label]  # caught up through the audit trail
        assert store.text_changes(actor, lane.seq) == []


def test_search_and_catch_up_are_planned_once(store: Any) -> None:
    rng = np.random.default_rng(5)
    ms = put(store, [f"memory number {i} about owls" for i in range(40)], "neo")
    store.put_vectors("m", np.array([m.label for m in ms]), unit(rng, 40), [m.content_hash for m in ms])
    lane = PgLexicalLane(store, "neo")
    lane.open()
    for q in unit(rng, 20):
        assert len(store.search_vectors("neo", "m", q, 10)) == 10
        assert lane.search("owls", 5)
    plans = {
        statement.split(" FROM ")[1].split()[0]: (int(generic), int(custom))
        for generic, custom, statement in store._db.rows(
            "SELECT generic_plans, custom_plans, statement FROM pg_prepared_statements"
        )
        if "vectors WHERE model" in statement or "audit a" in statement
    }
    # the search: a custom plan for the first five calls (PostgreSQL's rule for a statement with a
    # parameter, the query vector here), then the generic one; the catch-up has no parameter at all
    generic, custom = plans["vectors"]
    assert custom <= 5 and generic >= 20 - 6 - 5  # psycopg prepares a statement at its 5th or 6th call
    generic, custom = plans["audit"]
    assert custom == 0 and generic >= 1


def test_a_changed_position_is_a_new_statement(store: Any) -> None:
    """The catch-up's position is written into its statement: each new position reads afresh."""
    lane = PgLexicalLane(store, "neo")
    lane.open()
    for i in range(8):
        fresh = put(store, [f"entry {i} mentions quokka{i}"], "neo")[0]
        assert [h[0] for h in lane.match(f"quokka{i}")] == [fresh.label]
        assert lane.catch_up() == 0


def test_row_decoding_shortcuts_change_nothing(store: Any) -> None:
    put(store, ["plain memory"], "neo")
    store.put(NewMemory(actor="neo", type=MemoryType.EVENT, text="with metadata", metadata={"k": [1, "v"]}))
    rows = store._db.rows(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE actor = 'neo' ORDER BY label")
    plain, rich = (row_to_memory(r) for r in rows)
    assert plain.metadata == {} and rich.metadata == {"k": [1, "v"]}
    assert row_to_memory(rows[0]).metadata is not plain.metadata  # a fresh dict each time: callers may keep it
    assert plain.type is MemoryType.FACT and rich.type is MemoryType.EVENT
    broken = list(rows[0])
    broken[4] = "no-such-type"
    with pytest.raises(ValueError):
        row_to_memory(broken)
    assert json.loads(rows[1][15]) == {"k": [1, "v"]}


def test_a_drained_queue_is_vacuumed(store: Any) -> None:
    """Every retrieve reads the embedding queue: the dead rows of a bulk load must not outlive it."""
    store._vectors._analyzed_rows = 10**9  # keep the every-fifth-of-growth ANALYZE (and its vacuum) out of it
    rng = np.random.default_rng(9)

    def queue_bytes() -> int:
        return int(store._db.rows("SELECT pg_relation_size('embed_queue')")[0][0])

    ms = put(store, [f"bulk memory {i}" for i in range(1300)], "neo")
    first, rest = ms[0], ms[1:]
    for lo in range(0, len(rest), 400):  # as the embedding workers store them, batch by batch
        part = rest[lo : lo + 400]
        store.put_vectors("m", np.array([m.label for m in part]), unit(rng, len(part)), [m.content_hash for m in part])
    assert store.queued_labels("neo", "m") == [first.label] and queue_bytes() > 0  # not drained: left to autovacuum
    store.put_vectors("m", np.array([first.label]), unit(rng, 1), [first.content_hash])
    assert store.queued_labels("neo", "m") == [] and queue_bytes() == 0  # drained: vacuumed, its pages gone
