"""Context keys in the lexical index: BM25 of each memory's text plus its episode neighbours'."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from mempager.index.episodes import ContextConfig
from mempager.index.lexical import LexicalIndex
from mempager.index.lexical_context import spread_terms
from mempager.index.tokenize import Tokenizer, TokenizerConfig

CTX = ContextConfig(window=2, decay=0.5, gap_seconds=60.0)
TEXTS = {
    1: "We drove to the lake on Saturday",
    2: "Which lake was it?",
    3: "Lake Tahoe, the water was freezing",
    4: "Did the kids swim anyway?",
    5: "Only Maya, she loves cold water",
    # another episode, a day later
    6: "My sister adopted a puppy",
    7: "What breed is the puppy?",
    8: "A beagle named Biscuit",
    # no time: outside every episode
    9: "Lake house rental receipts",
}
TIMES = {1: 0, 2: 10, 3: 20, 4: 30, 5: 40, 6: 86400, 7: 86410, 8: 86420, 9: math.nan}
# unrelated notes without a time: terms held by more than a fifth of the memories score on own
# text only (index.lexical_context.SPREAD_SHARE), so the store must be larger than the chat
FILLER = [f"note {i}: invoice number {1000 + i} paid by card" for i in range(70)]
for _i, _text in enumerate(FILLER):
    TEXTS[100 + _i] = _text
    TIMES[100 + _i] = math.nan
TEXTS[98], TIMES[98] = "The water bill and the lake tax are due", math.nan
TEXTS[99], TIMES[99] = "Water the plants, lake water is fine", math.nan


def build(context: ContextConfig | None = CTX, b: float = 0.0) -> LexicalIndex:
    index = LexicalIndex(context=context, b=b)
    labels = list(TEXTS)
    index.add(labels, [TEXTS[x] for x in labels], [float(TIMES[x]) for x in labels])
    return index


def brute(
    query: str, live: dict[int, str], times: dict[int, float], k1: float = 0.6, b: float = 0.0
) -> dict[int, float]:
    """BM25 over explicit weighted key documents, written from the definition."""
    tok = Tokenizer(TokenizerConfig())
    own = {x: Counter(tok.analyse(t)[0]) for x, t in live.items()}
    order = sorted((t, x) for x, t in times.items() if x in live and not math.isnan(t))
    keys: dict[int, Counter[str]] = {}
    lengths: dict[int, float] = {}
    for x in live:
        tf: Counter[str] = Counter()
        for term, c in own[x].items():
            tf[term] += c
        length = float(sum(own[x].values()))
        if not math.isnan(times.get(x, math.nan)):
            i = [y for _, y in order].index(x)
            for step in (-1, 1):
                j = i
                for d in range(1, CTX.window + 1):
                    if not (0 <= j + step < len(order)) or abs(order[j + step][0] - order[j][0]) > CTX.gap_seconds:
                        break
                    j += step
                    w = CTX.decay**d
                    for term, c in own[order[j][1]].items():
                        tf[term] += w * c
                    length += w * sum(own[order[j][1]].values())
        keys[x], lengths[x] = tf, length
    n, avg = len(live), sum(lengths.values()) / len(live)
    own_len = {x: float(sum(own[x].values())) for x in live}
    own_avg = sum(own_len.values()) / n
    out: dict[int, float] = dict.fromkeys(live, 0.0)
    for term in tok.terms(query):
        if sum(1 for x in live if own[x][term] > 0) > min(max(0.2 * n, 8), 512):  # common: own text only
            tfs, lens, mean = {x: float(own[x][term]) for x in live}, own_len, own_avg
        else:
            tfs, lens, mean = {x: keys[x][term] for x in live}, lengths, avg
        df = sum(1 for x in live if tfs[x] > 0)
        if not df:
            continue
        idf = math.log1p((n - df + 0.5) / (df + 0.5)) * (k1 + 1)
        for x in live:
            f = tfs[x]
            if f:
                out[x] += idf * f / (f + k1 * (1 - b + b * lens[x] / mean))
    return out


@pytest.mark.parametrize("b", [0.0, 0.75])  # the default ignores lengths; 0.75 reads the key lengths
@pytest.mark.parametrize(
    "query", ["lake", "cold water swim", "beagle puppy", "Tahoe Saturday", "receipts", "lake invoice card"]
)
def test_scores_equal_bm25_over_the_weighted_key_documents(query: str, b: float) -> None:
    index = build(b=b)
    top, also = index.search_scored(query, 20, list(TEXTS))
    want = brute(query, TEXTS, {x: float(t) for x, t in TIMES.items()}, b=b)
    for label, score in also.items():
        assert score == pytest.approx(want[label], rel=1e-9, abs=1e-12), label
    expect = sorted(((x, s) for x, s in want.items() if s > 0), key=lambda p: (-p[1], p[0]))
    assert [x for x, _ in top] == [x for x, _ in expect][:20]
    assert [x for x, _ in index.search(query, 20)] == [x for x, _ in expect][:20]


def test_a_turn_is_found_by_the_words_of_the_turn_before_it() -> None:
    # "freezing" answers "Which lake was it?" - the question's words sit in turns 1 and 2 only
    plain, ctx = build(None), build()
    assert 3 not in dict(plain.search("drove Saturday", 20))
    assert 3 in dict(ctx.search("drove Saturday", 20))
    # the next episode never borrows words across the gap
    assert 6 not in dict(ctx.search("cold water", 20))


def test_a_removed_memory_leaves_no_word_in_its_neighbours_keys() -> None:
    index = build()
    assert {2, 3, 4} <= set(dict(index.search("Tahoe", 20)))
    index.remove([3])
    assert index.search("Tahoe", 20) == []
    _, also = index.search_scored("Tahoe freezing", 5, [1, 2, 4, 5])
    assert set(also.values()) == {0.0}
    live = {x: t for x, t in TEXTS.items() if x != 3}
    want = brute("lake water", live, {x: float(t) for x, t in TIMES.items() if x != 3})
    assert any(want[x] for x in (2, 4))
    _, got = index.search_scored("lake water", 5, list(live))
    assert got == pytest.approx(want)


def test_the_case_has_both_kinds_of_terms() -> None:
    index = build()
    state = index._state
    ids = [state.ids[t] for t in index.tokenizer.terms("lake invoice Tahoe puppy card")]
    spread, plain = spread_terms(state, ids)
    assert [state.terms[t] for t in spread] == index.tokenizer.terms("lake Tahoe puppy")
    assert [state.terms[t] for t in plain] == index.tokenizer.terms("invoice card")


def test_memories_without_a_time_score_as_in_a_plain_index() -> None:
    labels = list(TEXTS)
    plain = LexicalIndex()
    plain.add(labels, [TEXTS[x] for x in labels])
    untimed = LexicalIndex(context=CTX)
    untimed.add(labels, [TEXTS[x] for x in labels])  # no times: no episodes
    for query in ("lake", "puppy beagle", "cold water"):
        assert untimed.search_scored(query, 5, labels) == plain.search_scored(query, 5, labels)


def test_explicit_recall_matches_own_text_only() -> None:
    index = build()
    assert [x for x, _ in index.match('"Lake Tahoe"')] == [3]
    assert sorted(x for x, _ in index.match("Tahoe")) == [3]


def test_a_reloaded_index_scores_the_same_once_its_memories_are_placed(tmp_path: object) -> None:
    index = build()
    index.save(tmp_path)  # type: ignore[arg-type]
    loaded = LexicalIndex(context=CTX)
    loaded.load(tmp_path)  # type: ignore[arg-type]
    timed = [x for x in TEXTS if not math.isnan(TIMES[x])]
    loaded.place(timed, [float(TIMES[x]) for x in timed])
    for query in ("lake", "cold water swim"):
        assert loaded.search_scored(query, 5, list(TEXTS)) == index.search_scored(query, 5, list(TEXTS))


def test_replacing_a_text_updates_its_neighbours_keys() -> None:
    index = build()
    index.add([3], ["Fallen Leaf Lake, the water was freezing"], [20.0])
    assert index.search("Tahoe", 5) == []
    assert 2 in dict(index.search("Fallen Leaf", 5))
    live = {**TEXTS, 3: "Fallen Leaf Lake, the water was freezing"}
    _, got = index.search_scored("lake water", 5, list(live))
    assert got == pytest.approx(brute("lake water", live, {x: float(t) for x, t in TIMES.items()}))


@pytest.mark.parametrize("b", [0.0, 0.75])
@pytest.mark.parametrize("k", [1, 2, 3, 5, 20])
@pytest.mark.parametrize("query", ["lake invoice card", "water paid", "lake water note", "puppy card number"])
def test_the_pruned_path_ranks_as_the_full_pass(query: str, k: int, b: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """A large store's common terms go through the pruned search (its best k outside the context
    candidates, whose own-text scores it gives too): the same ranking and scores as one pass."""
    from mempager.index import lexical_context, lexical_topk

    index = build(b=b)
    also = [1, 3, 9, 98, 104, 5000]
    state, terms = index._state, index.tokenizer.terms(query)

    def numpy_search() -> tuple[list[tuple[int, float]], dict[int, float]]:  # the reference the kernel is held to
        return lexical_context.context_scored(state, terms, k, also, index.episodes, index.k1, index.b)

    dense_top, dense_also = numpy_search()
    assert (dense_top, dense_also) == index.search_scored(query, k, also)  # the kernel: the same bits
    _, plain = spread_terms(state, [state.ids[t] for t in terms if t in state.ids])
    assert plain  # the case reaches the pruned search with common terms
    monkeypatch.setattr(lexical_context, "_PRUNE_FROM_ROWS", 0)
    monkeypatch.setattr(lexical_topk, "_PRUNE_FROM_ROWS", 0)
    monkeypatch.setattr(lexical_topk, "_DENSE_SHARE", 2.0)
    top, got_also = numpy_search()
    assert [x for x, _ in top] == [x for x, _ in dense_top]
    assert [s for _, s in top] == pytest.approx([s for _, s in dense_top], rel=1e-12)
    assert got_also == pytest.approx(dense_also, rel=1e-12)
