"""What MCP costs: ``memory_page`` through ``mempager serve`` (stdio) versus the Python API, same run.

    python -m benchmarks.bench_mcp [--memories 1000] [--calls 300]

One store of ~1,000 memories (hash embedder) is built once and copied, so the in-process Pager
and the server subprocess each open an identical store (DuckDB allows one writer per file).
Calls are interleaved query by query, so both paths see the same machine load. ``ping`` is the
bare stdio round trip, the floor under any tool call.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters, stdio_client

import mempager
from mempager import PagerConfig

from ._common import percentiles, write_results

GOAL = "ship billing release 2.4"
WORDS = (
    "deploy release invoice billing test flaky vault key branch customer refund ticket latency "
    "database index cache queue worker retry timeout alert dashboard rollback staging metric"
).split()
TYPES = ("fact", "event", "preference", "fact", "event")


def build_store(path: Path, n: int) -> None:
    rng = random.Random(11)
    items = [
        {
            "type": TYPES[i % len(TYPES)],
            "text": f"Note {i}: " + " ".join(rng.choice(WORDS) for _ in range(12)) + f" ref-{i:05d}.",
        }
        for i in range(n)
    ]
    with mempager.open(path, actor="bench", config=PagerConfig(embedder="hash")) as p:
        p.remember_many(items)
        p.add_rule("Never deploy on a red CI run.")
        p.remember_user_fact("The user is Ana, tech lead of billing.")
        p.sync()


async def timed(fn: Callable[..., Awaitable[Any]], *args: Any) -> float:
    start = time.perf_counter()
    await fn(*args)
    return (time.perf_counter() - start) * 1000


async def measure(store: Path, queries: list[str], warmup: int) -> dict[str, list[float]]:
    args = [
        "-m",
        "mempager",
        "serve",
        "--store",
        str(store.with_name("served.duckdb")),
        "--actor",
        "bench",
        "--embedder",
        "hash",
    ]
    params = StdioServerParameters(command=sys.executable, args=args, env={"HF_HUB_OFFLINE": "1"})
    samples: dict[str, list[float]] = {"direct": [], "mcp": [], "ping": []}
    with mempager.open(store, actor="bench", config=PagerConfig(embedder="hash")) as p:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()

            async def direct(q: str) -> None:
                p.page(q, goal=GOAL).render()  # the same work the tool does before serialising

            async def via_mcp(q: str) -> None:
                result = await session.call_tool("memory_page", {"query": q, "goal": GOAL})
                assert not result.is_error, result.content

            for i, q in enumerate(queries):
                times = {
                    "direct": await timed(direct, q),
                    "mcp": await timed(via_mcp, q),
                    "ping": await timed(session.send_ping),
                }
                for name, ms in times.items():
                    if i >= warmup:
                        samples[name].append(ms)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    rng = random.Random(5)
    warmup = 10
    queries = [" ".join(rng.choice(WORDS) for _ in range(5)) + "?" for _ in range(args.calls + warmup)]
    with tempfile.TemporaryDirectory() as d:
        store = Path(d) / "direct.duckdb"
        build_store(store, args.memories)
        shutil.copyfile(store, store.with_name("served.duckdb"))
        samples = asyncio.run(measure(store, queries, warmup))
    stats = {name: percentiles(values) for name, values in samples.items()}
    ratio = {q: round(stats["mcp"][q] / stats["direct"][q], 2) for q in ("p50_ms", "p95_ms")}
    # paired by query: robust to load drifting during the run (the machine may be shared)
    overhead = round(statistics.median(m - d for m, d in zip(samples["mcp"], samples["direct"], strict=True)), 3)
    rows = [
        f"| {label} | {stats[name]['p50_ms']} | {stats[name]['p95_ms']} | {stats[name]['n']} |"
        for name, label in (
            ("direct", "`Pager.page()` in process"),
            ("mcp", "`memory_page` tool over MCP stdio"),
            ("ping", "MCP `ping` (bare round trip)"),
        )
    ]
    table = "\n".join(
        [
            f"`page(goal, query)` on a store of {args.memories:,} memories (hash embedder), calls interleaved:",
            "",
            "| path | p50 ms | p95 ms | n |",
            "|---|---|---|---|",
            *rows,
            "",
            f"MCP / direct: p50 ×{ratio['p50_ms']}, p95 ×{ratio['p95_ms']}. Median paired difference "
            f"(MCP − direct, same query): {overhead} ms — JSON-RPC over pipes, argument validation, a worker "
            "thread, the one-line summary. Load average at the end of the run: "
            f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores.",
        ]
    )
    write_results(
        "mcp",
        {
            "memories": args.memories,
            "goal": GOAL,
            "latency": stats,
            "ratio_mcp_over_direct": ratio,
            "paired_overhead_median_ms": overhead,
            "load_average_1m": os.getloadavg()[0],
        },
        table,
        extra_versions=("mcp",),
    )
    print(table)


if __name__ == "__main__":
    main()
