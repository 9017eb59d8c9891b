"""The association lane's candidates on a real store: neighbours of the best hits, scored by link strength."""

from __future__ import annotations

from pathlib import Path

import mempager
from mempager import PagerConfig
from mempager.consolidation.association_lane import association_candidates


def test_strong_neighbours_of_the_best_hits_come_back_scored(store_path: Path) -> None:
    with mempager.open(store_path, actor="neo", config=PagerConfig(embedder="hash", embed_workers=0)) as p:
        texts = [
            "The deploy failed on Friday because the migration locked the users table.",
            "Second Friday deploy failed again: the migration locked users for minutes.",
            "The payments release migration stalled and blocked checkout.",
            "Lunch was good.",
        ]
        uris = [p.remember("event", t) for t in texts]
        e = [w.id for w in p.prepare_wrap().episodes]
        p.save_continuity(
            "## State\nx\n## Patterns\n"
            f'- Migrations block | 2x (2026-05-04) [evidence: {e[0]} "deploy migration locked"]'
            f' [evidence: {e[1]} "friday deploy migration locked"] [evidence: {e[2]} "release migration stalled"]\n'
            f'- Lunch | 1x (2026-05-04) [evidence: {e[3]} "lunch good"]\n'
            "## Decisions\n-\n## Context\n-\n"
        )
        label = {m.uri: m.label for m in p.recall(limit=10)}
        a, b, c, lunch = (label[u] for u in uris)
        got = association_candidates(p.store, "neo", [(a, 0.8), (lunch, 0.1)])
        assert [(m.uri, round(s, 4)) for m, s in got] == [(uris[1], 0.08), (uris[2], 0.08)]
        # lunch is linked to the others only at wrap level (0.3): below the floor, so not a neighbour
        assert association_candidates(p.store, "neo", [(lunch, 0.9)]) == []
        assert association_candidates(p.store, "neo", [(a, 0.8), (b, 0.7)], k=5)[0][0].uri == uris[2]
        assert association_candidates(p.store, "other", [(a, 0.8)]) == []
        p.forget(uris[2])
        assert [m.uri for m, _ in association_candidates(p.store, "neo", [(a, 0.8)])] == [uris[1]]
