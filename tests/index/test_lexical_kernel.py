"""The compiled BM25 kernel (index/_bm25.c) answers exactly as the numpy reference, through writes.

``LexicalIndex.search_scored`` runs the kernel; ``lexical_context.context_scored`` (with episodes)
and ``lexical_topk.search_scored`` (without), as ``lexical_context.numpy_scored`` picks them, are the
numpy reference it must equal bit for bit:
the same top k, ties to the lower label, and the same score for every label asked about.
"""

from __future__ import annotations

import math
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mempager.index._bm25 import Kernel
from mempager.index.episodes import ContextConfig
from mempager.index.lexical import LexicalIndex
from mempager.index.lexical_context import numpy_scored

# a skewed vocabulary: a few words most documents hold (own-text terms), many rare ones (context terms)
COMMON = ["river", "stone", "cloud"]
RARE = [f"w{i}" for i in range(30)]
WORDS = COMMON * 6 + RARE


def reference(index: LexicalIndex, query: str, k: int, also: list[int]) -> tuple[list[tuple[int, float]], dict]:
    terms = index.tokenizer.terms(query)
    if not terms:
        return [], dict.fromkeys(also, 0.0)
    return numpy_scored(index._state, terms, k, also, index.episodes, index.k1, index.b)


texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=10).map(" ".join)
times = st.one_of(st.just(math.nan), st.floats(0, 3_000, allow_nan=False))
batch = st.lists(st.tuples(texts, times), min_size=1, max_size=40)
steps = st.lists(
    st.tuples(st.sampled_from(["add", "remove", "search"]), st.integers(0, 90), batch, st.integers(1, 15)),
    min_size=1,
    max_size=10,
)
contexts = st.one_of(
    st.none(),
    st.builds(
        ContextConfig,
        window=st.integers(0, 3),
        decay=st.sampled_from([0.5, 0.3, 1.0]),
        gap_seconds=st.sampled_from([30.0, 300.0]),
    ),
)


@settings(max_examples=250, deadline=None)
@given(
    batch,
    steps,
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join),
    contexts,
    st.sampled_from([(0.6, 0.0), (1.2, 0.75), (0.9, 1.0)]),
)
def test_the_kernel_is_the_numpy_reference_bit_for_bit(initial, ops, query, context, params) -> None:  # type: ignore[no-untyped-def]
    k1, b = params
    index = LexicalIndex(context=context, k1=k1, b=b)
    index.add(list(range(len(initial))), [t for t, _ in initial], [w for _, w in initial])
    for op, n, items, k in ops:
        if op == "add":  # new memories and re-worded ones (their old rows die), placed in time
            index.add([n + i for i in range(len(items))], [t for t, _ in items], [w for _, w in items])
        elif op == "remove":
            index.remove(range(n, n + k))
        also = [n, n + 1, 10_000, *range(0, 6)]
        for prune_from in (0, 1 << 40):  # MaxScore from the first row, and summing every posting
            index._state.kernel = Kernel(prune_from=prune_from)
            assert index.search_scored(query, k, also) == reference(index, query, k, also)
            assert index.search_scored(query, 60, []) == reference(index, query, 60, [])


# Pruned search (b = 0) over documents holding each of four words 0-3 times: many rows hold a word
# at its largest tf, so a bound a little too low drops a row that belongs in the top k; the lead
# term (largest bound) is in many rows, so once the top k is full most of its rows are dropped part
# way through their lookups; and equal documents make ties at the k-th place common.
FOUR = ["apex", "bolt", "cove", "dune"]
four_tfs = st.lists(st.integers(0, 3), min_size=4, max_size=4).filter(any)
four_words = four_tfs.map(lambda tfs: " ".join(w for w, n in zip(FOUR, tfs, strict=True) for _ in range(n)))
skewed_docs = st.lists(four_words, min_size=5, max_size=120)


@settings(max_examples=300, deadline=None)
@given(
    skewed_docs,
    st.lists(st.sampled_from(FOUR), min_size=1, max_size=4, unique=True).map(" ".join),
    st.integers(1, 8),
    st.lists(st.integers(0, 119), max_size=6),
)
def test_pruning_lead_rows_part_way_keeps_the_exact_top_k(docs, query, k, also) -> None:  # type: ignore[no-untyped-def]
    index = LexicalIndex(k1=1.2, b=0.0)
    index.add(list(range(len(docs))), docs)
    index.remove([1, 4])  # dead rows among the lead's
    index._state.kernel = Kernel(prune_from=0)
    assert index.search_scored(query, k, also) == reference(index, query, k, also)


def _conversation_index(b: float = 0.0) -> LexicalIndex:
    """Three episodes of a chat plus notes outside any, with both kinds of query terms."""
    index = LexicalIndex(context=ContextConfig(window=2, decay=0.5, gap_seconds=60.0), b=b)
    chat = [
        "We drove to the lake on Saturday",
        "Which lake was it?",
        "Lake Tahoe, the water was freezing",
        "Did the kids swim anyway?",
        "Only Maya, she loves cold water",
        "My sister adopted a puppy",
        "What breed is the puppy?",
        "A beagle named Biscuit",
    ]
    notes = [f"note {i}: invoice {1000 + i} paid by card, water bill" for i in range(60)]
    labels = list(range(len(chat) + len(notes)))
    index.add(labels, chat + notes, [10.0 * i for i in range(len(chat))] + [math.nan] * len(notes))
    return index


@pytest.mark.parametrize("b", [0.0, 0.75])
def test_a_term_frequency_past_the_kernels_table_scores_exactly(b: float) -> None:
    """Small term frequencies come from a per-term table (b = 0); larger ones are computed: both exact."""
    index = _conversation_index(b)
    index.add([500, 501, 502], ["water " * 15 + "lake", "water " * 16 + "lake", "water " * 300], [5.0, math.nan, 6.0])
    for prune_from in (0, 1 << 40):
        index._state.kernel = Kernel(prune_from=prune_from)
        for query in ("water lake", "water", "puppy water card"):
            also = [500, 501, 502, 3]
            assert index.search_scored(query, 10, also) == reference(index, query, 10, also)
        assert index.search_scored("water", 1, [])[0][0][0] == 502


def test_a_failing_wanted_leaves_nothing_behind_for_the_next_query() -> None:
    """``wanted`` is called between the kernel's calls; when it raises, the next search starts clean."""
    index = _conversation_index()

    def boom() -> list[int]:
        raise RuntimeError("the semantic lane failed")

    with pytest.raises(RuntimeError, match="semantic lane failed"):
        index.search_scored("lake water", 5, boom)
    for query in ("puppy beagle", "invoice card", "lake water"):
        assert index.search_scored(query, 5, [1, 2, 9]) == reference(index, query, 5, [1, 2, 9])


def test_postings_shrunk_by_removals_are_read_as_contiguous_rows() -> None:
    """A term that loses most documents is shrunk by a boolean index, which numpy returns in Fortran
    order; the posting lists keep each row contiguous, as the kernel reads them."""
    index = LexicalIndex()
    index.add(list(range(100)), [f"river w{i % 7}" for i in range(100)])
    index.remove(range(0, 90))
    post = index._state.post[index._state.ids["river"]]
    assert post.flags.c_contiguous
    assert index.search_scored("river w3", 5, [93, 1]) == reference(index, "river w3", 5, [93, 1])


def test_calls_out_of_order_or_with_bad_arrays_are_refused() -> None:
    kernel = Kernel()
    rows, tfs = np.array([0, 1], np.int32), np.array([1, 2], np.int32)
    alive, labels = np.ones(2, bool), np.array([10, 11], np.int64)
    doclen = np.ones(2)
    none = np.zeros(0, np.int64)
    with pytest.raises(RuntimeError, match="call spread first"):
        kernel.context([], 0.6, False, 0.0, 0.6, doclen, doclen)
    with pytest.raises(TypeError, match="term rows"):
        kernel.plain([(rows.astype(np.int64), tfs)], [1.0], 0.6, False, 0.0, 0.6, doclen, alive, labels, none, 5)
    with pytest.raises(IndexError, match="outside the index's 2 rows"):
        kernel.plain([(np.array([0, 2], np.int32), tfs)], [1.0], 0.6, False, 0.0, 0.6, doclen, alive, labels, none, 5)
    with pytest.raises(ValueError, match="one row per label"):
        kernel.plain([(rows, tfs)], [1.0], 0.6, False, 0.0, 0.6, doclen, alive, labels, np.array([0], np.int64), 5)
    with pytest.raises(ValueError, match="expected 1 values"):
        kernel.plain([(rows, tfs)], [1.0, 2.0], 0.6, False, 0.0, 0.6, doclen, alive, labels, none, 5)
    # after the refusals, a well-formed call answers: tf 2 outscores tf 1
    top = kernel.plain([(rows, tfs)], [1.0], 0.6, False, 0.0, 0.6, doclen, alive, labels, none, 5)
    assert top == [(11, 2 / 2.6), (10, 1 / 1.6)]
    got = kernel.lookup(np.array([1, -1, 0], np.int64), [(rows, tfs)], [1.0], 0.6, False, 0.0, 0.6, doclen)
    assert got == [2 / 2.6, 0.0, 1 / 1.6]


def test_the_kernel_lets_other_threads_run_while_it_walks_postings() -> None:
    """The postings walk releases the GIL, so the semantic lane's search thread is not held up: a
    thread looping in Python keeps going while another thread is inside one long kernel call. Were
    the GIL held, the loop would stop for the whole call: its longest pause would be the call."""
    n = 2_000_000
    rows, tfs = np.arange(n, dtype=np.int32), np.ones(n, np.int32)
    alive, labels, doclen, none = np.ones(n, bool), np.arange(n, dtype=np.int64), np.ones(n), np.zeros(0, np.int64)
    kernel = Kernel()
    kernel.plain([(rows, tfs)], [1.0], 0.6, False, 0.0, 0.6, doclen, alive, labels, none, 10)  # grown once
    took: list[float] = []
    done = threading.Event()

    def search() -> None:
        start = time.perf_counter()
        kernel.plain([(rows, tfs)] * 24, [1.0] * 24, 0.6, False, 0.0, 0.6, doclen, alive, labels, none, 10)
        took.append(time.perf_counter() - start)
        done.set()

    worker = threading.Thread(target=search)
    last, longest = time.perf_counter(), 0.0
    worker.start()
    while not done.is_set():
        now = time.perf_counter()
        longest, last = max(longest, now - last), now
    worker.join()
    assert longest < took[0] / 2, (longest, took)
    got = kernel.lookup(np.array([0, n - 1], np.int64), [(rows, tfs)] * 24, [1.0] * 24, 0.6, False, 0.0, 0.6, doclen)
    assert got == pytest.approx([24 / 1.6, 24 / 1.6])
