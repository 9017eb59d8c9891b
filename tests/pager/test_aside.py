"""The semantic lane searches in a helper thread beside the lexical lane: same results, failures kept."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest

import mempager
from mempager import PagerConfig
from mempager.lanes import semantic as semantic_lane
from mempager.lanes.aside import Aside

TEXTS = [
    "the deploy key lives in vault under secret/deploy",
    "Caroline went to the LGBTQ support group on Friday",
    "the staging cluster runs on three nodes in Frankfurt",
    "Melanie painted a sunrise over the lake last summer",
    "rotate the deploy key every ninety days",
    "the support group meets in the community center",
]
QUESTIONS = ["where is the deploy key", "when did Caroline go to the support group", "what did Melanie paint"]


@pytest.fixture
def pager(store_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(semantic_lane, "ASIDE_FROM", 1)  # this small index searches aside too
    p = mempager.open(store_path, actor="neo", config=PagerConfig(embedder="hash"))
    p.remember_many([{"type": "event", "text": t} for t in TEXTS * 3])
    assert p.sync(timeout=60)
    yield p
    p.close()


def _search_threads(p: Any) -> list[str]:
    """The names of the threads the semantic lane's searches run in, from now on."""
    threads: list[str] = []
    search = p.semantic.search_snapshot

    def recorded(vector: Any, k: int) -> Any:
        threads.append(threading.current_thread().name)
        return search(vector, k)

    p.semantic.search_snapshot = recorded
    return threads


def test_a_search_aside_ranks_exactly_as_one_in_line(pager: Any) -> None:
    threads = _search_threads(pager)
    retriever = pager.retriever
    now = retriever.clock()
    retriever.clock = lambda: now  # the prior's recency: the same moment for both rankings
    assert pager.semantic.searches_aside
    aside = [retriever.rank(q, 50) for q in QUESTIONS]
    assert all(name.startswith("mempager-aside") for name in threads) and len(threads) == len(QUESTIONS)
    semantic_lane.ASIDE_FROM = len(pager.semantic) + 1  # (monkeypatch restores it)
    assert not pager.semantic.searches_aside
    in_line = [retriever.rank(q, 50) for q in QUESTIONS]
    assert threads[len(QUESTIONS) :] == [threading.current_thread().name] * len(QUESTIONS)
    assert aside == in_line
    assert all(lanes["semantic"] and completions["lexical"] for lanes, completions in aside)
    # the lexical lane scored every semantic hit, found while it searched
    for lanes, completions in aside:
        assert {label for label, _ in lanes["semantic"]} <= set(completions["lexical"]) | {
            label for label, _ in lanes["lexical"]
        }


def test_a_bug_in_the_search_aside_is_raised_not_lost(pager: Any) -> None:
    def broken(vector: Any, k: int) -> Any:
        raise RuntimeError("index bug")

    pager.semantic.search_snapshot = broken
    with pytest.raises(RuntimeError, match="index bug"):
        pager.retrieve("where is the deploy key")


def test_a_failed_lexical_search_waits_for_the_search_aside_and_logs_its_failure(
    pager: Any, caplog: pytest.LogCaptureFixture
) -> None:
    release = threading.Event()

    def slow_and_broken(vector: Any, k: int) -> Any:
        release.wait(5)
        raise RuntimeError("index bug meanwhile")

    def failing(query: str, k: int, also: Any) -> Any:
        release.set()
        raise ValueError("lexical bug")

    pager.semantic.search_snapshot = slow_and_broken
    pager.lexical.search_scored = failing
    with caplog.at_level(logging.ERROR, logger="mempager"), pytest.raises(ValueError, match="lexical bug"):
        pager.retrieve("where is the deploy key")
    assert "index bug meanwhile" in caplog.text  # waited for, and not swallowed


def test_a_failing_embedder_still_degrades_to_the_other_lanes(pager: Any, caplog: pytest.LogCaptureFixture) -> None:
    def down(query: str) -> Any:
        raise mempager.EmbedderError("model server down")

    pager.semantic.embed_query = down
    with caplog.at_level(logging.WARNING, logger="mempager"):
        found = pager.retrieve("where is the deploy key")
    assert found and "deploy key" in found[0].text
    assert "semantic lane skipped for this query: model server down" in caplog.text


def test_after_close_work_runs_in_the_calling_thread() -> None:
    aside = Aside()
    assert aside.submit(lambda: threading.current_thread().name).result().startswith("mempager-aside")
    aside.close()
    assert aside.submit(lambda: threading.current_thread().name).result() == threading.current_thread().name
    assert not [t for t in threading.enumerate() if t.name.startswith("mempager-aside")]


def test_the_query_is_embedded_in_the_calling_thread(pager: Any) -> None:
    """The lexical lane waits for the search under its lock: never for an embedding service."""
    threads: list[str] = []
    embed = pager.semantic.embed_query

    def recorded(query: str) -> Any:
        threads.append(threading.current_thread().name)
        return embed(query)

    pager.semantic.embed_query = recorded
    assert pager.retrieve("where is the deploy key")
    assert threads == [threading.current_thread().name]


def test_a_small_index_searches_in_the_calling_thread(store_path: Path) -> None:
    """Below ASIDE_FROM vectors the hand-over to a helper costs more than the overlap saves."""
    with mempager.open(store_path, actor="neo", config=PagerConfig(embedder="hash")) as p:
        p.remember_many([{"type": "event", "text": t} for t in TEXTS])
        assert p.sync(timeout=60)
        threads = _search_threads(p)
        assert len(p.semantic) < semantic_lane.ASIDE_FROM and not p.semantic.searches_aside
        assert p.retrieve("where is the deploy key")
        assert threads == [threading.current_thread().name]
