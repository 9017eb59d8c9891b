"""The retrieve timeline benchmark's own plumbing (benchmarks/bench_retrieve_timeline.py): its stamps
must cover each stage of a real retrieve, change no answer, and leave the pager as it found it."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

import mempager
from benchmarks.bench_retrieve_timeline import STAGES, Stamps, table, wrapped
from mempager import PagerConfig
from mempager.index import lexical_search
from mempager.lanes import semantic as semantic_lane

TEXTS = [
    "the deploy key lives in vault under secret/deploy",
    "Caroline: I went to the LGBTQ support group on Friday",
    "the staging cluster runs on three nodes in Frankfurt",
    "Melanie: I painted a sunrise over the lake last summer",
    "rotate the deploy key every ninety days",
    "the support group meets in the community center",
]
QUESTIONS = ["where is the deploy key", "when did Caroline go to the support group", "what did Melanie paint"]


def _answers(p: Any) -> list[list[tuple[str, float]]]:
    return [[(s.uri, s.score) for s in p.retrieve(q)] for q in QUESTIONS]


@pytest.fixture
def pager(store_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(semantic_lane, "ASIDE_FROM", 1)  # this small index searches in the helper, as a large one
    p = mempager.open(store_path, actor="neo", config=PagerConfig(embedder="hash"))
    p.remember_many([{"type": "event", "text": t} for t in TEXTS * 3])
    assert p.sync(timeout=60)
    now = datetime.now(timezone.utc)
    p.retriever.clock = lambda: now  # recency moves with the clock: answers compared across calls must not
    yield p
    p.close()


def test_stamps_cover_every_stage_and_change_no_answer(pager: Any) -> None:
    plain = _answers(pager)
    stamps = Stamps()
    stamped = []
    with wrapped(pager, stamps):
        for q in QUESTIONS:
            with stamps.retrieve():
                stamped.append([(s.uri, s.score) for s in pager.retrieve(q)])
    assert stamped == plain
    assert len(stamps.rows) == len(QUESTIONS) == len(stamps.totals)
    for row, total in zip(stamps.rows, stamps.totals, strict=True):
        assert {"semantic", "lexical", "wait", "fill", "fuse", "select"} <= set(row)
        assert set(row) <= {key for key, _, _ in STAGES}
        for start, end in row.values():
            assert 0.0 <= start <= end <= total
        assert row["lexical"][0] <= row["wait"][0] <= row["wait"][1] <= row["lexical"][1]  # the wait is inside
        assert row["semantic"][1] <= row["wait"][1] + 1e-3  # the caller waited for the helper's hits
        assert row["lexical"][1] <= row["fill"][0] <= row["fuse"][0] <= row["select"][0]


def test_the_pager_is_left_as_it_was(pager: Any) -> None:
    r = pager.retriever
    graph, resolve = r.semantic.index._state.graph, lexical_search.resolve
    before = _answers(pager)
    with wrapped(pager, Stamps()):
        assert "fuse" in vars(r) and lexical_search.resolve is not resolve
    assert not {"fuse", "select"} & set(vars(r)) and "fill" not in vars(r._completions)
    assert "search_snapshot" not in vars(r.semantic)
    assert not {"search_scored", "spoken_by"} & set(vars(r.lexical))
    assert lexical_search.resolve is resolve and r.semantic.index._state.graph is graph
    assert _answers(pager) == before


def test_the_table_names_each_stage_and_both_medians() -> None:
    stage = {"start_ms": 0.1, "duration_ms": 0.2, "end_ms": 0.3, "share_of_calls": 1.0}
    row = {
        "memories": 1000,
        "stamped": {"p50_ms": 1.0, "p95_ms": 2.0},
        "plain": {"p50_ms": 0.9, "p95_ms": 1.8},
        "stages": {"lexical": stage},
    }
    text = table([row], 10)
    assert "| 1,000: start / duration ms |" in text and "0.100 / 0.200" in text
    assert text.count("| — |") == len(STAGES) - 1  # the stages this row has no stamp for
    assert "1.000 / 2.000" in text and "0.900 / 1.800" in text
