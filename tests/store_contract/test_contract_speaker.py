"""Issue 19's speaker lane on each backend: a question that names a speaker favours what that
speaker said, only re-scores what other lanes found, and reads the same after a reopen (saved or rebuilt index)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import mempager
from mempager import PagerConfig

CFG = PagerConfig(embedder="hash")
OFF = CFG.with_(lane_weights={**CFG.lane_weights, "speaker": 0.0})
T0 = datetime(2023, 5, 6, 18, 0, tzinfo=timezone.utc)
CHAT = [
    "Caroline: Melanie, we went camping by the lake, camping there was great",
    "Melanie: I went camping in June",
    "Caroline: the kids loved the campfire",
    "Melanie: painting is how I unwind",
]
Q = "Where did Melanie go camping?"


def test_a_named_speaker_outranks_a_better_word_match(location: str | Path) -> None:
    with mempager.open(location, actor="neo", config=OFF) as p:  # weight 0: no speaker lane at all
        uris = p.remember_many(
            [{"type": "event", "text": t, "created_at": T0 + timedelta(days=i)} for i, t in enumerate(CHAT)]
        )
        assert p.sync(timeout=60)
        top = p.retrieve(Q, k=4)
        assert top[0].uri == uris[0] and all("speaker" not in s.lanes for s in top)  # Caroline's words win
    with mempager.open(location, actor="neo", config=CFG) as p:
        top = p.retrieve(Q, k=4)
        assert top[0].uri == uris[1] and "speaker" in top[0].lanes  # what Melanie said comes first
        assert {s.uri for s in top if "speaker" in s.lanes} <= {uris[1], uris[3]}
        assert all("speaker" not in s.lanes for s in p.retrieve("who went camping by the lake", k=4))
        for s in p.retrieve("Melanie", k=4):  # the lane re-scores what another lane found; it adds nothing
            assert set(s.lanes) - {"speaker", "prior"}, s.lanes
        edited = p.update(uris[1], text="Caroline: I went camping in June").uri  # an edit changes who said it
        assert "speaker" not in next(s.lanes for s in p.retrieve(Q, k=4) if s.uri == edited)
    with mempager.open(location, actor="neo", config=CFG) as p:  # another open (saved or rebuilt index)
        top = p.retrieve("Where did Caroline go camping?", k=4)
        assert top[0].uri in (uris[0], uris[1]) and "speaker" in top[0].lanes
