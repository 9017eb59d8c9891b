"""Whole ``retrieve`` at 1M memories with the BM25 kernel as it ships and as it was, side by side.

    HF_HUB_OFFLINE=1 python -m benchmarks.bench_retrieve_kernel_before_after [--before REV] [--size 1000000]
        [--store DIR]

``bench_lexical_kernel --before`` times the lexical lane's search alone; this asks what a kernel
change buys a page fault, where the semantic lane's search runs beside the lexical one in a helper
thread (``lanes.aside``) and both compete for the two cores' caches.

One process, one store (bench_scale's corpus and vectors; ``--store DIR`` reuses a directory kept
by ``bench_scale --keep``, which holds ``scale-N.duckdb`` and ``queries.npz``). The kernel of
``REV`` (default: the revision before the last commit that changed index/_bm25.c) is compiled with
pyproject's flags (``bench_lexical_kernel.compile_kernel_at``); the two kernels take turns as the
lexical index's kernel, in blocks of 50 questions, the order alternating per block, for two rounds
of the 1,986 LoCoMo questions. Every retrieval's snippets must be the same with either kernel; the
run fails otherwise. Results: results/retrieve_kernel_before_after.{json,md}.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import mempager
from mempager import PagerConfig
from mempager.index import lexical_search

from ._common import LOCOMO, git_state, percentiles, write_results
from .bench_hnsw import embeddings, locomo_texts
from .bench_lexical_kernel import compile_kernel_at
from .bench_retrieve import ACTOR, NameOnly
from .bench_scale import build

BLOCK = 50
ROUNDS = 2


def log(message: str) -> None:
    print(f"[bench_retrieve_kernel_before_after {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def before_last_kernel_change() -> str:
    """The revision just before the last commit that changed index/_bm25.c."""
    root = Path(__file__).resolve().parents[1]
    last = subprocess.run(
        ["git", "log", "-1", "--format=%h", "--", "index/_bm25.c"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()
    return f"{last}^"


def compare(p: Any, questions: list[str], kernels: dict[str, Any]) -> tuple[dict[str, list[float]], int]:
    """Each kernel's retrieve times (ms), blocks alternating; and how many retrievals differed."""
    state = p.lexical.index._state
    took: dict[str, list[float]] = {name: [] for name in kernels}
    differ = 0
    for round_ in range(ROUNDS):
        for lo in range(0, len(questions), BLOCK):
            names = list(kernels) if (lo // BLOCK + round_) % 2 == 0 else list(kernels)[::-1]
            shown: dict[str, list[list[str]]] = {}
            for name in names:
                state.kernel = kernels[name]  # the lexical index's scratch kernel (lexical_search.kernel_of)
                shown[name] = []
                for q in questions[lo : lo + BLOCK]:
                    start = time.perf_counter()
                    snippets = p.retrieve(q)
                    took[name].append((time.perf_counter() - start) * 1000)
                    shown[name].append([s.uri for s in snippets])
            differ += sum(a != b for a, b in zip(shown["before"], shown["after"], strict=True))
    return took, differ


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--before", metavar="REV", help="the kernel's revision to compare (default: before its last change)"
    )
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--store", type=Path, help="a bench_scale --keep directory holding scale-SIZE.duckdb")
    parser.add_argument("--locomo", type=Path, default=LOCOMO)
    parser.add_argument("--no-write", action="store_true", help="print the table, write no results files")
    args = parser.parse_args()
    rev = args.before or before_last_kernel_change()
    turns, questions = locomo_texts(args.locomo)
    docs, qvecs = embeddings(args.locomo)
    with tempfile.TemporaryDirectory(prefix="mempager-retrieve-kernel-") as scratch:
        work = Path(scratch)
        path = (args.store or work) / f"scale-{args.size}.duckdb"
        if args.store is None:
            log(f"building {args.size:,} memories")
            build(path, turns, docs, args.size)
        log("opening (indexes built on first open)")
        p = mempager.open(path, ACTOR, config=PagerConfig(), embedder=NameOnly())  # type: ignore[arg-type]
        p.workers.stop()
        lookup = {q: v for q, v in zip(questions, qvecs, strict=True)}
        p.semantic.embed_query = lookup.__getitem__  # the query embedding is not what we time
        kernels = {
            "before": compile_kernel_at(rev, work)(prune_from=lexical_search.PRUNE_FROM),
            "after": lexical_search.kernel_of(p.lexical.index._state),
        }
        for q in questions[:BLOCK]:  # warm both
            for kernel in kernels.values():
                p.lexical.index._state.kernel = kernel
                p.retrieve(q)
        log(f"timing {ROUNDS} x {len(questions):,} questions per kernel")
        took, differ = compare(p, questions, kernels)
        p.lexical.index._state.kernel = kernels["after"]
        p.close()
    if differ:
        raise SystemExit(f"{differ} retrievals differ between the two kernels: the change is not exact")
    stats = {name: percentiles(samples) for name, samples in took.items()}
    code = git_state()
    b, a = stats["before"], stats["after"]
    text = "\n".join(
        [
            f"| `retrieve`, {args.size:,} memories (query embedding excluded) | kernel at {rev} | kernel as shipped "
            "| before / after |",
            "|---|---|---|---|",
            f"| p50 ms | {b['p50_ms']} | {a['p50_ms']} | {b['p50_ms'] / a['p50_ms']:.2f}x |",
            f"| p95 ms | {b['p95_ms']} | {a['p95_ms']} | {b['p95_ms'] / a['p95_ms']:.2f}x |",
            f"| retrievals with other snippets | | {differ} of {len(took['after'])} | |",
            "",
            f"bench_scale's corpus and vectors, {len(questions):,} LoCoMo questions x {ROUNDS} rounds per kernel, "
            f"blocks of {BLOCK} alternating, one process and one open store; pager defaults (the semantic lane "
            "searches in a helper thread beside the lexical lane). The kernel at "
            f"{rev}: that revision's index/_bm25.c, built with the same flags. Code measured: commit "
            f"{code['commit']}"
            + (f" with uncommitted changes in {', '.join(code['uncommitted'])}." if code["uncommitted"] else "."),
        ]
    )
    if not args.no_write:
        write_results("retrieve_kernel_before_after", {"before": rev, "size": args.size, "latency": stats}, text)
    print(text)


if __name__ == "__main__":
    main()
