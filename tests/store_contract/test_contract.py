"""The store contract, memories and reads: every test runs on DuckDB and on PostgreSQL.

Vectors and the embedding queue: test_contract_vectors.py; journal, audit, listeners,
compaction: test_contract_journal.py.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mempager.config import PagerConfig
from mempager.errors import InvalidInput, MemoryNotFound, StoreError
from mempager.lanes.salience import params_from_config, salience_score
from mempager.store.duckdb import dedup_key_of
from mempager.types import MemoryType, NewMemory, Scope, Source

# PostgreSQL text cannot hold NUL; the pager rejects it in memory text, and tags must not carry it either.
_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
text_st = st.text(alphabet=_CHARS, min_size=1, max_size=200).filter(str.strip)
meta_st = st.dictionaries(
    st.text(max_size=10),
    st.recursive(
        st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
        max_leaves=8,
    ),
    max_size=4,
)
time_st = st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(timezone.utc))


def fact(text: str, actor: str = "a", **kw: Any) -> NewMemory:
    return NewMemory(actor=actor, type=kw.pop("type", MemoryType.FACT), text=text, **kw)


def params(now: datetime | None = None) -> Any:
    return params_from_config(PagerConfig(), now or datetime.now(timezone.utc))


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(
    text=text_st,
    mtype=st.sampled_from(list(MemoryType)),
    source=st.sampled_from(list(Source)),
    scope=st.sampled_from(list(Scope)),
    conf=st.floats(0, 1),
    imp=st.floats(0, 1),
    stren=st.floats(0, 1),
    created=time_st,
    tags=st.lists(st.text(alphabet=_CHARS, min_size=1, max_size=10), max_size=4).map(tuple),
    meta=meta_st,
)
def test_memory_round_trips(
    store: Any,
    text: str,
    mtype: MemoryType,
    source: Source,
    scope: Scope,
    conf: float,
    imp: float,
    stren: float,
    created: datetime,
    tags: tuple[str, ...],
    meta: dict[str, Any],
) -> None:
    item = NewMemory(
        actor="a1",
        type=mtype,
        text=text,
        source=source,
        scope=scope,
        confidence=conf,
        importance=imp,
        strength=stren,
        created_at=created,
        tags=tags,
        metadata=meta,
    )
    result = store.put(item)
    got = store.get("a1", result.memory.id)
    assert got == result.memory
    assert store.get_many("a1", [got.label]) == {got.label: got}
    if result.created:
        assert (got.text, got.type, got.source, got.scope, got.tags, dict(got.metadata)) == (
            text,
            mtype,
            source,
            scope,
            tags,
            meta,
        )
        assert got.created_at == created and got.created_at.tzinfo is not None
        assert (got.confidence, got.importance, got.strength) == (conf, imp, stren)
    assert got.uri == f"mem://a1/{mtype.value}/{got.id}"


def test_naive_times_are_utc(store: Any) -> None:
    got = store.put(fact("naive", created_at=datetime(2023, 5, 8, 13, 56))).memory
    assert got.created_at == datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)


def test_dedup_returns_existing_uri_and_reinforces(store: Any) -> None:
    first = store.put(fact("The sky is blue."))
    again = store.put(fact("  the SKY is   blue ", importance=0.9))
    assert first.created and not again.created
    assert again.memory.uri == first.memory.uri
    assert again.memory.strength == pytest.approx(0.5 + 0.1 * 0.5)
    assert again.memory.importance == 0.9 and again.memory.access_count == 1
    assert store.counts("a") == {"fact": 1}
    assert store.put(fact("The sky is blue.", type=MemoryType.BELIEF)).created
    assert store.put(fact("The sky is blue.", actor="b")).created
    key = dedup_key_of(fact("The sky is blue."))
    assert store.find("a", MemoryType.FACT, key) == store.get("a", first.memory.id)
    assert store.find("c", MemoryType.FACT, key) is None


def test_events_at_different_times_are_distinct(store: Any) -> None:
    t1, t2 = datetime(2023, 5, 8, tzinfo=timezone.utc), datetime(2023, 6, 1, tzinfo=timezone.utc)
    a = store.put(fact("Thanks!", type=MemoryType.EVENT, created_at=t1))
    b = store.put(fact("Thanks!", type=MemoryType.EVENT, created_at=t2))
    c = store.put(fact("thanks", type=MemoryType.EVENT, created_at=t1))
    assert a.created and b.created and not c.created


def test_put_many_dedups_within_and_across_batches(store: Any) -> None:
    items = [fact(f"fact {i % 50}") for i in range(200)]
    results = store.put_many(items)
    assert sum(r.created for r in results) == 50
    assert len({r.memory.uri for r in results}) == 50
    assert [r.created for r in results[:50]] == [True] * 50  # the first occurrence creates
    # each text came 4 times: created once, reinforced three times (the results show the final row)
    assert {r.memory.access_count for r in results} == {3}
    assert results[0].memory.strength == pytest.approx(1 - 0.5 * 0.9**3)
    assert results[0].memory == store.get("a", results[0].memory.id)
    again = store.put_many(items[:10] + [fact("new")])
    assert [r.created for r in again] == [False] * 10 + [True]
    assert store.counts("a") == {"fact": 51}
    labels = [r.memory.label for r in results[:50]]
    assert labels == sorted(labels)  # labels follow the order of the batch
    assert store.put_many([]) == []


def test_put_many_is_all_or_nothing(store: Any) -> None:
    store.put(fact("before"))
    bad = [fact("one"), fact("two"), fact("three", metadata={"x": object()})]
    with pytest.raises(TypeError):
        store.put_many(bad)
    assert [m.text for m in store.query("a", limit=10)] == ["before"]
    assert store.put_many([fact("one"), fact("two")])[1].created  # the store still works


def test_actor_isolation_in_every_read(store: Any) -> None:
    a = store.put(fact("alice secret", actor="alice")).memory
    b = store.put(fact("bob secret", actor="bob")).memory
    assert store.get("bob", a.id) is None
    assert store.get_many("bob", [a.label, b.label]) == {b.label: b}
    assert store.uris("bob", [a.label, b.label]) == {b.label: b.uri}
    assert [m.text for m in store.query("bob", limit=100)] == ["bob secret"]
    assert [m.label for m in store.query("bob", labels=[a.label, b.label])] == [b.label]
    assert [m.text for m in store.of_types("bob", list(MemoryType))] == ["bob secret"]
    assert store.live_labels("bob").tolist() == [b.label]
    assert store.content_hashes("bob") == {b.label: b.content_hash}
    assert store.texts_since("bob", 0) == ([b.label], ["bob secret"])
    assert store.counts("bob") == {"fact": 1} and store.counts("carol") == {}
    assert store.find("bob", MemoryType.FACT, dedup_key_of(fact("alice secret"))) is None
    assert [lab for lab, _ in store.salience("bob", list(MemoryType), params(), 100)] == [b.label]
    assert store.salience("bob", list(MemoryType), params(), 100, only=[a.label]) == []
    assert store.delete("bob", a.id) is None and store.delete_many("bob", [a.id]) == []
    with pytest.raises(MemoryNotFound):
        store.update("bob", a.id, importance=1.0)
    store.touch("bob", [a.label], datetime.now(timezone.utc))
    assert store.get("alice", a.id) == a  # untouched by everything bob did


def test_update_fields_and_text(store: Any) -> None:
    m = store.put(fact("old words", tags=("x",))).memory
    until = datetime(2030, 1, 1, tzinfo=timezone.utc)
    got = store.update(
        "a",
        m.id,
        importance=0.9,
        tags=["y", "z"],
        metadata={"k": [1, 2]},
        valid_until=until,
        superseded_by="mem://a/fact/0123456789abcdef",
        source=Source.USER,
    )
    assert (got.importance, got.tags, dict(got.metadata), got.valid_until, got.source) == (
        0.9,
        ("y", "z"),
        {"k": [1, 2]},
        until,
        Source.USER,
    )
    assert got.text == "old words" and got.content_hash == m.content_hash and got.updated_at >= m.updated_at
    rev = store.max_rev("a")
    reworded = store.update("a", m.id, text="new words", superseded_by=None)
    assert reworded.text == "new words" and reworded.content_hash != m.content_hash
    assert reworded.superseded_by is None and store.get("a", m.id) == reworded
    assert store.max_rev("a") > rev and store.texts_since("a", rev) == ([m.label], ["new words"])
    with pytest.raises(InvalidInput, match="cannot update"):
        store.update("a", m.id, label=5)
    with pytest.raises(MemoryNotFound):
        store.update("a", "0" * 16, importance=0.1)


def test_delete_and_delete_many(store: Any) -> None:
    ms = [r.memory for r in store.put_many([fact(f"m{i}") for i in range(5)])]
    assert store.delete("a", ms[0].id) == ms[0]
    assert store.delete("a", ms[0].id) is None
    gone = store.delete_many("a", [ms[3].id, "f" * 16, ms[1].id])
    assert [m.label for m in gone] == [ms[1].label, ms[3].label]
    assert sorted(store.live_labels("a").tolist()) == [ms[2].label, ms[4].label]
    assert store.get_many("a", [m.label for m in ms]).keys() == {ms[2].label, ms[4].label}
    assert store.delete_many("a", []) == []


def test_query_filters_and_orders(store: Any) -> None:
    base = datetime(2024, 1, 1, tzinfo=timezone.utc)
    made = [
        store.put(
            NewMemory(
                actor="a",
                type=t,
                text=f"{t.value} {i}",
                created_at=base + timedelta(days=i),
                source=s,
                tags=tags,
                strength=stren,
            )
        ).memory
        for i, (t, s, tags, stren) in enumerate(
            [
                (MemoryType.FACT, Source.USER, ("x",), 0.2),
                (MemoryType.EVENT, Source.OBSERVED, ("x", "y"), 0.9),
                (MemoryType.FACT, Source.LLM, ("y",), 0.5),
                (MemoryType.GOAL, Source.USER, (), 0.7),
            ]
        )
    ]
    texts = lambda **kw: [m.text for m in store.query("a", **kw)]  # noqa: E731
    assert texts() == ["goal 3", "fact 2", "event 1", "fact 0"]
    assert texts(order="oldest") == ["fact 0", "event 1", "fact 2", "goal 3"]
    assert texts(order="strongest") == ["event 1", "goal 3", "fact 2", "fact 0"]
    assert texts(types=[MemoryType.FACT]) == ["fact 2", "fact 0"]
    assert texts(since=base + timedelta(days=1), until=base + timedelta(days=3)) == ["fact 2", "event 1"]
    assert texts(sources=[Source.USER]) == ["goal 3", "fact 0"]
    assert texts(tags=["x"]) == ["event 1", "fact 0"] and texts(tags=["x", "y"]) == ["event 1"]
    assert texts(labels=[made[0].label, made[3].label]) == ["goal 3", "fact 0"]
    assert texts(labels=[]) == []
    assert texts(limit=2, offset=1) == ["fact 2", "event 1"]
    with pytest.raises(InvalidInput):
        store.query("a", order="random")


def test_of_types_order_and_limit(store: Any) -> None:
    base = datetime(2024, 1, 1, tzinfo=timezone.utc)
    for i, t in enumerate([MemoryType.RULE, MemoryType.RULE, MemoryType.GOAL, MemoryType.RULE]):
        store.put(NewMemory(actor="a", type=t, text=f"{t.value} {i}", created_at=base + timedelta(hours=i % 2)))
    rules = lambda order, limit=10: [m.text for m in store.of_types("a", [MemoryType.RULE], order, limit)]  # noqa: E731
    assert rules("oldest") == ["rule 0", "rule 1", "rule 3"]  # same time: label order
    assert rules("newest") == ["rule 3", "rule 1", "rule 0"]
    assert rules("newest", 1) == ["rule 3"]
    assert store.of_types("a", []) == []
    with pytest.raises(InvalidInput):
        store.of_types("a", [MemoryType.RULE], "strongest")


def test_salience_matches_the_reference(store: Any) -> None:
    now = datetime(2025, 6, 1, tzinfo=timezone.utc)
    p = params(now)
    types = [MemoryType.FACT, MemoryType.EVENT, MemoryType.PATTERN, MemoryType.PREFERENCE, MemoryType.GOAL]
    made = []
    for i in range(30):
        t = list(MemoryType)[i % len(MemoryType)]
        made.append(
            store.put(
                NewMemory(
                    actor="a",
                    type=t,
                    text=f"memory {i}",
                    importance=(i % 7) / 7,
                    confidence=(i % 5) / 5,
                    strength=(i % 3) / 3,
                    created_at=now - timedelta(days=i * 13.7, seconds=i),
                )
            ).memory
        )
    store.touch("a", [m.label for m in made[::4]], now)
    store.touch("a", [m.label for m in made[::8]], now)
    store.update("a", made[1].id, superseded_by=made[2].uri)
    store.update("a", made[2].id, valid_until=now - timedelta(seconds=1))
    store.update("a", made[3].id, valid_until=now + timedelta(days=1))
    current = [
        m
        for m in (store.get("a", x.id) for x in made)
        if m.type in types and m.superseded_by is None and (m.valid_until is None or m.valid_until > now)
    ]
    expected = sorted(((m.label, salience_score(m, p).total) for m in current), key=lambda x: (-x[1], -x[0]))
    got = store.salience("a", types, p, 100)
    assert [lab for lab, _ in got] == [lab for lab, _ in expected]
    assert [s for _, s in got] == pytest.approx([s for _, s in expected], rel=1e-12, abs=1e-15)
    assert store.salience("a", types, p, 3) == got[:3]
    some = [m.label for m in made[:12]]
    assert store.salience("a", types, p, 100, only=some) == [x for x in got if x[0] in some]
    assert store.salience("a", types, p, 100, only=[]) == []


def test_touch_counts_access(store: Any) -> None:
    m = store.put(fact("touched")).memory
    when = datetime(2030, 1, 1, tzinfo=timezone.utc)
    store.touch("a", [m.label, m.label + 1000], when)
    store.touch("a", [], when)
    got = store.get("a", m.id)
    assert got.access_count == 1 and got.last_accessed_at == when


def test_labels_and_hashes(store: Any) -> None:
    ms = [r.memory for r in store.put_many([fact(f"x{i}") for i in range(4)])]
    assert sorted(store.live_labels("a").tolist()) == [m.label for m in ms]
    assert store.live_labels("a").dtype == np.int64
    assert store.content_hashes("a") == {m.label: m.content_hash for m in ms}
    assert store.uris("a", [ms[1].label, 10**9]) == {ms[1].label: ms[1].uri} and store.uris("a", []) == {}
    labels, texts = store.texts_since("a", 0)
    assert labels == [m.label for m in ms] and texts == [m.text for m in ms]
    rev = store.max_rev("a")
    store.update("a", ms[0].id, importance=0.1)  # not a new text: the revision stays
    assert store.max_rev("a") == rev and store.texts_since("a", rev) == ([], [])


def test_closed_store_refuses(open_store: Callable[[], Any]) -> None:
    store = open_store()
    store.put(fact("x"))
    store.close()
    assert store.closed
    with pytest.raises(StoreError, match="closed"):
        store.query("a")
    reopened = open_store()
    assert [m.text for m in reopened.query("a")] == ["x"]
