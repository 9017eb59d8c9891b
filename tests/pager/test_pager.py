"""The pager end to end on the embedded default (hash embedder, exact semantic lane)."""

from __future__ import annotations

from pathlib import Path

import pytest

import mempager
from mempager import (
    EmptyText,
    InvalidActor,
    InvalidInput,
    InvalidText,
    InvalidUri,
    MemoryNotFound,
    PagerConfig,
    PatternSpec,
    TextTooLong,
    UnknownType,
)

RELEASE = PatternSpec(name="cut a release", trigger="release the service", steps=["tag", "push"])


def test_written_memory_is_retrievable_before_it_is_embedded(store_path: Path) -> None:
    cfg = PagerConfig(embedder="hash", embed_workers=1)
    with mempager.open(store_path, actor="neo", config=cfg) as p:
        p.workers.stop()  # no embedding at all: only the salience lane can see the write
        uri = p.remember_fact("The staging password rotates every Monday.")
        assert p.stats()["pending_embeddings"] == 1
        hits = p.retrieve("when does the staging password rotate?")
        assert hits and hits[0].uri == uri
        assert set(hits[0].lanes) - {"prior"} == {"salience", "lexical"}  # no vector yet, found anyway
        vague = p.retrieve("what do you know?")  # shares no word with it: salience alone
        assert [h.uri for h in vague] == [uri] and set(vague[0].lanes) == {"salience"}


def test_retrieve_fuses_lanes_dedups_and_carries_ranks(hash_pager) -> None:  # type: ignore[no-untyped-def]
    p = hash_pager
    uris = [p.remember_fact(f"Fact {i} about deploy keys and vaults.") for i in range(3)]
    p.remember_fact("The deploy key lives in vault at secret/deploy/0xdeadbeef.")
    assert p.sync(timeout=30)
    hits = p.retrieve("deploy key 0xdeadbeef", k=4)
    assert len(hits) == len({h.uri for h in hits}) == 4
    assert "0xdeadbeef" in hits[0].text
    assert all(h.lanes for h in hits)
    for h in hits:
        for name, hit in h.lanes.items():
            assert name in ("semantic", "salience", "lexical", "time", "prior") and hit.rank >= 1
    assert set(uris) <= {h.uri for h in p.retrieve("deploy keys vaults", k=8)}


def test_retrieve_respects_k_and_budget(store_path: Path) -> None:
    cfg = PagerConfig(embedder="hash", retrieval_top_k=3, retrieval_budget_tokens=60)
    with mempager.open(store_path, actor="neo", config=cfg) as p:
        for i in range(10):
            p.remember_fact(f"Memory {i}: " + "lorem ipsum dolor " * 3)
        p.sync(timeout=30)
        hits = p.retrieve("lorem ipsum")
        assert 1 <= len(hits) <= 3
        assert sum(h.tokens for h in hits) <= 60
        report = p.page("lorem ipsum").report
        assert {c.reason for c in report.cuts} <= {"budget", "top_k"}
        assert report.cuts


def test_procedural_gates_on_min_successes(hash_pager) -> None:  # type: ignore[no-untyped-def]
    p = hash_pager
    uri = p.reinforce_pattern(RELEASE)
    assert p.procedural("release the billing service") == []
    p.reinforce_pattern(RELEASE)
    assert p.reinforce_pattern(PatternSpec(name="Cut a release ", steps=["tag", "push", "verify"])) == uri
    (proven,) = p.procedural("release the billing service")
    assert proven.coverage == 3 and proven.spec.steps == ("tag", "push", "verify")
    assert p.procedural("water the plants") == []
    assert proven.spec.trigger == "release the service"  # a field the newer spec left empty is kept
    assert "Pattern: Cut a release" in p.page("how?", goal="release the billing service").render()


def test_forget_removes_from_every_lane(hash_pager) -> None:  # type: ignore[no-untyped-def]
    p = hash_pager
    uri = p.remember_fact("The canary is yellow-7731.")
    p.sync(timeout=30)
    assert any(h.uri == uri for h in p.retrieve("canary yellow-7731"))
    p.forget(uri)
    assert all(h.uri != uri for h in p.retrieve("canary yellow-7731"))
    assert p.recall("canary") == []
    assert p.stats()["vectors_indexed"] == 0
    with pytest.raises(MemoryNotFound):
        p.forget(uri)


def test_actor_isolation_through_the_pager(store_path: Path) -> None:
    cfg = PagerConfig(embedder="hash")
    with mempager.open(store_path, actor="alice", config=cfg) as a:
        secret = a.remember_fact("Alice's locker code is 4412.")
        a.remember_user_fact("Alice likes tea.")
        a.sync(timeout=30)
    with mempager.open(store_path, actor="bob", config=cfg) as b:
        b.remember_fact("Bob parks on level 2.")
        b.sync(timeout=30)
        assert all("Alice" not in s.text for s in b.retrieve("Alice locker code", k=50))
        assert "Alice" not in b.page("Alice locker code", goal="locker").render()
        assert b.recall() and all(m.actor == "bob" for m in b.recall(limit=100))
        with pytest.raises(MemoryNotFound):
            b.forget(secret)
        with pytest.raises(MemoryNotFound):
            b.get(secret)
    with mempager.open(store_path, actor="alice", config=cfg) as a:
        assert a.get(secret).text == "Alice's locker code is 4412."


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda p: p.remember_fact(""), EmptyText),
        (lambda p: p.remember_fact("   \n\t"), EmptyText),
        (lambda p: p.remember_fact("x" * 1_000_001), TextTooLong),
        (lambda p: p.remember_fact("nul\x00byte"), InvalidText),
        (lambda p: p.remember_fact("lone \ud800 surrogate"), InvalidText),
        (lambda p: p.remember("nonsense", "text"), UnknownType),
        (lambda p: p.forget("mem://neo/fact/0123456789abcdef"), MemoryNotFound),
        (lambda p: p.forget("not a uri"), InvalidUri),
        (lambda p: p.remember_many([{"type": "fact", "text": "ok"}, {"type": "fact", "text": ""}]), EmptyText),
        (lambda p: p.remember_many([{"type": "fact", "text": "ok", "bogus": 1}]), InvalidInput),
        (lambda p: p.remember("event", "x", created_at="the day after tomorrow"), InvalidInput),
        (lambda p: p.record_outcome("did it", "great"), InvalidInput),
        (lambda p: p.add_constraint("x", strength="medium"), InvalidInput),
        (lambda p: p.remember_fact("x", importance=2.0), InvalidInput),
        (lambda p: p.retrieve("q", k=0), InvalidInput),
    ],
)
def test_bad_input_is_a_typed_error_and_the_store_is_unchanged(hash_pager, call, error) -> None:  # type: ignore[no-untyped-def]
    p = hash_pager
    p.remember_fact("keep me")
    before = [(m.uri, m.text, m.strength) for m in p.recall(limit=100)]
    with pytest.raises(error) as info:
        call(p)
    assert isinstance(info.value, mempager.PagerError)
    assert len(str(info.value)) > 20  # says what to do, not just what failed
    assert [(m.uri, m.text, m.strength) for m in p.recall(limit=100)] == before


def test_bad_actor_is_refused(store_path: Path) -> None:
    for actor in ["", "../x", "/abs", "a/b", "x" * 200, "nul\x00"]:
        with pytest.raises(InvalidActor):
            mempager.open(store_path, actor=actor, config=PagerConfig(embedder="hash"))


def test_remember_many_accepts_human_times_and_tags(hash_pager) -> None:  # type: ignore[no-untyped-def]
    p = hash_pager
    uris = p.remember_many(
        [
            {"type": "event", "text": "Met Ana", "created_at": "1:56 pm on 8 May, 2023", "tags": ["ana"]},
            {"type": "event", "text": "Met Bo", "created_at": "2023-05-09T10:00:00Z"},
        ]
    )
    got = [p.get(u) for u in uris]
    assert got[0].created_at.isoformat() == "2023-05-08T13:56:00+00:00"
    assert got[0].tags == ("ana",)
    assert [m.uri for m in p.recall(types=["event"])] == [uris[1], uris[0]]
    assert [m.uri for m in p.recall(since="2023-05-09")] == [uris[1]]
    assert [m.uri for m in p.recall("ana")] == [uris[0]]


def test_reopen_sees_everything_and_embeds_what_was_pending(store_path: Path) -> None:
    cfg = PagerConfig(embedder="hash")
    with mempager.open(store_path, actor="neo", config=cfg) as p:
        p.workers.stop()
        uris = p.remember_many([{"type": "fact", "text": f"fact {i}"} for i in range(100)])
    with mempager.open(store_path, actor="neo", config=cfg) as p:
        assert p.sync(timeout=30)
        stats = p.stats()
        assert stats["memories"] == 100 and stats["vectors_indexed"] == 100
        assert stats["pending_embeddings"] == 0
        assert {p.get(u).uri for u in uris} == set(uris)


def test_page_report_explains_cuts(hash_pager) -> None:  # type: ignore[no-untyped-def]
    p = hash_pager
    p.remember_user_fact("The user is Ana.")
    p.set_goal("ship it")
    for i in range(12):
        p.remember_fact(f"Shipping note {i}.")
    p.sync(timeout=30)
    page = p.page("shipping notes", goal="ship it")
    reasons = {c.reason for c in page.report.cuts}
    assert "pinned" in reasons and "top_k" in reasons
    table = page.report.table()
    assert "CUT" in table and "pinned" in table
    assert page.report.to_dict()["total_tokens"] == page.report.total_tokens
    assert page.render().count("ship it") == 1  # pinned goal not repeated as a snippet


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("hnsw_m", 1),
        ("hnsw_m", 16.0),
        ("hnsw_ef_construction", 0),
        ("hnsw_ef", -3),
        ("hnsw_ef", True),
        ("hnsw_ef_per_million", -1),
        ("hnsw_ef_per_million", 1.5),
        ("hnsw_ef_per_million", "auto"),
        ("hnsw_ef", 0),
        ("hnsw_ef", "auto"),
        ("hnsw_max_deleted_share", 0.0),
        ("hnsw_max_deleted_share", 1.5),
        ("hnsw_max_deleted_share", "0.2"),
        ("embed_max_attempts", 0),
        ("embed_backoff_seconds", 0),
        ("embed_backoff_seconds", float("nan")),
        ("embed_max_backoff_seconds", float("inf")),
    ],
)
def test_hnsw_and_retry_settings_are_validated_quoting_the_bad_value(field: str, bad: object) -> None:
    with pytest.raises(mempager.ConfigError, match=field) as caught:
        PagerConfig(**{field: bad})  # type: ignore[arg-type]
    assert repr(bad) in str(caught.value)


def test_a_backoff_cap_below_the_first_backoff_is_refused() -> None:
    message = r"embed_max_backoff_seconds \(0\.5\) must be >= embed_backoff_seconds \(2\.0\)"
    with pytest.raises(mempager.ConfigError, match=message):
        PagerConfig(embed_backoff_seconds=2.0, embed_max_backoff_seconds=0.5)


def test_hnsw_and_retry_settings_reach_the_lane_and_the_workers(store_path: Path) -> None:
    default = PagerConfig()
    assert (default.hnsw_m, default.hnsw_ef_construction, default.hnsw_ef, default.hnsw_max_deleted_share) == (
        32,
        200,
        None,  # as measured for the graph's M
        0.2,
    )
    cfg = PagerConfig(
        embedder="hash",
        hnsw_m=8,
        hnsw_ef_construction=40,
        hnsw_ef=77,
        hnsw_max_deleted_share=0.5,
        hnsw_ef_per_million=5_000_000,
        embed_max_attempts=2,
        embed_backoff_seconds=0.5,
        embed_max_backoff_seconds=4.0,
    )
    with mempager.open(store_path, actor="neo", config=cfg) as p:
        p.remember_many([{"type": "fact", "text": f"fact {i}"} for i in range(20)])
        assert p.sync(timeout=30)
        index = p.semantic.index
        assert (index.M, index.ef_construction, index.ef) == (8, 40, 77)
        assert (index.ef_per_million, index.search_ef) == (5_000_000, 100)  # 5 per live vector
        assert (p.workers.max_attempts, p.workers.backoff, p.workers.max_backoff) == (2, 0.5, 4.0)
        uris = p.recall(limit=20)
        for memory in uris[:9]:  # 45% deleted: under the configured 50%, so no rebuild yet
            p.forget(memory.uri, hard=False)
        assert index.deleted_share() == pytest.approx(9 / 20) and p.semantic.index is index
        p.forget(uris[9].uri, hard=False)
        p.forget(uris[10].uri, hard=False)  # 11 of 20 > 50%: rebuilt, tombstones gone
        assert p.semantic.index.deleted_share() == 0.0 and len(p.semantic) == 9


def test_float_settings_are_read_from_the_environment() -> None:
    cfg = PagerConfig.from_env(
        {
            "MEMPAGER_HNSW_EF": "200",
            "MEMPAGER_EMBED_MAX_BACKOFF_SECONDS": "2.5",
            "MEMPAGER_HNSW_MAX_DELETED_SHARE": "0.3",
        }
    )
    assert (cfg.hnsw_ef, cfg.embed_max_backoff_seconds, cfg.hnsw_max_deleted_share) == (200, 2.5, 0.3)
    with pytest.raises(mempager.ConfigError, match="MEMPAGER_EMBED_BACKOFF_SECONDS must be a number, got 'soon'"):
        PagerConfig.from_env({"MEMPAGER_EMBED_BACKOFF_SECONDS": "soon"})


def test_the_search_width_per_million_is_read_from_the_environment_or_left_to_the_graph() -> None:
    assert PagerConfig().hnsw_ef_per_million is None
    assert PagerConfig.from_env({"MEMPAGER_HNSW_EF_PER_MILLION": "900"}).hnsw_ef_per_million == 900
    assert PagerConfig.from_env({"MEMPAGER_HNSW_EF_PER_MILLION": "auto"}).hnsw_ef_per_million is None
    assert PagerConfig.from_env({"MEMPAGER_HNSW_EF_PER_MILLION": "0"}).hnsw_ef_per_million == 0
    assert PagerConfig.from_env({"MEMPAGER_HNSW_EF": "auto"}).hnsw_ef is None
    with pytest.raises(mempager.ConfigError, match="MEMPAGER_HNSW_EF_PER_MILLION must be an integer or 'auto'"):
        PagerConfig.from_env({"MEMPAGER_HNSW_EF_PER_MILLION": "wide"})


def test_a_saved_graph_of_another_m_is_served_not_rebuilt_at_open(store_path: Path) -> None:
    """Changing hnsw_m (or its default) does not rebuild a saved graph at open: it keeps its own M
    and searches with the width measured for that M; a rebuild then takes the configured M."""
    old = PagerConfig(embedder="hash", hnsw_m=16)
    with mempager.open(store_path, actor="neo", config=old) as p:
        p.remember_many([{"type": "fact", "text": f"fact number {i}"} for i in range(40)])
        assert p.sync(timeout=30)
        before = [m.uri for m in p.retrieve("fact number 7")]
    with mempager.open(store_path, actor="neo", config=PagerConfig(embedder="hash")) as p:
        assert p.semantic.opened_how.startswith("loaded")
        index = p.semantic.index
        assert (index.M, index.ef, index.ef_per_million, index.search_ef) == (16, 128, 600, 128)
        assert [m.uri for m in p.retrieve("fact number 7")] == before
        index.rebuild()
        assert (index.M, index.ef, index.ef_per_million, index.search_ef) == (32, 96, 240, 96)


def test_a_write_that_notifies_before_the_worker_waits_is_not_slept_through(hash_pager) -> None:  # type: ignore[no-untyped-def]
    from mempager.maintenance.workers import EmbedWorkers

    assert hash_pager.sync(timeout=60)
    workers = EmbedWorkers(hash_pager.semantic, workers=0)  # no threads: _idle is driven by hand
    waits: list[float | None] = []
    workers._wake.wait = lambda timeout=None: waits.append(timeout) or True  # type: ignore[method-assign]
    with workers._wake:
        seen = workers._notified  # the worker looked at the queue: nothing pending
    workers.notify()  # a write lands before the worker goes to sleep
    workers._idle(seen)
    assert waits == []  # it looks again at once instead of sleeping its idle poll
    with workers._wake:
        seen = workers._notified
    workers._idle(seen)  # nothing new: it sleeps until notified or the safety poll
    assert waits == [10.0]


def test_idle_workers_do_not_ask_the_store_while_the_lane_lacks_no_vector(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from mempager.store.duckdb import DuckDBStore

    asked: list[int] = []
    pending = DuckDBStore.pending

    def counted(self: DuckDBStore, actor: str, model: str, limit: int):  # type: ignore[no-untyped-def]
        asked.append(limit)
        return pending(self, actor, model, limit)

    monkeypatch.setattr(DuckDBStore, "pending", counted)
    cfg = PagerConfig(embedder="hash")
    with mempager.open(store_path, actor="neo", config=cfg) as p:
        p.remember_many([{"type": "fact", "text": f"fact number {i}"} for i in range(20)])
        assert p.sync(timeout=60)
    asked.clear()
    with mempager.open(store_path, actor="neo", config=cfg) as p:  # everything embedded: the hint is 0
        assert p.semantic.pending_hint() == 0
        threading.Event().wait(0.5)  # the workers' first look, then idle
        assert asked == []
        uri = p.remember_fact("a new fact wakes the workers")
        assert p.sync(timeout=60)
        assert asked  # they asked the store for it, and embedded it
        assert p.retrieve("new fact wakes")[0].uri == uri
        assert p.semantic.pending_hint() == 0


def test_workers_and_deferred_loading_settings(store_path: Path) -> None:
    assert PagerConfig(embed_workers=0).embed_workers == 0
    with pytest.raises(mempager.ConfigError, match="embed_workers must be an integer >= 0, got -1"):
        PagerConfig(embed_workers=-1)
    env = {"MEMPAGER_DEFER_MODEL_LOAD": "yes", "MEMPAGER_EMBED_WORKERS": "0"}
    cfg = PagerConfig.from_env(env)
    assert cfg.defer_model_load is True and cfg.embed_workers == 0
    assert PagerConfig.from_env({"MEMPAGER_DEFER_MODEL_LOAD": "off"}).defer_model_load is False
    with pytest.raises(mempager.ConfigError, match="MEMPAGER_DEFER_MODEL_LOAD must be 1/true/yes/on or 0/false/no/off"):
        PagerConfig.from_env({"MEMPAGER_DEFER_MODEL_LOAD": "maybe"})
    with mempager.open(store_path, actor="neo", config=PagerConfig(embedder="hash", embed_workers=0)) as p:
        p.remember_fact("nothing embeds in this process")
        with pytest.raises(mempager.InvalidInput, match="embed_workers=0"):
            p.reembed(timeout=1)
        assert p.sync() is False  # answers at once: nothing here would ever embed it
        assert [s.uri for s in p.retrieve("embeds")] == [p.recall("embeds")[0].uri]  # lexical still finds it


def test_history_lists_one_memorys_audit_events_and_outlives_a_forget(store_path: Path) -> None:
    with mempager.open(store_path, actor="neo", config=PagerConfig(embedder="hash")) as p:
        uri = p.remember_fact("the deploy key lives in vault")
        other = p.remember_fact("an unrelated fact")
        p.remember_fact("the deploy key lives in vault")  # a repeat reinforces it
        p.update(uri, text="the deploy key lives in vault at secret/deploy")
        assert [e.op for e in p.history(uri)] == ["remember", "reinforce", "update"]
        assert [e.op for e in p.history(other)] == ["remember"]
        p.forget(uri)
        events = p.history(uri)
        assert [e.op for e in events] == ["remember", "reinforce", "update", "forget"]
        assert all("vault" not in repr(e) for e in events)  # hashes, never the words
        with pytest.raises(MemoryNotFound):
            p.history(uri.replace("mem://neo/", "mem://eve/"))
