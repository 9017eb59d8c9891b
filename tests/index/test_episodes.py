"""Episodes: the time order, links and key-length mass the lexical lane's context keys read."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mempager.errors import InvalidInput
from mempager.index.episodes import ContextConfig, Episodes

GAP = 10.0


def reference(
    items: dict[int, tuple[float, float]], window: int, decay: float
) -> tuple[dict[int, int], dict[int, int], float, dict[int, float]]:
    """Links, extra key length and each key's length by brute force over the sorted (time, label) order."""
    order = sorted(items, key=lambda label: (items[label][0], label))
    prev, nxt = {}, {}
    for i, label in enumerate(order):
        t = items[label][0]
        prev[label] = order[i - 1] if i > 0 and t - items[order[i - 1]][0] <= GAP else -1
        nxt[label] = order[i + 1] if i + 1 < len(order) and items[order[i + 1]][0] - t <= GAP else -1
    extra = 0.0
    key = {}
    for label in order:
        key[label] = items[label][1]
        for links in (prev, nxt):
            cur = label
            for d in range(1, window + 1):
                cur = links[cur] if cur != -1 else -1
                if cur == -1:
                    break
                extra += decay**d * items[cur][1]
                key[label] += decay**d * items[cur][1]
    return prev, nxt, extra, key


def check(ep: Episodes, items: dict[int, tuple[float, float]]) -> None:
    prev, nxt, extra, key = reference(items, ep.config.window, ep.config.decay)
    assert len(ep) == len(items)
    for label in items:
        assert label in ep
        assert int(ep.prev[label]) == prev[label]
        assert int(ep.next[label]) == nxt[label]
        assert math.isclose(float(ep.key_length[label]), key[label], rel_tol=1e-9, abs_tol=1e-9)
    gone = np.ones(len(ep.key_length), bool)
    gone[list(items)] = False
    assert not ep.key_length[gone].any()  # a memory out of every episode has no key length left
    assert math.isclose(ep.extra_length, extra, rel_tol=1e-9, abs_tol=1e-6)


ops = st.lists(
    st.tuples(
        st.sampled_from(["add", "remove", "batch"]),
        st.lists(st.tuples(st.integers(0, 60), st.integers(0, 80), st.integers(1, 9)), min_size=1, max_size=4),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(ops=ops, window=st.integers(1, 3), decay=st.sampled_from([0.5, 0.7, 1.0]))
def test_links_and_mass_match_a_brute_force_order_after_any_writes(
    ops: list[tuple[str, list[tuple[int, int, int]]]], window: int, decay: float
) -> None:
    ep = Episodes(ContextConfig(window, decay, GAP))
    items: dict[int, tuple[float, float]] = {}
    for op, entries in ops:
        if op == "remove":
            ep.remove([label for label, _, _ in entries])
            for label, _, _ in entries:
                items.pop(label, None)
        else:
            ep.add([e[0] for e in entries], [float(e[1]) for e in entries], [float(e[2]) for e in entries])
            for label, t, n in entries:
                items[label] = (float(t), float(n))
        check(ep, items)


def test_a_bulk_merge_equals_one_by_one_inserts() -> None:
    rng = np.random.default_rng(7)
    labels = rng.permutation(2000)[:600].tolist()
    times = rng.integers(0, 3000, len(labels)).astype(float).tolist()
    lengths = rng.integers(1, 20, len(labels)).astype(float).tolist()
    bulk, single = Episodes(ContextConfig(2, 0.5, GAP)), Episodes(ContextConfig(2, 0.5, GAP))
    bulk.add(labels[:50], times[:50], lengths[:50])
    bulk.add(labels, times, lengths)  # 600 >= the bulk threshold; the first 50 are moved, not doubled
    for x, t, n in zip(labels, times, lengths, strict=True):
        single.add([x], [t], [n])
    items = {x: (t, n) for x, t, n in zip(labels, times, lengths, strict=True)}
    check(bulk, items)
    check(single, items)
    assert bulk.labels().tolist() == single.labels().tolist()


def test_spread_reaches_exactly_the_memories_whose_windows_hold_a_label() -> None:
    ep = Episodes(ContextConfig(2, 0.5, GAP))
    # one episode 1..5 (times 0..4), a gap, then 6..7
    ep.add([1, 2, 3, 4, 5, 6, 7], [0, 1, 2, 3, 4, 100, 101], [1] * 7)
    keys, src, w = ep.spread(np.array([3, 6], np.int64))
    got = sorted(zip(keys.tolist(), src.tolist(), w.tolist(), strict=True))
    assert got == [(1, 0, 0.25), (2, 0, 0.5), (3, 0, 1.0), (4, 0, 0.5), (5, 0, 0.25), (6, 1, 1.0), (7, 1, 0.5)]
    # a memory outside every episode (never added) reaches only itself
    keys, _, _ = ep.spread(np.array([99], np.int64))
    assert keys.tolist() == [99]
    assert ep.added_length(np.array([3, 6, 99], np.int64)).tolist() == [1.5, 0.5, 0.0]


@pytest.mark.parametrize("args", [(-1, 0.5, 1.0), (9, 0.5, 1.0), (2, 0.0, 1.0), (2, 1.5, 1.0), (2, 0.5, 0.0)])
def test_bad_context_settings_are_refused(args: tuple[int, float, float]) -> None:
    with pytest.raises(InvalidInput):
        ContextConfig(*args)


def test_add_needs_one_time_and_length_per_label() -> None:
    with pytest.raises(InvalidInput):
        Episodes(ContextConfig()).add([1, 2], [0.0], [1.0, 1.0])


@pytest.mark.parametrize("newer_labels", [True, False])
def test_bulk_batches_merge_into_the_order_with_ties(newer_labels: bool) -> None:
    """Batches of >= 256 merge into what is there; equal times order by label either way (the
    usual case, newer labels, takes the merge; older labels force a re-sort)."""
    rng = np.random.default_rng(3)
    ep = Episodes(ContextConfig(2, 0.5, GAP))
    items: dict[int, tuple[float, float]] = {}
    first = list(range(1000, 1300)) if newer_labels else list(range(2000, 2300))
    second = list(range(2000, 2300)) if newer_labels else list(range(1000, 1300))
    for batch in (first, second):
        times = rng.integers(0, 200, len(batch)).astype(float).tolist()  # many equal times
        lengths = rng.integers(1, 9, len(batch)).astype(float).tolist()
        ep.add(batch, times, lengths)
        items.update({x: (t, n) for x, t, n in zip(batch, times, lengths, strict=True)})
        check(ep, items)
    moved = first[:280]  # a bulk re-placement of labels already there
    times = rng.integers(0, 200, len(moved)).astype(float).tolist()
    ep.add(moved, times, [2.0] * len(moved))
    items.update({x: (t, 2.0) for x, t in zip(moved, times, strict=True)})
    check(ep, items)
    assert ep.labels().tolist() == sorted(items, key=lambda x: (items[x][0], x))


@settings(max_examples=150, deadline=None)
@given(ops=ops, window=st.integers(1, 3), decay=st.sampled_from([0.5, 0.7, 1.0]))
def test_bulk_merges_anywhere_in_the_order_match_a_brute_force_order(
    ops: list[tuple[str, list[tuple[int, int, int]]]], window: int, decay: float
) -> None:
    """Every batch through the bulk merge (threshold 1): at the end of the order, in its middle,
    before it, ties and re-placed labels included, only the part the batch reaches is relinked."""
    from mempager.index import episodes

    bulk = episodes._BULK
    episodes._BULK = 1
    try:
        test_links_and_mass_match_a_brute_force_order_after_any_writes.hypothesis.inner_test(ops, window, decay)
    finally:
        episodes._BULK = bulk


def test_a_newer_batch_relinks_only_the_end_of_the_order() -> None:
    """Bulk ingest appends newer memories: the merge must not touch the links of the older ones."""
    ep = Episodes(ContextConfig(2, 0.5, GAP))
    ep.add(list(range(1000)), [float(i) for i in range(1000)], [3.0] * 1000)
    ep.prev[:500] = -7  # poisoned far from the end: a merge that relinks everything would repair it
    ep.add(list(range(1000, 1300)), [1000.0 + i for i in range(300)], [2.0] * 300)
    assert (ep.prev[:500] == -7).all()
    ep.prev[:500] = np.concatenate(([-1], np.arange(499)))
    items = {i: (float(i), 3.0) for i in range(1000)} | {1000 + i: (1000.0 + i, 2.0) for i in range(300)}
    check(ep, items)


def test_a_batch_spread_through_the_order_matches_a_brute_force_order() -> None:
    """An import of older memories lands all through the order: each place's neighbourhood is redone."""
    rng = np.random.default_rng(11)
    ep = Episodes(ContextConfig(2, 0.5, GAP))
    items: dict[int, tuple[float, float]] = {}
    for lo in (0, 2000, 2600):
        labels = list(range(lo, lo + 600))
        times = (rng.permutation(60_000)[:600] * 7.0).tolist()  # distinct times, gaps above and below GAP
        lengths = rng.integers(1, 20, 600).astype(float).tolist()
        ep.add(labels, times, lengths)
        items.update({x: (t, n) for x, t, n in zip(labels, times, lengths, strict=True)})
        check(ep, items)
