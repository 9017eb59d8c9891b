"""The association lane on a real store: neighbours of the best candidates join the page, scored by link strength."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import mempager
from mempager import PagerConfig
from mempager.lanes.association import AssociationLane

TEXTS = [
    "The deploy failed on Friday because the migration locked the users table.",
    "Second Friday deploy failed again: the migration locked users for minutes.",
    "The payments release stalled and blocked checkout for an hour.",  # no word of the query below
    "Lunch was good.",
]
FILLER = [
    f"Note {i}: the {w} report for sprint {i} is filed." for i, w in enumerate(["budget", "hiring", "travel"] * 4)
]


def wrap(p: Any) -> list[int]:
    """One wrap whose pattern cites the first three memories (strength 1.0 links between them);
    lunch is cited on its own (wrap-level links, 0.3). Returns the labels of TEXTS."""
    uris = [p.remember("event", t) for t in TEXTS]
    for text in FILLER:
        p.remember("event", text)
    p.sync(timeout=30)
    e = {w.text: w.id for w in p.prepare_wrap().episodes}
    p.save_continuity(
        "## State\nx\n## Patterns\n"
        f'- Migrations block | 2x (2026-05-04) [evidence: {e[TEXTS[0]]} "deploy migration locked"]'
        f' [evidence: {e[TEXTS[1]]} "friday deploy migration locked"]'
        f' [evidence: {e[TEXTS[2]]} "payments release stalled"]\n'
        f'- Lunch | 1x (2026-05-04) [evidence: {e[TEXTS[3]]} "lunch good"]\n'
        "## Decisions\n-\n## Context\n-\n"
    )
    label = {m.uri: m.label for m in p.recall(limit=100)}
    return [label[u] for u in uris]


@pytest.fixture
def pager(store_path: Path) -> Iterator[Any]:
    with mempager.open(store_path, actor="neo", config=PagerConfig(embedder="hash", retrieval_top_k=3)) as p:
        yield p


def test_strong_neighbours_of_the_seeds_come_back_scored(pager: Any) -> None:
    a, b, c, lunch = wrap(pager)
    lane = pager.retriever.associations
    assert lane.search([(a, 0.8), (lunch, 0.1)], 10) == [(b, pytest.approx(0.08)), (c, pytest.approx(0.08))]
    # lunch is linked to the others only at wrap level (0.3): below the floor, so no neighbour
    assert lane.search([(lunch, 0.9)], 10) == []
    assert lane.search([(a, 0.8), (b, 0.7)], 5) == [(c, pytest.approx(0.08))]  # seeds never come back
    assert lane.search([(a, 0.0)], 5) == []  # a seed that matched nothing brings nothing
    assert AssociationLane(pager.store, "other").search([(a, 0.8)], 5) == []  # links are per actor


def test_a_forgotten_neighbour_never_comes_back_through_a_cached_link(pager: Any) -> None:
    a, b, c, _ = wrap(pager)
    lane = pager.retriever.associations
    assert [x for x, _ in lane.search([(a, 0.8)], 5)] == [b, c]  # the links are now cached
    uri_c = next(m.uri for m in pager.recall(limit=100) if m.label == c)
    pager.forget(uri_c)
    assert [x for x, _ in lane.search([(a, 0.8)], 5)] == [b]


def test_the_links_are_read_again_after_a_wrap_and_after_the_refresh_delay(store_path: Path) -> None:
    now = [0.0]
    with mempager.open(store_path, actor="neo", config=PagerConfig(embedder="hash")) as p:
        lane = AssociationLane(p.store, "neo", refresh_seconds=5.0, clock=lambda: now[0])
        assert lane.graph() == {}  # read once: no links yet
        a, b, c, _ = wrap(p)
        assert lane.graph() == {}  # still the cached read ...
        now[0] = 6.0
        assert {x for x, _ in lane.graph()[a]} == {b, c}  # ... until it is older than the delay
        # the pager's own lane was told by the wrap: no delay there
        assert {x for x, _ in p.retriever.associations.graph()[a]} == {b, c}


def test_a_linked_memory_no_other_lane_finds_joins_the_page_as_lane_association(store_path: Path) -> None:
    query = "why did the Friday deploy fail on the users migration"
    # no context keys: the payments turn would otherwise match through its neighbours' words
    on = PagerConfig(embedder="hash", retrieval_top_k=3, context_window=0)
    with mempager.open(store_path, actor="neo", config=on) as p:
        a, b, c, _ = wrap(p)
        got = p.retrieve(query)
        assert {s.label for s in got[:2]} == {a, b}  # the seeds, found by their words
        linked = next(s for s in got if s.label == c)
        assert "association" in linked.lanes and "lexical" not in linked.lanes
        report = p.page(query).report  # the page's report names the lane too
        uri_c = next(m.uri for m in p.recall(limit=100) if m.label == c)
        assert "association" in next(s for s in report.snippets if s.uri == uri_c).lanes
        assert report.lane_sizes["association"] >= 1
    with mempager.open(
        store_path, actor="neo", config=on.with_(lane_weights={**on.lane_weights, "association": 0})
    ) as p:
        assert c not in [s.label for s in p.retrieve(query)]  # without the lane, filler outranks it
