"""Where a ``retrieve`` spends its time, thread by thread: the critical path at 100k and 1M memories.

    HF_HUB_OFFLINE=1 python -m benchmarks.bench_retrieve_timeline [--sizes 100000 1000000] [--store DIR]
        [--queries N] [--no-write]

A page fault runs on two threads: the semantic lane's HNSW search in a helper (``lanes.aside``), and
the lexical lane's search, the completions, fusion and packing in the caller's thread, which waits
for the helper's hits where the lexical kernel asks for them (``also``). Timing each stage alone
(bench_retrieve's pieces) cannot say which thread a retrieve waits on, nor what the two cost each
other when they run together (the GIL, the cores' shared caches). This times them in place: each
stage of a real ``retrieve`` is wrapped (here, never in the package) and stamped on
``time.perf_counter``, per call, relative to the retrieve's start; the table gives each stage's
median start and median duration, the PNG draws them as one bar per stage on its thread.

The wrappers cost a little (about a microsecond each, ~15 per retrieve): the run also times the
same questions unwrapped, in alternating blocks, and reports both medians.

Stores: bench_scale's corpus and vectors (``--store DIR``: a ``bench_scale --keep`` directory with
``scale-N.duckdb``; otherwise each size is built in a temporary directory first). Query embedding
excluded (each question's MiniLM vector is looked up). Results: results/retrieve_timeline.{json,md,png}.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

import mempager
from mempager import PagerConfig
from mempager.index import lexical_search

from . import scale_stores
from ._common import git_state, percentiles, write_results
from .bench_retrieve import ACTOR, NameOnly

BLOCK = 50
# (key, thread, what it is): the stages drawn and tabled, in the order a retrieve reaches them
STAGES = [
    ("semantic", "helper", "semantic lane: `search_snapshot` (queue snapshot, HNSW search, re-score)"),
    ("knn", "helper", "  of which hnswlib `knn_query`"),
    ("lexical", "caller", "lexical lane: `search_scored` (tokens, BM25 kernel, scores of the other lanes' hits)"),
    ("wait", "caller", "  of which waiting for the semantic hits"),
    ("fill", "caller", "completions: prior + semantic scores of the other hits"),
    ("speaker", "caller", "speaker lane (`spoken_by`)"),
    ("fuse", "caller", "fusion"),
    ("select", "caller", "hydration + packing (`select`)"),
]


def log(message: str) -> None:
    print(f"[bench_retrieve_timeline {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Stamps:
    """Per-retrieve (start, end) of each stage, relative to the retrieve's start (ms)."""

    def __init__(self) -> None:
        self.t0 = 0.0
        self.now: dict[str, tuple[float, float]] = {}
        self.rows: list[dict[str, tuple[float, float]]] = []
        self.totals: list[float] = []

    def timed(self, key: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.now[key] = ((start - self.t0) * 1e3, (time.perf_counter() - self.t0) * 1e3)

        return wrapper

    @contextmanager
    def retrieve(self) -> Iterator[None]:
        self.now = {}
        self.t0 = time.perf_counter()
        yield
        self.totals.append((time.perf_counter() - self.t0) * 1e3)
        self.rows.append(self.now)


class Knn:
    """hnswlib's graph with its ``knn_query`` stamped; everything else passes through."""

    def __init__(self, graph: Any, stamps: Stamps) -> None:
        self._graph = graph
        self.knn_query = stamps.timed("knn", graph.knn_query)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._graph, name)


@contextmanager
def wrapped(p: Any, stamps: Stamps) -> Iterator[None]:
    """The pager's stages stamped (instance attributes and one module function, put back after)."""
    r = p.retriever
    state = r.semantic.index._state
    graph = state.graph
    saved_resolve = lexical_search.resolve
    r._completions.fill = stamps.timed("fill", r._completions.fill)
    r.fuse, r.select = stamps.timed("fuse", r.fuse), stamps.timed("select", r.select)
    r.semantic.search_snapshot = stamps.timed("semantic", r.semantic.search_snapshot)
    r.lexical.search_scored = stamps.timed("lexical", r.lexical.search_scored)
    r.lexical.spoken_by = stamps.timed("speaker", r.lexical.spoken_by)
    lexical_search.resolve = stamps.timed("wait", saved_resolve)  # resolve() is where the lexical search waits
    object.__setattr__(state, "graph", Knn(graph, stamps))
    try:
        yield
    finally:  # the instance attributes go, so the class's methods answer again
        for obj, names in (
            (r._completions, ("fill",)),
            (r, ("fuse", "select")),
            (r.semantic, ("search_snapshot",)),
            (r.lexical, ("search_scored", "spoken_by")),
        ):
            for name in names:
                del obj.__dict__[name]
        lexical_search.resolve = saved_resolve
        object.__setattr__(state, "graph", graph)


def time_size(path: Path, questions: list[str], qvecs: np.ndarray) -> dict[str, Any]:
    log(f"opening {path.name}")
    p = mempager.open(path, ACTOR, config=PagerConfig(), embedder=NameOnly())  # type: ignore[arg-type]
    p.workers.stop()
    lookup = {q: v for q, v in zip(questions, qvecs, strict=True)}
    p.semantic.embed_query = lookup.__getitem__  # the query embedding is not what we time
    aside = bool(p.semantic.searches_aside)
    for q in questions[:BLOCK]:
        p.retrieve(q)
    stamps = Stamps()
    plain: list[float] = []
    log(f"timing {len(questions):,} questions, stamped and plain in alternating blocks")
    for lo in range(0, len(questions), BLOCK):
        block = questions[lo : lo + BLOCK]
        order = ("stamped", "plain") if (lo // BLOCK) % 2 == 0 else ("plain", "stamped")
        for how in order:
            if how == "plain":
                for q in block:
                    start = time.perf_counter()
                    p.retrieve(q)
                    plain.append((time.perf_counter() - start) * 1e3)
                continue
            with wrapped(p, stamps):
                for q in block:
                    with stamps.retrieve():
                        p.retrieve(q)
    n = len(p.semantic)
    p.close()
    stages: dict[str, dict[str, float]] = {}
    for key, _, _ in STAGES:
        seen = [row[key] for row in stamps.rows if key in row]
        if not seen:
            continue
        stages[key] = {
            "start_ms": round(statistics.median(s for s, _ in seen), 4),
            "duration_ms": round(statistics.median(e - s for s, e in seen), 4),
            "end_ms": round(statistics.median(e for _, e in seen), 4),
            "share_of_calls": round(len(seen) / len(stamps.rows), 3),
        }
    return {
        "memories": n,
        "semantic_aside": aside,
        "stamped": percentiles(stamps.totals),
        "plain": percentiles(plain),
        "stages": stages,
    }


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(rows), 1, figsize=(10, 2.4 * len(rows) + 0.9), squeeze=False)
    colors = dict(zip([k for k, _, _ in STAGES], plt.get_cmap("tab10").colors, strict=False))
    for ax, row in zip(axes[:, 0], rows, strict=True):
        lanes = {"helper": 1.0, "caller": 0.0}
        for key, thread, _ in STAGES:
            stage = row["stages"].get(key)
            if stage is None:
                continue
            inner = key in ("knn", "wait")  # drawn thinner, inside the stage that holds them
            height = 0.35 if inner else 0.7
            ax.barh(
                lanes[thread],
                stage["duration_ms"],
                left=stage["start_ms"],
                height=height,
                color=colors[key],
                alpha=1.0 if inner else 0.75,
                label=key,
                edgecolor="black" if inner else None,
            )
        ax.axvline(row["stamped"]["p50_ms"], color="black", linestyle=":", label="retrieve p50 (stamped)")
        ax.set_yticks([0, 1], ["caller thread", "helper thread"])
        ax.set_title(f"{row['memories']:,} memories: median start and duration of each stage")
        ax.set_xlabel("ms after the retrieve started")
    handles, labels = axes[-1, 0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, ncol=len(labels), loc="lower center")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def table(rows: list[dict[str, Any]], questions: int) -> str:
    sizes = " | ".join(f"{r['memories']:,}: start / duration ms" for r in rows)
    lines = [f"| stage | thread | {sizes} |", "|---|---|" + "---|" * len(rows)]
    for key, thread, what in STAGES:
        cells = []
        for r in rows:
            s = r["stages"].get(key)
            cells.append("—" if s is None else f"{s['start_ms']:.3f} / {s['duration_ms']:.3f}")
        lines.append(f"| {what} | {thread} | {' | '.join(cells)} |")
    lines.append(
        "| **`retrieve` p50 / p95 ms, stamped** | | "
        + " | ".join(f"{r['stamped']['p50_ms']:.3f} / {r['stamped']['p95_ms']:.3f}" for r in rows)
        + " |"
    )
    lines.append(
        "| **`retrieve` p50 / p95 ms, plain (no stamps, alternating blocks)** | | "
        + " | ".join(f"{r['plain']['p50_ms']:.3f} / {r['plain']['p95_ms']:.3f}" for r in rows)
        + " |"
    )
    code = git_state()
    lines += [
        "",
        f"{questions:,} LoCoMo questions per size, stamped and plain in alternating blocks of {BLOCK}; bench_scale's "
        "corpus and vectors; pager defaults (the semantic lane searches in a helper thread from 50,000 vectors); "
        "query embedding excluded. Start: median time after the retrieve began; duration: median of the stage's "
        "own time (medians of each column, so a row's start + duration need not equal its median end). "
        "`wait` is the lexical search's call for the semantic hits (``lexical_search.resolve``): its duration "
        "is what the caller waited for the helper. The speaker lane runs only when the question names a "
        "speaker of the index. 1-min load average "
        f"{os.getloadavg()[0]:.2f} at the end. Code measured: commit {code['commit']}"
        + (f" with uncommitted changes in {', '.join(code['uncommitted'])}." if code["uncommitted"] else "."),
        "",
        "![timeline](retrieve_timeline.png)",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    scale_stores.add_arguments(parser, [100_000, 1_000_000])
    args = parser.parse_args()
    work = scale_stores.workload(args)
    questions = work.questions
    with tempfile.TemporaryDirectory(prefix="mempager-timeline-") as scratch:
        rows = [
            time_size(path, questions, work.vectors) for path in scale_stores.stores(args, work, Path(scratch), log)
        ]
    text = table(rows, len(questions))
    if not args.no_write:
        out = write_results("retrieve_timeline", {"sizes": rows}, text)
        plot(rows, out.parent / "retrieve_timeline.png")
    print(text)


if __name__ == "__main__":
    main()
