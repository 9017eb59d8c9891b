"""Score fusion in the compiled kernel (pager/lanes/_fuse.c) against its numpy path, side by side.

    HF_HUB_OFFLINE=1 python -m benchmarks.bench_fusion_before_after [--sizes 100000 1000000] [--store DIR]
        [--queries N] [--no-write]

Two measures per size, one process and one open store (bench_scale's corpus and vectors; ``--store
DIR`` reuses a ``bench_scale --keep`` directory, otherwise each size is built in a temporary one):

* ``fuse_order`` alone, on the lanes and completions of real page faults (captured from the
  retrieves of the questions), kernel and numpy path taking turns question by question; every
  record compared.
* the whole ``retrieve``, with the retriever's fusion the kernel or the numpy path in blocks of 50
  questions, the order alternating per block, two rounds; every retrieval's snippets compared
  (uri, score, lanes), with the retriever's clock held still so recency cannot differ.

Query embedding excluded (looked up). Results: results/fusion_before_after.{json,md}.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

import mempager
from mempager import PagerConfig
from mempager.lanes import fused, retrieval

from . import scale_stores
from ._common import git_state, percentiles, write_results
from .bench_retrieve import ACTOR, NameOnly

BLOCK = 50
ROUNDS = 2
PATHS = {"numpy": fused._fuse_numpy, "kernel": fused.fuse_order}


def log(message: str) -> None:
    print(f"[bench_fusion_before_after {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _shown(snippets: list[Any]) -> list[tuple[Any, ...]]:
    return [(s.uri, s.score, tuple((k, h.rank, h.score) for k, h in s.lanes.items())) for s in snippets]


def time_size(path: Path, questions: list[str], qvecs: np.ndarray) -> dict[str, Any]:
    log(f"opening {path.name}")
    p = mempager.open(path, ACTOR, config=PagerConfig(), embedder=NameOnly())  # type: ignore[arg-type]
    p.workers.stop()
    lookup = {q: v for q, v in zip(questions, qvecs, strict=True)}
    p.semantic.embed_query = lookup.__getitem__  # the query embedding is not what we time
    now = datetime.now(timezone.utc)
    p.retriever.clock = lambda: now  # both paths see the same recency
    r = p.retriever
    captured: list[tuple[Any, Any]] = []
    real_fuse = r.fuse
    r.fuse = lambda lanes, completions: captured.append((lanes, completions)) or real_fuse(lanes, completions)
    for q in questions:
        p.retrieve(q)
    del r.fuse
    cfg = p.config
    alone: dict[str, list[float]] = {name: [] for name in PATHS}
    differ_alone = 0
    for i, (lanes, completions) in enumerate(captured):
        got = {}
        for name in list(PATHS) if i % 2 == 0 else list(PATHS)[::-1]:
            start = time.perf_counter()
            order = PATHS[name](lanes, completions, cfg.lane_weights, cfg.semantic_floor)
            alone[name].append((time.perf_counter() - start) * 1e3)
            got[name] = order.records()
        differ_alone += got["numpy"] != got["kernel"]
    log(f"timing {ROUNDS} x {len(questions):,} retrieves per path, blocks of {BLOCK} alternating")
    whole: dict[str, list[float]] = {name: [] for name in PATHS}
    differ = 0
    try:
        for round_ in range(ROUNDS):
            for lo in range(0, len(questions), BLOCK):
                names = list(PATHS) if (lo // BLOCK + round_) % 2 == 0 else list(PATHS)[::-1]
                shown: dict[str, list[Any]] = {}
                for name in names:
                    retrieval.fuse_order = PATHS[name]  # what Retriever.fuse calls
                    shown[name] = []
                    for q in questions[lo : lo + BLOCK]:
                        start = time.perf_counter()
                        snippets = p.retrieve(q)
                        whole[name].append((time.perf_counter() - start) * 1e3)
                        shown[name].append(_shown(snippets))
                differ += sum(a != b for a, b in zip(shown["numpy"], shown["kernel"], strict=True))
    finally:
        retrieval.fuse_order = fused.fuse_order
    n = len(p.semantic)
    p.close()
    return {
        "memories": n,
        "fuse_order": {name: percentiles(v) for name, v in alone.items()},
        "fuse_order_records_differing": differ_alone,
        "retrieve": {name: percentiles(v) for name, v in whole.items()},
        "retrievals_differing": differ,
        "retrievals_compared": len(whole["kernel"]),
    }


def table(rows: list[dict[str, Any]], questions: int) -> str:
    lines = [
        "| memories | `fuse_order` p50 µs, numpy / kernel | ratio | `retrieve` p50 ms, numpy / kernel | ratio "
        "| `retrieve` p95 ms, numpy / kernel | answers differing |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        fa, fb = r["fuse_order"]["numpy"]["p50_ms"] * 1e3, r["fuse_order"]["kernel"]["p50_ms"] * 1e3
        ra, rb = r["retrieve"]["numpy"], r["retrieve"]["kernel"]
        lines.append(
            f"| {r['memories']:,} | {fa:.1f} / {fb:.1f} | {fa / fb:.2f}x | {ra['p50_ms']:.3f} / {rb['p50_ms']:.3f} "
            f"| {ra['p50_ms'] / rb['p50_ms']:.2f}x | {ra['p95_ms']:.3f} / {rb['p95_ms']:.3f} "
            f"| {r['fuse_order_records_differing']} of {questions} fusions, {r['retrievals_differing']} of "
            f"{r['retrievals_compared']} retrievals |"
        )
    code = git_state()
    lines += [
        "",
        f"{questions:,} LoCoMo questions per size; bench_scale's corpus and vectors; pager defaults; query embedding "
        f"excluded. `fuse_order`: the lanes and completions of each question's page fault, both paths in turn per "
        f"question. `retrieve`: the retriever's fusion swapped between the two, blocks of {BLOCK} questions "
        f"alternating, {ROUNDS} rounds, one process and one open store. Code measured: commit {code['commit']}"
        + (f" with uncommitted changes in {', '.join(code['uncommitted'])}." if code["uncommitted"] else "."),
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    scale_stores.add_arguments(parser, [100_000, 1_000_000])
    args = parser.parse_args()
    work = scale_stores.workload(args)
    questions = work.questions
    with tempfile.TemporaryDirectory(prefix="mempager-fusion-") as scratch:
        rows = [
            time_size(path, questions, work.vectors) for path in scale_stores.stores(args, work, Path(scratch), log)
        ]
    if any(r["fuse_order_records_differing"] or r["retrievals_differing"] for r in rows):
        raise SystemExit("the kernel and the numpy path answered differently: the kernel is not exact")
    text = table(rows, len(questions))
    if not args.no_write:
        write_results("fusion_before_after", {"sizes": rows}, text)
    print(text)


if __name__ == "__main__":
    main()
