"""Issue 19 through the public API: context keys (a turn found by its neighbours' words) and the
time lane (a date in the query brings that date's memories forward), on a real DuckDB store."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import mempager
from mempager import PagerConfig

T0 = datetime(2023, 5, 6, 18, 0, tzinfo=timezone.utc)
CHAT = [
    "Where did you go hiking last weekend?",
    "Up to Mount Tamalpais with my brother",
    "Nice, was it crowded up there?",
    "Not at all, we had the summit to ourselves",
]
LATER = ["Did the plumber ever come by?", "Yes, he replaced the kitchen faucet"]
# the content lanes alone, so the assertions are about the lexical keys and the time lane
WEIGHTS = {"semantic": 0.0, "lexical": 1.0, "salience": 0.2, "time": 0.4}


def config(**over: object) -> PagerConfig:
    return PagerConfig(embedder="hash", lane_weights=over.pop("lane_weights", WEIGHTS), **over)  # type: ignore[arg-type]


def write_chat(p: mempager.Pager) -> list[str]:
    items = [{"type": "event", "text": t, "created_at": T0 + timedelta(seconds=30 * i)} for i, t in enumerate(CHAT)]
    items += [
        {"type": "event", "text": t, "created_at": T0 + timedelta(days=2, seconds=30 * i)} for i, t in enumerate(LATER)
    ]
    uris = p.remember_many(items)
    assert p.sync(timeout=60)
    return uris


def uris_for(p: mempager.Pager, query: str, k: int = 10) -> list[str]:
    return [s.uri for s in p.retrieve(query, k=k)]


def test_a_turn_is_found_by_the_words_of_its_neighbours(tmp_path: Path) -> None:
    with mempager.open(tmp_path / "ctx.duckdb", actor="neo", config=config()) as p:
        uris = write_chat(p)
        found = uris_for(p, "where did you go hiking")
        assert uris[1] in found[:3]  # the answer never says "hiking"; the question before it does
        assert uris[4] not in found and uris[5] not in found  # two days later: another episode
        hit = next(s for s in p.retrieve("where did you go hiking", k=10) if s.uri == uris[1])
        assert hit.text == CHAT[1]  # the page shows the turn's own text, not its keys
    with mempager.open(tmp_path / "plain.duckdb", actor="neo", config=config(context_window=0)) as p:
        uris = write_chat(p)
        assert uris[1] not in uris_for(p, "where did you go hiking")


def test_forgetting_a_turn_takes_its_words_out_of_its_neighbours_keys(tmp_path: Path) -> None:
    with mempager.open(tmp_path / "s.duckdb", actor="neo", config=config()) as p:
        uris = write_chat(p)
        assert set(uris[:3]) <= set(uris_for(p, "Tamalpais"))
        p.forget(uris[1], wait=True)
        assert uris_for(p, "Tamalpais") == []
        assert uris[0] in uris_for(p, "crowded")  # the episode closes over the gap the forget left


def test_a_reopened_store_ranks_as_before(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    queries = ["where did you go hiking", "summit crowded", "kitchen plumber"]
    with mempager.open(path, actor="neo", config=config()) as p:
        write_chat(p)
        before = {q: [(s.uri, round(s.score, 9)) for s in p.retrieve(q, k=5)] for q in queries}
    with mempager.open(path, actor="neo", config=config()) as p:
        assert p.lexical.opened_how.startswith("loaded")  # from the saved files, episodes re-placed
        after = {q: [(s.uri, round(s.score, 9)) for s in p.retrieve(q, k=5)] for q in queries}
    assert after == before


def lunches(p: mempager.Pager) -> dict[str, str]:
    days = {"1 May": datetime(2023, 5, 1, 12), "8 May": datetime(2023, 5, 8, 12), "20 May": datetime(2023, 5, 20, 12)}
    # the 8 May lunch written last: with equal scores, the lower label (older write) would win
    order = ["8 May", "1 May", "20 May"][::-1]
    tables = {"1 May": "window table", "8 May": "corner table", "20 May": "patio table"}  # no date words
    out = {}
    for name in order:
        out[name] = p.remember(
            "event", f"Team lunch at the noodle bar, {tables[name]}", created_at=days[name].replace(tzinfo=timezone.utc)
        )
    assert p.sync(timeout=60)
    return out


def test_a_date_in_the_query_brings_that_dates_memories_first(tmp_path: Path) -> None:
    with mempager.open(tmp_path / "t.duckdb", actor="neo", config=config(context_window=0)) as p:
        ids = lunches(p)
        top = p.retrieve("Where was the team lunch on 8 May 2023?", k=3)
        assert top[0].uri == ids["8 May"]
        assert "time" in top[0].lanes and "time" not in top[1].lanes
        # told three days later still counts; a week later does not
        assert p.retrieve("team lunch on 5 May 2023", k=1)[0].uri == ids["8 May"]
        assert p.retrieve("team lunch on 10 May 2023", k=3)[0].lanes.get("time") is None
        # a month names every memory in it; "may" the verb names nothing
        assert all("time" in s.lanes for s in p.retrieve("team lunch in May 2023", k=3))
        assert all("time" not in s.lanes for s in p.retrieve("may we have team lunch", k=3))


def test_the_time_lane_is_off_at_weight_zero(tmp_path: Path) -> None:
    weights = {**WEIGHTS, "time": 0.0}
    with mempager.open(tmp_path / "t.duckdb", actor="neo", config=config(context_window=0, lane_weights=weights)) as p:
        ids = lunches(p)
        top = p.retrieve("Where was the team lunch on 8 May 2023?", k=3)
        assert all("time" not in s.lanes for s in top)
        assert top[0].uri != ids["8 May"]  # without the lane nothing in the text tells the dates apart


def test_the_salience_prior_puts_the_newer_of_two_equal_matches_first(tmp_path: Path) -> None:
    """Two statements of one fact match a question alike; the prior (recency, importance) decides."""
    now = datetime(2024, 6, 1, tzinfo=timezone.utc)
    for weight, newest_first in ((0.1, True), (0.0, False)):
        cfg = config(context_window=0, lane_weights={**WEIGHTS, "prior": weight})
        with mempager.open(tmp_path / f"p{weight}.duckdb", actor="neo", config=cfg) as p:
            p.clock = lambda: now
            old = p.remember("fact", "My dentist is Dr. Alvarez on Elm Street", created_at=now - timedelta(days=60))
            new = p.remember("fact", "My dentist is Dr. Okafor on Pine Street", created_at=now - timedelta(days=3))
            assert p.sync(timeout=60)
            top = p.retrieve("who is my dentist", k=2)
            assert [s.uri for s in top] == ([new, old] if newest_first else [old, new])
            assert ("prior" in top[0].lanes) is newest_first
            # importance outweighs a little age
            p.update(old, importance=1.0)
            if newest_first:
                assert p.retrieve("who is my dentist", k=1)[0].uri == old
