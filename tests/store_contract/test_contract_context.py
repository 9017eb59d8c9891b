"""Issue 19 on each backend: context keys and the time lane rank alike on DuckDB and PostgreSQL,
and a forgotten turn's words leave its neighbours' keys on both."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import mempager
from mempager import PagerConfig

CFG = PagerConfig(embedder="hash", lane_weights={"semantic": 0.0, "lexical": 1.0, "salience": 0.2, "time": 0.4})
T0 = datetime(2023, 5, 6, 18, 0, tzinfo=timezone.utc)
CHAT = [
    "Where did you go hiking last weekend?",
    "Up to Mount Tamalpais with my brother",
    "Nice, was it crowded up there?",
    "Not at all, we had the summit to ourselves",
]


def test_context_keys_and_the_time_lane(location: str | Path) -> None:
    with mempager.open(location, actor="neo", config=CFG) as p:
        turns = p.remember_many(
            [{"type": "event", "text": t, "created_at": T0 + timedelta(seconds=30 * i)} for i, t in enumerate(CHAT)]
        )
        later = p.remember("event", "Dinner with the brother at the dim sum place", created_at=T0 + timedelta(days=9))
        assert p.sync(timeout=60)
        found = [s.uri for s in p.retrieve("where did you go hiking", k=5)]
        assert turns[1] in found[:3] and later not in found
        dated = p.retrieve("what did I do with my brother on 15 May 2023", k=2)
        assert dated[0].uri == later and "time" in dated[0].lanes
        p.forget(turns[1], wait=True)
        assert [s.uri for s in p.retrieve("Tamalpais", k=5)] == []
    with mempager.open(location, actor="neo", config=CFG) as p:  # a fresh process's view: same ranking
        found = [s.uri for s in p.retrieve("where did you go hiking summit", k=5)]
        assert turns[3] in found and turns[1] not in found
        assert [s.uri for s in p.retrieve("Tamalpais", k=5)] == []
