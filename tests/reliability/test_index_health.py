"""``stats()["vector_index"]``: the HNSW graph's tombstone share and self-recall, which the soak
benchmark (benchmarks/bench_soak.py) follows over a long-running server to see graph decay.
A PostgreSQL store's index lives in the server: None there (tests/reliability/test_pg_trouble.py)."""

from __future__ import annotations

import random
from pathlib import Path

import mempager
from mempager import PagerConfig


def test_stats_report_the_graph_tombstones_and_self_recall(fast_tmp: Path) -> None:
    config = PagerConfig(embedder="hash", hnsw_max_deleted_share=0.5)  # no rebuild: tombstones stay counted
    with mempager.open(fast_tmp / "s.duckdb", "a", config=config) as p:
        # above the index's exact-scan threshold (1,024 live vectors): self-recall walks the graph
        rng = random.Random(7)  # distinct texts: near-duplicate vectors would make self-recall a test of the data
        texts = [" ".join(f"w{rng.randrange(5000)}" for _ in range(8)) for _ in range(1150)]
        uris = p.remember_many([{"type": "fact", "text": t} for t in texts])
        assert p.sync(timeout=120)
        fresh = p.stats()["vector_index"]
        assert (fresh["live"], fresh["deleted_share"]) == (1150, 0.0)
        assert fresh["self_recall"] >= 0.9
        for uri in uris[:100]:  # still above the threshold after: the graph is walked again
            p.forget(uri)
        churned = p.stats()["vector_index"]
    assert churned["live"] == 1050
    assert churned["deleted_share"] == round(100 / 1150, 4)  # tombstones over all rows the graph holds
    assert churned["self_recall"] >= 0.9


def test_an_empty_index_has_no_self_recall(tmp_path: Path) -> None:
    with mempager.open(tmp_path / "s.duckdb", "a", config=PagerConfig(embedder="hash")) as p:
        assert p.stats()["vector_index"] == {"live": 0, "deleted_share": 0.0, "self_recall": None}
