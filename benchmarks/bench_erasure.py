"""Erasure at scale: forget latency, the shared erasure pass, bytes gone, pages served meanwhile.

    python -m benchmarks.bench_erasure [--memories 100000] [--forgets 2000] [--no-write]

The store holds N memories, each with a unique token (``fz0000123x``) so a single regex pass over
a file finds every forgotten memory whose text is still in it. Embedding is the hash embedder
(erasure does not care what the vectors mean; the HNSW graph is real, 384-d, M=16). Sections:

1. before, the pre-issue-18 path, rebuilt from the same collaborators in this run: every hard
   forget deleted, rebuilt the HNSW graph and the BM25 index, re-saved both and rewrote the file.
2. after: ``--forgets`` hard forgets one by one with the default ``erase_delay_seconds``; forget
   p50/p95, then the time until no forgotten token is left in any file of the store (the store
   file, its WAL, every saved index), counted from the first and from the last forget.
3. forget-heavy: 10% of the memories forgotten by one thread while another serves ``page()``;
   page p50/p95 before, while forgets run, and during the erasure passes themselves.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks._common import percentiles, write_results

TOKEN = re.compile(rb"fz(\d{7})x")
QUERIES = ["what about topic 12 and word 7", "the record about topic 400", "word 99 on topic 3", "topic 77"]


def text(i: int) -> str:
    return f"record {i} token fz{i:07d}x about topic {i % 977} and word {i % 131}"


def build(path: Path, n: int) -> list[str]:
    import mempager
    from mempager import PagerConfig

    with mempager.open(path, actor="neo", config=PagerConfig(embedder="hash")) as p:
        uris: list[str] = []
        for lo in range(0, n, 10_000):
            uris += p.remember_many([{"type": "fact", "text": text(i)} for i in range(lo, min(n, lo + 10_000))])
        p.set_identity("I am the records agent.")
        assert p.sync(timeout=3600), "embedding did not finish"
    return uris


def files_of(path: Path) -> list[Path]:
    found = [f for f in path.parent.iterdir() if f.is_file() and f.name.startswith(path.name)]
    return found + [f for f in Path(f"{path}.index").rglob("*") if f.is_file()]


def tokens_left(path: Path, doomed: set[int]) -> int:
    left: set[int] = set()
    for f in files_of(path):
        try:
            data = f.read_bytes()
        except FileNotFoundError:  # replaced while we looked: the next scan sees its successor
            continue
        left |= {int(m) for m in TOKEN.findall(data)} & doomed
    return len(left)


def before(path: Path, uris: list[str], n_forgets: int) -> dict[str, Any]:
    """The old hard forget: delete, then purge and rebuild every index and rewrite the file, per call."""
    import mempager
    from mempager import PagerConfig

    times = []
    with mempager.open(path, actor="neo", config=PagerConfig(embedder="hash")) as p:
        for uri in uris[:n_forgets]:
            start = time.perf_counter()
            p.forget(uri, hard=False)
            p.semantic.purge()
            p.lexical.rebuild("purge after forget")
            p.lexical.save()
            p.store.compact()
            times.append((time.perf_counter() - start) * 1000)
            print(f"  old-path forget {len(times)}: {times[-1] / 1000:.1f} s", file=sys.stderr)
    return percentiles(times)


def after(path: Path, uris: list[str], n_forgets: int, first: int) -> dict[str, Any]:
    import mempager
    from mempager import PagerConfig

    doomed = set(range(first, first + n_forgets))
    times = []
    with mempager.open(path, actor="neo", config=PagerConfig(embedder="hash")) as p:
        delay = p.config.erase_delay_seconds
        t0 = time.monotonic()
        for i in sorted(doomed):
            start = time.perf_counter()
            p.forget(uris[i])
            times.append((time.perf_counter() - start) * 1000)
        t_last = time.monotonic()
        while tokens_left(path, doomed):
            time.sleep(1.0)
        t_gone = time.monotonic()
        stats = p.stats()["erasure"]
    return {
        "forget": percentiles(times),
        "erase_delay_seconds": delay,
        "forgetting_s": round(t_last - t0, 2),
        "gone_after_first_forget_s": round(t_gone - t0, 2),
        "gone_after_last_forget_s": round(t_gone - t_last, 2),
        "passes": stats["passes"],
        "last_pass_s": round(stats["last_pass_seconds"] or 0.0, 2),
    }


def forget_heavy(path: Path, uris: list[str], share: float, rate: float, first: int) -> dict[str, Any]:
    import mempager
    from mempager import PagerConfig

    n = int(len(uris) * share)
    doomed = list(range(first, first + n))
    passes: list[tuple[float, float]] = []
    samples: list[tuple[float, float]] = []
    with mempager.open(path, actor="neo", config=PagerConfig(embedder="hash")) as p:
        erase = p.eraser.queue._erase

        def timed_pass() -> None:  # instrumentation only: when each pass ran
            start = time.monotonic()
            erase()
            passes.append((start, time.monotonic()))

        p.eraser.queue._erase = timed_pass
        for i in range(200):
            p.page(QUERIES[i % len(QUERIES)])
        baseline = []
        for i in range(500):
            start = time.perf_counter()
            p.page(QUERIES[i % len(QUERIES)])
            baseline.append((time.perf_counter() - start) * 1000)
        done = threading.Event()
        forget_ms: list[float] = []

        def forgetter() -> None:
            for k, i in enumerate(doomed):
                start = time.perf_counter()
                p.forget(uris[i])
                forget_ms.append((time.perf_counter() - start) * 1000)
                pause = (k + 1) / rate - (time.perf_counter() - t0)
                if pause > 0:
                    time.sleep(pause)
            done.set()

        t0 = time.perf_counter()
        thread = threading.Thread(target=forgetter)
        thread.start()
        q = 0
        while not done.is_set() or p.stats()["erasure"]["pending"]:
            start = time.perf_counter()
            p.page(QUERIES[q % len(QUERIES)])
            samples.append((time.monotonic(), (time.perf_counter() - start) * 1000))
            q += 1
        thread.join()
        elapsed = time.perf_counter() - t0
    in_pass = [ms for at, ms in samples if any(a <= at <= b for a, b in passes)]
    return {
        "memories_forgotten": n,
        "forget_rate_per_s": rate,
        "elapsed_s": round(elapsed, 1),
        "forget": percentiles(forget_ms),
        "page_before": percentiles(baseline),
        "page_while_forgetting": percentiles([ms for _, ms in samples]),
        "page_during_passes": percentiles(in_pass) if in_pass else None,
        "passes": len(passes),
        "pass_s": [round(b - a, 2) for a, b in passes],
        "tokens_left_at_end": tokens_left(path, set(doomed)),
    }


def table(r: dict[str, Any]) -> str:
    b, a, h = r["before"], r["after"], r["forget_heavy"]
    n = r["memories"]
    old_total_h = b["p50_ms"] * r["forgets"] / 1000 / 3600
    lines = [
        f"Store: {n:,} memories (hash embedder, 384-d HNSW M=16), default `erase_delay_seconds` "
        f"{a['erase_delay_seconds']:.0f} s.",
        "",
        "## One hard forget, before and after (same run)",
        "",
        "| | p50 ms | p95 ms |",
        "|---|---|---|",
        f"| before: delete + rebuild both indexes + rewrite the file, per forget | {b['p50_ms']:.0f} | "
        f"{b['p95_ms']:.0f} |",
        f"| after: `forget(uri)` (delete + durable mark; erasure deferred) | {a['forget']['p50_ms']:.2f} | "
        f"{a['forget']['p95_ms']:.2f} |",
        "",
        f"## {r['forgets']:,} hard forgets one by one",
        "",
        f"- before: {r['forgets']:,} x {b['p50_ms'] / 1000:.1f} s = about {old_total_h:.1f} h",
        f"- after: the forgets took {a['forgetting_s']} s; no byte of any of them in any file of the store "
        f"{a['gone_after_last_forget_s']} s after the last one ({a['gone_after_first_forget_s']} s after the "
        f"first), in {a['passes']} erasure pass(es) of {a['last_pass_s']} s",
        "",
        f"## Forget-heavy: {h['memories_forgotten']:,} memories ({h['memories_forgotten'] / n:.0%}) forgotten "
        f"at {h['forget_rate_per_s']:.0f}/s while `page()` is served",
        "",
        "| `page()` | p50 ms | p95 ms | n |",
        "|---|---|---|---|",
    ]
    for name, key in (
        ("before the forgets", "page_before"),
        ("while forgetting (whole run)", "page_while_forgetting"),
        ("during the erasure passes", "page_during_passes"),
    ):
        s = h[key]
        row = f"| {name} | {s['p50_ms']:.2f} | {s['p95_ms']:.2f} | {s['n']} |" if s else f"| {name} | - | - | 0 |"
        lines.append(row)
    lines += [
        "",
        f"forget p50 {h['forget']['p50_ms']:.2f} ms / p95 {h['forget']['p95_ms']:.2f} ms; {h['passes']} passes "
        f"({', '.join(str(x) for x in h['pass_s'])} s); forgotten tokens left in any file at the end: "
        f"{h['tokens_left_at_end']}.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--forgets", type=int, default=2000)
    parser.add_argument("--old-path-forgets", type=int, default=3)
    parser.add_argument("--heavy-share", type=float, default=0.10)
    parser.add_argument("--heavy-rate", type=float, default=200.0, help="forgets per second in the heavy run")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mempager-bench-erasure-") as tmp:
        path = Path(tmp) / "agent.duckdb"
        print(f"building {args.memories:,} memories ...", file=sys.stderr)
        t = time.perf_counter()
        uris = build(path, args.memories)
        print(f"  built in {time.perf_counter() - t:.0f} s", file=sys.stderr)
        print("before: the old per-forget path ...", file=sys.stderr)
        old = before(path, uris, args.old_path_forgets)
        print(f"after: {args.forgets} forgets ...", file=sys.stderr)
        new = after(path, uris, args.forgets, first=args.old_path_forgets)
        print("forget-heavy ...", file=sys.stderr)
        heavy = forget_heavy(path, uris, args.heavy_share, args.heavy_rate, first=args.old_path_forgets + args.forgets)
    result = {
        "memories": args.memories,
        "forgets": args.forgets,
        "before": old,
        "after": new,
        "forget_heavy": heavy,
        "median_old_forget_s": round(statistics.median([old["p50_ms"]]) / 1000, 2),
    }
    md = table(result)
    print(md)
    if not args.no_write:
        write_results("erasure", result, md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
