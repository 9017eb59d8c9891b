"""The levers harness (issue 19) reproduces the product's retrieve, and tunes on one half only."""

from __future__ import annotations

from dataclasses import replace
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from mempager.embedders import HashEmbedder
from mempager.evaluation import halves, levers
from mempager.evaluation.levers import BASELINE, PRODUCT, SETTINGS, Knobs, Outcome
from mempager.evaluation.locomo import Conversation, Question, Turn

TOPICS = [
    ("Ana", "I adopted a grey kitten named Pixel from the shelter last week"),
    ("Ben", "Nice! I started pottery classes on Tuesday evenings"),
    ("Ana", "Pixel keeps knocking my mugs off the kitchen shelf"),
    ("Ben", "My first bowl cracked in the kiln, the teacher said it was the glaze"),
    ("Ana", "We hiked the Ridge trail in May 2023 and saw a moose near the lake"),
    ("Ben", "I booked flights to Lisbon for the conference in October"),
    ("Ana", "My sister is getting married in Porto next spring"),
    ("Ben", "I switched jobs, now I write firmware for bicycle computers"),
]


def _conversation(name: str, sessions: int = 3) -> Conversation:
    turns = []
    start = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)
    for s in range(1, sessions + 1):
        day = start + timedelta(days=9 * s)
        for i, (speaker, text) in enumerate(TOPICS[(s - 1) :] + TOPICS[: (s - 1)]):
            turns.append(Turn(f"D{s}:{i + 1}", speaker, f"{speaker}: {text} ({s})", day + timedelta(seconds=30 * i)))
    questions = (
        Question("What is the name of Ana's kitten?", frozenset({"D1:1"}), 4),
        Question("What happened to Ben's first pottery bowl?", frozenset({"D1:4", "D2:3"}), 1),
        Question("Where did Ana hike in May 2023?", frozenset({"D1:5"}), 2),
        Question("Which city is Ben flying to?", frozenset({"D3:4"}), 4),
        Question("What does Ben do for work now?", frozenset({"D2:7", "D3:6"}), 3),
        # only the date tells which of Ana's turns (the time lane); conversations of 2 sessions lack it
        Question("What did Ana say on 4 June 2023?", frozenset({"D3:1", "D3:3", "D3:5", "D3:7"}), 2),
    )
    known = {t.dia_id for t in turns}
    kept = tuple(replace(q, evidence=q.evidence & known) for q in questions if q.evidence & known)
    return Conversation(name, tuple(turns), kept)


def _setup(tmp_path: Path) -> tuple[list[Conversation], list[levers.Conv], levers.VectorCache]:
    conversations = [_conversation("conv-x"), _conversation("conv-y", 2)]
    cache = levers.VectorCache(tmp_path / "vectors.npz", HashEmbedder().name, HashEmbedder)
    return conversations, levers.prepare(conversations, cache), cache


def test_product_defaults_are_the_products_retrieve(tmp_path: Path) -> None:
    # context keys (rare terms on the episode's neighbours, the speakers' names on own text: they
    # are held by more than the floor of 8 memories), Snowball, k1/b and the time lane ("May 2023")
    conversations, convs, cache = _setup(tmp_path)
    lanes = levers.Lanes(convs, cache)
    mine = levers.evaluate(lanes, PRODUCT, keep_found=True)
    check = levers.verify_against_product(conversations, convs, cache, mine, workdir=tmp_path)
    assert check["calls"] == len(SETTINGS) * len(mine.recall)
    assert check["labels_in_insertion_order"]
    assert check["agreement"] == 1.0
    assert check["product_recall"] == levers.means(mine)
    # the agreement covers the time lane, context keys and the common terms' own-text scoring:
    # each of them, turned off, changes what these questions find
    for off in ({"time_abs": 0.0}, {"lex_ctx_share": 1.0}, {"lex_before": 0, "lex_after": 0}):
        assert levers.evaluate(lanes, replace(PRODUCT, **off), keep_found=True).found != mine.found, off


def test_the_check_tells_the_baseline_from_the_product(tmp_path: Path) -> None:
    conversations, convs, cache = _setup(tmp_path)
    lanes = levers.Lanes(convs, cache)
    old = levers.evaluate(lanes, BASELINE, keep_found=True)
    assert levers.verify_against_product(conversations, convs, cache, old, workdir=tmp_path)["agreement"] < 1.0


def test_product_knobs_are_the_shipped_defaults() -> None:
    # read from the product (PagerConfig, LexicalIndex, TokenizerConfig, lexical_context), not written here
    shipped = replace(BASELINE, stem="snowball", lex_before=2, lex_after=2, lex_decay=0.5, lex_ctx_share=0.2)
    assert PRODUCT == levers.product_knobs() == replace(shipped, k1=0.6, b=0.0, time_abs=0.4, time_after=3, speaker=0.2)
    assert BASELINE == Knobs() and BASELINE.stem == "light" and (BASELINE.k1, BASELINE.b) == (1.2, 0.5)


def test_the_cache_answers_without_the_model(tmp_path: Path) -> None:
    _, convs, _ = _setup(tmp_path)
    again = levers.VectorCache(tmp_path / "vectors.npz", HashEmbedder().name)  # no embedder to call
    assert np.array_equal(again.get(list(convs[0].texts)), convs[0].vectors)


def test_every_lever_runs_and_recall_stays_a_fraction(tmp_path: Path) -> None:
    _, convs, cache = _setup(tmp_path)
    for c in convs:
        cache.get(levers.window_text(c, 1, 1))
    lanes = levers.Lanes(convs, cache)
    for knobs in (
        Knobs(lex_before=2, lex_after=2, lex_decay=0.5, date_keys=True, stem="snowball"),
        Knobs(sem_before=1, sem_after=1, sem_alpha=0.5),
        Knobs(sem_window_text=0.5),
        Knobs(prf_docs=3, prf_weight=0.3),
        Knobs(prf_docs=3, prf_source="fused"),
        Knobs(sess_boost=0.2, sess_top=2, sess_add=1, sess_tau=7.0),
        Knobs(nb_boost=0.2, time_boost=0.3, time_after=3),
        *(Knobs(fusion=f) for f in ("rrf", "mnz", "minmax", "zscore", "maxsem")),
        Knobs(sem_depth=0.5, lex_depth=2.0),
    ):
        out = levers.evaluate(lanes, knobs)
        assert out.recall.shape == (10, len(SETTINGS))
        assert ((out.recall >= 0) & (out.recall <= 1)).all()
        budgets = out.recall[:, [j for j, s in enumerate(SETTINGS) if s.kind == "at_budget"]]
        assert (np.diff(budgets, axis=1) >= -1e-12).all() or knobs.fusion != "score"


def test_lexical_window_with_no_neighbours_is_plain_bm25(tmp_path: Path) -> None:
    _, convs, cache = _setup(tmp_path)
    lanes = levers.Lanes(convs, cache)
    plain = lanes.lexical(0, BASELINE)
    assert np.array_equal(lanes.lexical(0, Knobs(lex_decay=0.3)), plain)  # a decay without a window: nothing
    wide = lanes.lexical(0, Knobs(lex_before=1, lex_after=1, lex_decay=0.5))
    assert not np.array_equal(wide, plain)


def test_dates_in_questions() -> None:
    years = [2022, 2023]
    assert levers.date_ranges("What did she paint on October 13, 2023?", years) == [
        (date(2023, 10, 13), date(2023, 10, 13))
    ]
    assert levers.date_ranges("What did Gina find on 1 February, 2023?", years) == [
        (date(2023, 2, 1), date(2023, 2, 1))
    ]
    assert levers.date_ranges("What did Maria start in December 2023?", years) == [
        (date(2023, 12, 1), date(2023, 12, 31))
    ]
    assert levers.date_ranges("When did Melanie go camping in June?", years) == [
        (date(2022, 6, 1), date(2022, 6, 30)),
        (date(2023, 6, 1), date(2023, 6, 30)),
    ]
    assert levers.date_ranges("What may she do next?", years) == []  # the verb is not the month


def _fake(scores_a: float, scores_b: float) -> Outcome:
    conv = np.array([0] * 5 + [5] * 5)
    recall = np.where(conv[:, None] < 5, scores_a, scores_b) * np.ones((10, len(SETTINGS)))
    return Outcome(recall, np.full(10, 4), conv)


def test_cross_tune_reports_each_half_with_the_other_halfs_choice() -> None:
    # point 1 is best on half A, point 2 best on half B
    table = {Knobs(): _fake(0.5, 0.5), Knobs(nb_boost=0.1): _fake(0.9, 0.1), Knobs(nb_boost=0.2): _fake(0.1, 0.9)}
    choice = halves.cross_tune(list(table), table.__getitem__)
    assert choice["A"].knobs == Knobs(nb_boost=0.2)  # tuned on B
    assert choice["B"].knobs == Knobs(nb_boost=0.1)  # tuned on A
    steps = halves.forward({"nb": [{"nb_boost": 0.1}, {"nb_boost": 0.2}]}, table.__getitem__, "B")
    assert steps[-1].knobs == replace(BASELINE, nb_boost=0.2)
