"""The reads a PostgreSQL retrieve makes fewer or lighter of, answering as the ones they replace:

* the time lane's ``created_span`` / ``created_between`` / ``created_of`` (labels and epoch
  seconds, no memories built; one round trip for the span instead of two) against ``query`` and
  ``get_many``, on both backends, and the whole ``TimeLane`` against its fallback path;
* ``candidate_facts`` as two index scans side by side: its cosines keep the order they were
  asked in (prior labels first), whatever order and repeats the labels come in.
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np

from mempager import PagerConfig
from mempager.lanes.salience import params_from_config
from mempager.lanes.when import TimeLane
from mempager.protocols import CandidateAsk
from mempager.types import MemoryType, NewMemory

from .conftest import is_pg
from .test_pg_rank_facts import _reads

UTC = timezone.utc
BASE = datetime(2024, 3, 1, 12, 0, 0, 123457, tzinfo=UTC)


def _events(store: Any) -> tuple[list[Any], Any, list[datetime]]:
    """40 events of actor a, hours apart, with odd microseconds and a tie, and one of actor b."""
    times = [BASE + timedelta(hours=7 * i, microseconds=131 * i) for i in range(40)]
    times[12] = times[11]  # same instant: label order decides
    items = [
        NewMemory(actor="a", type=MemoryType.EVENT, text=f"event number {i}", created_at=t) for i, t in enumerate(times)
    ] + [NewMemory(actor="b", type=MemoryType.EVENT, text="another actor's event", created_at=times[20])]
    ms = [r.memory for r in store.put_many(items)]
    return ms[:40], ms[40], times


def test_time_reads_answer_as_query_and_get_many(store: Any) -> None:
    mine, theirs, times = _events(store)
    assert store.created_span("a") == (times[0].timestamp(), times[-1].timestamp())
    assert store.created_span("nobody") is None
    # the window's ends are memories' own instants: the first is inside, the last is not
    since, until = times[5], times[30]
    for limit in (3, 12, 100):
        expect = [m.label for m in store.query("a", since=since, until=until, limit=limit)]
        got = store.created_between("a", since.timestamp(), until.timestamp(), limit)
        assert got.dtype == np.int64 and got.tolist() == expect
    assert len(expect) == 25 and mine[5].label in expect and mine[30].label not in expect
    assert store.created_between("b", since.timestamp(), until.timestamp(), 10).tolist() == [theirs.label]

    labels = [mine[3].label, 10**12, theirs.label, *(m.label for m in mine[10:14])]
    when = store.created_of("a", labels)
    assert when.tolist()[0] == mine[3].created_at.timestamp() == times[3].timestamp()
    assert math.isnan(when[1]) and math.isnan(when[2])  # missing, another actor's
    assert when.tolist()[3:] == [t.timestamp() for t in times[10:14]]
    assert store.created_of("a", []).shape == (0,)


class _Plain:
    """The store seen without its time-lane reads: ``TimeLane`` falls back to ``query`` and ``get_many``."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def query(self, *args: Any, **kwargs: Any) -> Any:
        return self._store.query(*args, **kwargs)

    def get_many(self, *args: Any) -> Any:
        return self._store.get_many(*args)


def test_time_lane_is_that_of_its_fallback(store: Any) -> None:
    mine, _, _ = _events(store)
    fast, plain = TimeLane(store, "a"), TimeLane(_Plain(store), "a")
    labels = [m.label for m in mine] + [10**12]
    for query in ("what happened on 3 March 2024?", "in March 2024", "on 9 March", "no date here"):
        count = _reads(store) if is_pg(store) else [0]
        windows = fast.windows(query)
        assert count[0] == (1 if windows and is_pg(store) else 0)  # the span: one round trip, not two
        assert windows == plain.windows(query)
        assert fast.search(windows, 5) == plain.search(windows, 5)
        assert fast.search(windows, 50) == plain.search(windows, 50)
        assert fast.inside(windows, labels) == plain.inside(windows, labels)
    assert fast.search(fast.windows("on 3 March 2024"), 50)  # the dates do match memories


def test_cosines_keep_the_order_they_were_asked_in(store: Any) -> None:
    if not is_pg(store):
        return  # the DuckDB store answers from its mirror and the hnswlib lane: nothing new there
    items = [NewMemory(actor="a", type=MemoryType.FACT, text=f"fact number {i}") for i in range(12)]
    ms = [r.memory for r in store.put_many(items)]
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(12, 16)).astype(np.float32)
    store.put_vectors("m", np.array([m.label for m in ms]), vectors, [m.content_hash for m in ms])
    labels = [m.label for m in ms]
    prior, cosine = [labels[7], labels[2], labels[9], labels[2]], [labels[5], labels[9], labels[1], labels[7], 10**12]
    params = replace(params_from_config(PagerConfig(), BASE), w_access=0.0, w_strength=0.0)
    ask = CandidateAsk(
        prior=prior, types=PagerConfig().salience_types, params=params, cosine=cosine, model="m", vector=vectors[0]
    )
    facts = store.candidate_facts("a", ask)
    # asked order: the prior's labels first (first time each), then the cosine-only ones
    assert list(facts.cosine) == [labels[7], labels[9], labels[5], labels[1]]
    assert facts.cosine == store.vector_scores("a", "m", vectors[0], cosine)
    assert facts.prior == store.salience("a", ask.types, params, len(prior), sorted(set(prior)))
