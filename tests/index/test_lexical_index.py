"""LexicalIndex: BM25 ranking, identifiers found verbatim, deletes, filters, incrementality, threads."""

from __future__ import annotations

import math
import random
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mempager.index.lexical as lexical
from mempager.errors import InvalidInput
from mempager.index.lexical import LexicalIndex
from mempager.index.tokenize import TokenizerConfig

DOCS = {
    1: "The deploy to staging failed because the vault key expired",
    2: "Caroline adopted two dogs and a cat last summer",
    3: "Rotate the vault key every ninety days",
    4: "Melanie painted a sunrise over the lake",
    5: "staging and production share one database",
}


@pytest.fixture
def ix() -> LexicalIndex:
    index = LexicalIndex()
    index.add(list(DOCS), list(DOCS.values()))
    return index


def test_bm25_matches_the_formula(ix: LexicalIndex) -> None:
    # "vault" is in docs 1 and 3 (df 2 of N 5); its tf is 1 in both.
    terms = {label: ix.tokenizer.analyse(text)[0] for label, text in DOCS.items()}
    avgdl = sum(len(t) for t in terms.values()) / len(terms)
    idf = math.log(1 + (5 - 2 + 0.5) / (2 + 0.5))

    def expected(label: int) -> float:
        norm = ix.k1 * (1 - ix.b + ix.b * len(terms[label]) / avgdl)
        return idf * (ix.k1 + 1) / (1 + norm)

    got = dict(ix.search("vault", 10))
    assert set(got) == {1, 3}
    for label in (1, 3):
        assert got[label] == pytest.approx(expected(label), rel=1e-12)


def test_any_term_may_match_and_more_matches_rank_higher(ix: LexicalIndex) -> None:
    hits = ix.search("vault key staging", 10)
    assert [label for label, _ in hits][:1] == [1]
    assert {label for label, _ in hits} == {1, 3, 5}
    assert all(a[1] >= b[1] for a, b in zip(hits, hits[1:], strict=False))


def test_ties_rank_the_lower_label_first() -> None:
    index = LexicalIndex()
    index.add([9, 3, 7], ["same words here"] * 3)
    assert [label for label, _ in index.search("words", 10)] == [3, 7, 9]
    assert [label for label, _ in index.search("words", 2)] == [3, 7]  # the cut prefers lower labels too


def test_replace_and_remove(ix: LexicalIndex) -> None:
    ix.add([2], ["Caroline now keeps three parrots"])
    assert [label for label, _ in ix.search("dogs", 10)] == []
    assert [label for label, _ in ix.search("parrots", 10)] == [2]
    ix.remove([2, 404])  # unknown labels are ignored
    assert ix.search("parrots caroline", 10) == []
    assert ix.match("parrots OR caroline") == [] and ix.match("par*") == []
    assert 2 not in ix and len(ix) == 4
    assert ix.labels().tolist() == [1, 3, 4, 5]


def test_allow_filter_and_k_clamping(ix: LexicalIndex) -> None:
    everything = ix.search("vault staging", 10)
    assert ix.search("vault staging", 10, allow=frozenset({3, 5, 99})) == [h for h in everything if h[0] in (3, 5)]
    assert ix.search("vault", 10, allow=frozenset()) == []
    big_allow = frozenset(range(1000))  # larger than the candidate set: the other filtering path
    assert ix.search("vault", 10, allow=big_allow) == ix.search("vault", 10)
    assert len(ix.search("vault staging key", 1)) == 1
    assert len(ix.search("vault staging key", 1000)) == 3
    assert ix.search("vault", 0) == [] and ix.search("vault", -5) == []


def test_empty_index_and_empty_or_stopword_queries(ix: LexicalIndex) -> None:
    assert LexicalIndex().search("anything", 5) == []
    assert len(LexicalIndex()) == 0
    assert ix.search("", 5) == []
    assert ix.search("the and of it", 5) == []
    assert ix.search("   ?!  ", 5) == []
    assert ix.search("zebra", 5) == []


def test_documents_without_terms_are_kept_but_never_found() -> None:
    index = LexicalIndex()
    index.add([1, 2], ["", "the of and"])
    assert len(index) == 2 and 1 in index
    index.add([3], ["zebra"])
    assert index.search("zebra", 5)[0][0] == 3


def test_bad_input_is_rejected() -> None:
    index = LexicalIndex()
    with pytest.raises(InvalidInput, match="labels"):
        index.add([1, 2], ["one text"])
    with pytest.raises(InvalidInput, match="str"):
        index.add([1], [b"bytes"])  # type: ignore[list-item]
    with pytest.raises(InvalidInput, match="k1"):
        LexicalIndex(k1=0)


# -- identifiers -------------------------------------------------------------------------------

TARGETS = ["0xdeadbeef", "a3f9c2e1b7d4", "src/app/main.py", "v1.2.3", "user@example.com"]
LOOKALIKES = [
    "0xdeadbeee",
    "0xdeadbeef0",
    "0xdeadbee",
    "a3f9c2e1b7d5",
    "a3f9c2e1b7",
    "b3f9c2e1b7d4",
    "src/app/main.pyc",
    "src/apps/main.py",
    "src/app/main_py",
    "app/src/main.py",
    "main.py.bak",
    "v1.2.4",
    "v1.2.3.1",
    "v1.3.2",
    "1.2",
    "user@example.org",
    "user2@example.com",
    "users@example.com",
    "example.com/user",
    "src/app",
    "main",
    "deadbeef",
    "user",
    "example",
]
FILLER = "the build log mentions these values while the team was debugging the release".split()


def test_identifiers_are_the_top_hit_among_lookalikes() -> None:
    rng = random.Random(3)
    index = LexicalIndex()
    for i in range(200):
        words = rng.sample(LOOKALIKES, 3) + rng.sample(FILLER, 6)
        rng.shuffle(words)
        index.add([1000 + i], [" ".join(words)])
    for i, target in enumerate(TARGETS):
        index.add([i], [" ".join(rng.sample(FILLER, 6) + [target] + rng.sample(LOOKALIKES, 2))])
    for i, target in enumerate(TARGETS):
        assert index.search(target, 5)[0][0] == i, target
        assert index.match(target)[0][0] == i, target


def test_parts_match_but_whole_tokens_score_higher() -> None:
    index = LexicalIndex()
    index.add([1, 2, 3], ["crash in src/app/main.py", "crash in main.py", "the main thing in py"])
    assert {label for label, _ in index.search("app", 5)} == {1}
    hits = index.search("main.py", 5)
    assert [label for label, _ in hits][:1] == [2]
    assert {label for label, _ in hits} == {1, 2, 3}


# -- incrementality ----------------------------------------------------------------------------

VOCAB = ["alpha", "beta", "gamma", "delta", "deploy", "vault", "src/app/main.py", "v1.2.3", "key", "keys"]
TEXT = st.lists(st.sampled_from(VOCAB), max_size=8).map(" ".join)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(st.tuples(st.integers(0, 15), TEXT), min_size=1, max_size=4)),
        st.tuples(st.just("remove"), st.lists(st.integers(0, 15), min_size=1, max_size=4)),
    ),
    max_size=25,
)
QUERIES = [*VOCAB, "alpha beta", "vault keys deploy", "main.py", "app", "1.2.3", "gamma delta alpha zeta"]


def _apply(ops: list[tuple[str, list]], index: LexicalIndex) -> dict[int, str]:  # type: ignore[type-arg]
    docs: dict[int, str] = {}
    for kind, arg in ops:
        if kind == "add":
            index.add([label for label, _ in arg], [text for _, text in arg])
            docs.update(dict(arg))
        else:
            index.remove(arg)
            for label in arg:
                docs.pop(label, None)
    return docs


def _assert_same(index: LexicalIndex, fresh: LexicalIndex) -> None:
    assert index.labels().tolist() == fresh.labels().tolist()
    for query in QUERIES:
        got, want = index.search(query, 50), fresh.search(query, 50)
        assert [label for label, _ in got] == [label for label, _ in want], query
        assert np.allclose([s for _, s in got], [s for _, s in want], rtol=0, atol=1e-9), query
    for query in ("alpha -beta", '"vault key"', "ke*", "(alpha OR gamma) deploy"):
        got, want = index.match(query), fresh.match(query)
        assert [x for x, _ in got] == [x for x, _ in want], query
        assert np.allclose([s for _, s in got], [s for _, s in want], rtol=0, atol=1e-9), query


@pytest.mark.parametrize("min_compact", [1024, 0])  # 0: compaction after nearly every delete
@settings(max_examples=60)
@given(ops=OPS)
def test_incremental_equals_fresh_build(ops: list[tuple[str, list]], min_compact: int) -> None:  # type: ignore[type-arg]
    index = LexicalIndex()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lexical, "_MIN_COMPACT", min_compact)
        docs = _apply(ops, index)
    fresh = LexicalIndex()
    fresh.add(sorted(docs), [docs[label] for label in sorted(docs)])
    _assert_same(index, fresh)


def test_churn_keeps_dead_postings_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lexical, "_MIN_COMPACT", 50)
    index = LexicalIndex()
    rng = random.Random(1)
    for step in range(2000):
        label = rng.randrange(100)
        index.add([label], [" ".join(rng.sample(VOCAB, 4)) + f" step{step}"])
    state = index._state
    assert state.nrows <= 2 * 100 + 50 + 1  # whole rebuilds keep dead rows at most about the live count
    assert len(state.terms) < 400  # dropped terms ("step<n>") leave the vocabulary on rebuild
    assert (2 * state.dead[: len(state.terms)] <= state.npost[: len(state.terms)] + 1).all()


# -- threads -----------------------------------------------------------------------------------


def test_readers_and_a_writer_run_concurrently(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lexical, "_MIN_COMPACT", 20)  # rebuilds and swaps happen while readers read
    index = LexicalIndex()
    errors: list[BaseException] = []
    done = threading.Event()

    def read(seed: int) -> None:
        rng = random.Random(seed)
        try:
            while not done.is_set():
                index.search(" ".join(rng.sample(VOCAB, 3)), 10)
                index.match(rng.choice(["alpha", "ke*", '"vault key"', "alpha -beta"]))
                _ = len(index), 3 in index, index.labels()
        except BaseException as exc:  # noqa: BLE001  (handed to the main thread, which fails the test)
            errors.append(exc)

    readers = [threading.Thread(target=read, args=(i,)) for i in range(3)]
    for t in readers:
        t.start()
    rng = random.Random(0)
    ops: list[tuple[str, list]] = []  # type: ignore[type-arg]
    for step in range(1500):
        if rng.random() < 0.3:
            ops.append(("remove", rng.sample(range(200), 5)))
        else:
            ops.append(("add", [(rng.randrange(200), " ".join(rng.sample(VOCAB, 5))) for _ in range(3)]))
        if step % 500 == 0:
            ops.append(("add", [(i, f"bulk doc {i} alpha") for i in range(1000, 1400)]))
    try:
        docs = _apply(ops, index)
    finally:
        done.set()
        for t in readers:
            t.join()
    assert errors == []
    fresh = LexicalIndex()
    fresh.add(sorted(docs), [docs[label] for label in sorted(docs)])
    _assert_same(index, fresh)


def test_tokenizer_options_are_honoured() -> None:
    plain = LexicalIndex(tokenizer=TokenizerConfig(stem="none"))
    plain.add([1], ["running dogs"])
    assert plain.search("run", 5) == [] and plain.search("running", 5)[0][0] == 1
