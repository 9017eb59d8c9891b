"""Store and retrieve speed on the embedded default (DuckDB + hash embedder, all three lanes).

    python -m benchmarks.bench_store [--sizes 1000 10000]

Single durable ``remember_fact`` writes/s; batched memories/s with embedding disabled, through
``remember_many`` (store, mirror and BM25 index) and into the store alone, batch for batch side
by side (overall and median batch); and ``retrieve`` p50/p95 at each size.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

import mempager
from mempager import PagerConfig
from mempager.store.duckdb import DuckDBStore
from mempager.types import MemoryType, NewMemory

from ._common import peak_rss_mib, percentiles, time_calls, write_results

WORDS = (
    "deploy release invoice billing test flaky vault key branch customer refund ticket latency "
    "database index cache queue worker retry timeout alert dashboard rollback staging metric"
).split()


def sentence(rng: random.Random, i: int) -> str:
    return f"Note {i}: " + " ".join(rng.choice(WORDS) for _ in range(12)) + f" ref-{rng.randrange(10**6):06d}."


def bench_writes(tmp: Path, n_single: int, n_batch: int, batch: int = 10_000) -> dict[str, object]:
    """Durable writes/s: one ``remember_fact`` per transaction, then ``batch``-sized batches both
    through the Pager (store + in-process mirror + BM25 index, which the lexical lane needs for
    read-your-writes) and into the store alone (what the durable columnar insert costs).

    The two batched paths run side by side, batch for batch, so load on the machine hits both
    alike. Each reports its overall rate (all memories over all time, DuckDB's periodic
    checkpoints included) and its median batch.
    """
    rng = random.Random(7)
    pager_s: list[float] = []
    store_s: list[float] = []
    store = DuckDBStore(tmp / "store-only.duckdb")
    try:
        with mempager.open(tmp / "writes.duckdb", actor="bench", config=PagerConfig(embedder="hash")) as p:
            p.workers.stop()  # measure writing, not embedding
            start = time.perf_counter()
            for i in range(n_single):
                p.remember_fact(sentence(rng, i))
            single = n_single / (time.perf_counter() - start)
            for lo in range(0, n_batch, batch):
                items = [{"type": "event", "text": sentence(rng, i)} for i in range(lo, lo + batch)]
                start = time.perf_counter()
                p.remember_many(items)
                pager_s.append(time.perf_counter() - start)
                news = [
                    NewMemory(actor="bench", type=MemoryType.EVENT, text=sentence(rng, i))
                    for i in range(lo, lo + batch)
                ]
                start = time.perf_counter()
                store.put_many(news)
                store_s.append(time.perf_counter() - start)
    finally:
        store.close()

    def rates(seconds: list[float]) -> dict[str, object]:
        return {
            "overall_per_s": round(n_batch / sum(seconds), 1),
            "median_batch_per_s": round(batch / statistics.median(seconds), 1),
            "batch_ms": [round(1000 * s, 1) for s in seconds],
        }

    through_pager, store_alone = rates(pager_s), rates(store_s)
    return {
        "remember_fact_per_s": round(single, 1),
        "batch": batch,
        "memories": n_batch,
        "remember_many_per_s": through_pager["overall_per_s"],
        "remember_many": through_pager,
        "store_put_many_per_s": store_alone["overall_per_s"],
        "store_put_many": store_alone,
        "pager_vs_store": round(sum(store_s) / sum(pager_s), 3),
    }


def bench_retrieve(tmp: Path, size: int, queries: int) -> dict[str, object]:
    rng = random.Random(size)
    with mempager.open(tmp / f"r{size}.duckdb", actor="bench", config=PagerConfig(embedder="hash")) as p:
        p.remember_many([{"type": "fact", "text": sentence(rng, i)} for i in range(size)])
        start = time.perf_counter()
        p.sync()
        embed_s = time.perf_counter() - start
        qs = [" ".join(rng.choice(WORDS) for _ in range(5)) for _ in range(queries)]
        it = iter(qs * 10)
        samples = time_calls(lambda: p.retrieve(next(it)), repeat=queries)
        embed_q = time_calls(lambda: p.semantic.embedder.embed([next(it)], role="query"), repeat=queries)
    return {
        "size": size,
        "retrieve": percentiles(samples),
        "query_embedding": percentiles(embed_q),
        "embed_all_s": round(embed_s, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        writes = bench_writes(Path(d), n_single=500, n_batch=50_000)
        print("writes", writes, flush=True)
        retrieves = []
        for size in args.sizes:
            retrieves.append(bench_retrieve(Path(d), size, args.queries))
            print("retrieve", retrieves[-1], flush=True)
    rows = [
        f"| {r['size']:,} | {r['retrieve']['p50_ms']} | {r['retrieve']['p95_ms']} | {r['query_embedding']['p50_ms']} |"
        for r in retrieves
    ]
    table = "\n".join(
        [
            "| metric | value |",
            "|---|---|",
            f"| single `remember_fact` (durable, one transaction each) | {writes['remember_fact_per_s']:,} /s |",
            f"| batched `remember_many` (10k per call, no embedding; store + mirror + BM25 index) | "
            f"{writes['remember_many_per_s']:,} /s overall, {writes['remember_many']['median_batch_per_s']:,} /s "
            f"median batch |",
            f"| batched `DuckDBStore.put_many` (10k per call, the durable store alone, side by side) | "
            f"{writes['store_put_many_per_s']:,} /s overall, {writes['store_put_many']['median_batch_per_s']:,} /s "
            f"median batch |",
            f"| `remember_many` speed as a share of the store alone | {writes['pager_vs_store']} |",
            "",
            "`retrieve` with the hash embedder (all three lanes: HNSW, BM25, salience):",
            "",
            "| memories | p50 ms | p95 ms | query embed p50 ms |",
            "|---|---|---|---|",
            *rows,
            "",
            f"peak RSS {peak_rss_mib()} MiB",
        ]
    )
    write_results("store", {"writes": writes, "retrieve": retrieves, "peak_rss_mib": peak_rss_mib()}, table)
    print(table)


if __name__ == "__main__":
    main()
