"""The numpy pruned BM25 top k (index.lexical_topk) equals scoring every row, bit for bit, through writes.

``LexicalIndex.search_scored`` runs the compiled kernel (tests/index/test_lexical_kernel.py holds
it to this numpy reference); these tests call the reference itself (``numpy_search``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mempager.index import lexical_topk
from mempager.index.lexical import LexicalIndex
from mempager.index.lexquery import ranked

WORDS = ["alpha", "beta", "gamma", "delta", "omega", "river", "stone", "cloud", "ember", "frost"]


def numpy_search(index: LexicalIndex, query: str, k: int, also: list[int]) -> tuple[list[tuple[int, float]], dict]:
    """The numpy pruned search on the index's state (the reference the kernel is held to)."""
    terms = index.tokenizer.terms(query)
    if not terms:
        return [], dict.fromkeys(also, 0.0)
    return lexical_topk.search_scored(index._state, terms, k, also, index.k1, index.b)


def reference(index: LexicalIndex, query: str, k: int, also: list[int]) -> tuple[list[tuple[int, float]], dict]:
    """search_scored as it was: every row scored in one pass, then ranked."""
    terms = index.tokenizer.terms(query)
    if not terms:
        return [], dict.fromkeys(also, 0.0)
    state = index._state
    scores = state.scores(terms, index.k1, index.b)
    rows = np.flatnonzero(scores > 0)
    rows = rows[state.alive[rows]]
    top = ranked(state.row_label, rows, scores, k) if k > 0 else []
    extra = {}
    for label in also:
        row = state.label_row.get(label)
        extra[label] = float(scores[row]) if row is not None else 0.0
    return top, extra


@contextmanager
def pruning_always() -> Iterator[None]:
    """Small test corpora would take the full-scan fallback; make every search prune."""
    share, rows = lexical_topk._DENSE_SHARE, lexical_topk._PRUNE_FROM_ROWS
    lexical_topk._DENSE_SHARE, lexical_topk._PRUNE_FROM_ROWS = 2.0, 0
    try:
        yield
    finally:
        lexical_topk._DENSE_SHARE, lexical_topk._PRUNE_FROM_ROWS = share, rows


docs = st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join), min_size=1, max_size=60)
ops = st.lists(
    st.tuples(st.sampled_from(["add", "remove", "search"]), st.integers(0, 80), docs, st.integers(1, 12)),
    min_size=1,
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(docs, ops, st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join))
def test_pruned_top_k_is_the_full_scan(initial: list[str], steps, query: str) -> None:  # type: ignore[no-untyped-def]
    index = LexicalIndex()
    index.add(list(range(len(initial))), initial)
    for op, n, texts, k in steps:
        if op == "add":  # new documents and re-worded ones (their old rows become dead)
            index.add([n + i for i in range(len(texts))], texts)
        elif op == "remove":
            index.remove(range(n, n + k))
        also = [n, n + 1, 10_000, *range(0, 5)]
        with pruning_always():
            assert numpy_search(index, query, k, also) == reference(index, query, k, also)
            assert numpy_search(index, query, 50, []) == reference(index, query, 50, [])
        assert index.search_scored(query, k, also) == reference(index, query, k, also)  # the kernel too


@settings(max_examples=150, deadline=None)
@given(docs, st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join), st.integers(1, 12), st.data())
def test_excluded_labels_leave_the_top_k_to_the_best_others(initial: list[str], query: str, k: int, data) -> None:  # type: ignore[no-untyped-def]
    """``exclude`` (the context path's own candidates): the top k of the other labels, as a full
    scan ranks them, whichever path runs; the excluded labels' scores are still given."""
    index = LexicalIndex()
    index.add(list(range(len(initial))), initial)
    index.remove(data.draw(st.lists(st.integers(0, 70), max_size=5)))
    excluded = data.draw(st.lists(st.integers(0, 70), max_size=30))
    terms, state = index.tokenizer.terms(query), index._state
    if not terms:
        return
    scores = state.scores(terms, index.k1, index.b)
    rows = np.flatnonzero(scores > 0)
    rows = rows[state.alive[rows] & ~np.isin(state.row_label[rows], excluded)]
    want_top = ranked(state.row_label, rows, scores, k)
    _, want_also = reference(index, query, k, excluded)
    for forced in (True, False):
        with pruning_always() if forced else nullcontext():
            got = lexical_topk.search_scored(state, terms, k, excluded, index.k1, index.b, np.array(excluded, np.int64))
        assert got == (want_top, want_also)


def test_ties_at_the_cut_prefer_the_lower_label() -> None:
    index = LexicalIndex()
    index.add(list(range(200, 0, -1)), ["river stone"] * 100 + ["river"] * 100)
    with pruning_always():
        for k in (1, 5, 99, 100, 101, 150, 250):
            assert numpy_search(index, "river stone", k, [3, 150]) == reference(index, "river stone", k, [3, 150])


def test_common_terms_tf_columns_saturate_and_follow_writes() -> None:
    """A term in most documents is scored from its tf column; tf above a byte is read exactly."""
    index = LexicalIndex()
    index.add(list(range(400)), [f"river {WORDS[i % 9]}" for i in range(400)])
    with pruning_always():
        assert numpy_search(index, "river alpha", 5, [7]) == reference(index, "river alpha", 5, [7])
        assert index._state.tf_columns  # the common term got a column
        index.add([500, 501], ["river " * 300 + "alpha", "river " * 254 + "alpha"])  # past a byte, and at it
        index.remove([3, 4])
        for k in (1, 2, 3, 50):
            assert numpy_search(index, "river alpha", k, [500, 501, 3]) == reference(
                index, "river alpha", k, [500, 501, 3]
            )


def test_a_full_set_of_tf_columns_follows_the_terms_asked_most(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """With every column taken, a common term scored twice as often as the least used column's
    term takes that column; one asked less does not; results stay the full scan's throughout."""
    monkeypatch.setattr(lexical_topk, "_COLUMNS", 1)
    index = LexicalIndex()
    rare = {i: f" {WORDS[i // 5 % 4]}" for i in range(20)}  # alpha..delta: 5 documents each, under 1/64
    index.add(list(range(400)), [f"river stone{rare.get(i, '')}" for i in range(400)])  # two common terms
    state = index._state
    river, stone = state.ids["river"], state.ids["stone"]

    def ask(query: str) -> None:
        assert numpy_search(index, query, 5, [7]) == reference(index, query, 5, [7])

    with pruning_always():
        ask("river alpha")
        assert set(state.tf_columns) == {river}
        ask("stone alpha")  # asked once, as often as river: river keeps the one column
        assert set(state.tf_columns) == {river}
        ask("stone beta")  # twice now, river once
        assert set(state.tf_columns) == {stone}
        ask("river gamma")  # river twice, stone twice: no take-over back
        assert set(state.tf_columns) == {stone}
        index.add([600], ["river " * 3 + "alpha"])  # writes follow into the column that is there
        for _ in range(3):
            ask("river alpha")
        assert set(state.tf_columns) == {river}  # 5 against 2: rebuilt from the postings, write included
        assert numpy_search(index, "river alpha", 1, [])[0][0][0] == 600  # the write, from the new column


def test_column_counts_age_so_a_term_asked_now_can_take_over(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Counts halve once one reaches the ageing mark: a term asked often long ago does not hold its
    column against one asked now for as long again."""
    monkeypatch.setattr(lexical_topk, "_COLUMNS", 1)
    monkeypatch.setattr(lexical_topk, "_AGE_AT", 8)
    index = LexicalIndex()
    rare = {i: f" {WORDS[i // 5 % 4]}" for i in range(20)}
    index.add(list(range(400)), [f"river stone{rare.get(i, '')}" for i in range(400)])
    state = index._state
    river, stone = state.ids["river"], state.ids["stone"]
    with pruning_always():
        for _ in range(7):
            numpy_search(index, "river alpha", 5, [])
        assert state.tf_uses[river] == 7 and set(state.tf_columns) == {river}
        numpy_search(index, "river alpha", 5, [])  # the eighth: every count halves
        assert state.tf_uses[river] == 4
        for _ in range(7):
            numpy_search(index, "stone alpha", 5, [])
        assert set(state.tf_columns) == {river}  # 7 < 2 * 4
        numpy_search(index, "stone alpha", 5, [])  # 8: counts halve to 4 and 2, and 4 >= 2 * 2
        assert set(state.tf_columns) == {stone}  # without the ageing river's 8 would hold it against 8
        assert numpy_search(index, "stone alpha", 5, [7]) == reference(index, "stone alpha", 5, [7])


def test_bounds_follow_appends_that_raise_them() -> None:
    """A term's bound is computed from long documents; a short one that repeats it comes in and
    must be found (a stale bound would stop the search before reaching it)."""
    filler = " ".join(WORDS[1:5] * 10)
    texts = [f"alpha {filler}"] * 30 + [f"frost {filler}"] * 20 + [filler] * 250
    index = LexicalIndex(k1=1.2, b=0.5)  # bounds scale with length normalisation (the default b is 0)
    index.add(list(range(300)), texts)
    with pruning_always():
        assert numpy_search(index, "alpha frost", 1, []) == reference(index, "alpha frost", 1, [])
        assert index._state.bound_scale[index._state.ids["alpha"]] > 0  # the bound was computed
        index.add([1000], ["alpha alpha alpha alpha"])
        top, _ = numpy_search(index, "alpha frost", 1, [])
        assert top == reference(index, "alpha frost", 1, [])[0] and top[0][0] == 1000
        index.add(list(range(2000, 2300)), ["ember " * 40] * 300)  # avgdl grows past the bound's scale
        assert numpy_search(index, "alpha frost ember", 7, []) == reference(index, "alpha frost ember", 7, [])


def test_bounds_at_b_zero_are_computed_once_and_follow_appends() -> None:
    """With b = 0 (the default) lengths play no part, the length scale is 0, and a bound computed
    there holds at every scale: it is kept (it was recomputed on every search), and an append that
    raises it (a higher tf) still raises it, so the document is found."""
    filler = " ".join(WORDS[1:5] * 3)
    index = LexicalIndex()  # the default k1 = 0.6, b = 0
    index.add(list(range(300)), [f"alpha {filler}"] * 30 + [f"frost {filler}"] * 20 + [filler] * 250)
    state = index._state
    with pruning_always():
        assert numpy_search(index, "alpha frost", 3, []) == reference(index, "alpha frost", 3, [])
        alpha = state.ids["alpha"]
        kept = state.bound_scale[alpha], state.bound_ratio[alpha]
        assert kept[0] != 0.0  # computed, and marked as computed
        numpy_search(index, "alpha frost", 3, [])
        assert (state.bound_scale[alpha], state.bound_ratio[alpha]) == kept  # not recomputed
        index.add([1000], ["alpha alpha alpha alpha"])
        assert state.bound_ratio[alpha] > kept[1]  # the append raised it
        top, _ = numpy_search(index, "alpha frost", 1, [])
        assert top == reference(index, "alpha frost", 1, [])[0] and top[0][0] == 1000
