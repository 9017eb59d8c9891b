"""Whole ``retrieve`` at 1M memories with the saved vector rows read in one compiled call (index/_rows.c)
and with the per-row ``os.preadv`` loop it replaced patched back in, side by side.

    HF_HUB_OFFLINE=1 python -m benchmarks.bench_row_reads_before_after [--sizes 1000000] [--store DIR]
        [--queries N] [--no-write]

From ``RESIDENT_MAX_ROWS`` vectors the HNSW index reads the rows a search re-scores (~50) and a
completion scores (~40) from its saved file (``index.hnsw_rows.FileRows``). One process, one store
(bench_scale's corpus and vectors; ``--store DIR`` reuses a ``bench_scale --keep`` directory), the
two ways of reading taking turns in blocks of 50 questions, the order alternating per block, two
rounds; every retrieval's snippets compared (uri, score, lanes), the retriever's clock held still.
Query embedding excluded (looked up). Results: results/row_reads_before_after.{json,md}.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

import mempager
from mempager import PagerConfig
from mempager.errors import IndexStale
from mempager.index import hnsw_rows

from . import scale_stores
from ._common import git_state, percentiles, write_results
from .bench_fusion_before_after import _shown
from .bench_retrieve import ACTOR, NameOnly

BLOCK = 50
ROUNDS = 2
COMPILED = hnsw_rows.FileRows._read


def preadv_loop(self: Any, rows: np.ndarray, out: np.ndarray) -> None:
    """``FileRows._read`` before index/_rows.c: one ``os.preadv`` a row from Python."""
    if self._record_of is not None:
        rows = self._record_of[rows]
    if len(rows) > hnsw_rows._PREAD_MAX:  # an exact scan's many rows: the mapping, as both do
        COMPILED(self, rows, out)
        return
    fd, at, width, stride = self._fd, self._at, self._width, self._stride
    for i, row in enumerate(rows.tolist()):
        if os.preadv(fd, [out[i].data], at + row * stride) != width:
            raise IndexStale(f"short read of row {row} from the saved vectors; rebuild the index")


PATHS = {"preadv_loop": preadv_loop, "compiled": COMPILED}


def log(message: str) -> None:
    print(f"[bench_row_reads_before_after {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def compare(path: Path, questions: list[str], qvecs: np.ndarray) -> dict[str, Any]:
    log(f"opening {path.name}")
    p = mempager.open(path, ACTOR, config=PagerConfig(), embedder=NameOnly())  # type: ignore[arg-type]
    p.workers.stop()
    if not isinstance(p.semantic.index._state.vectors, hnsw_rows.FileRows):
        raise SystemExit(f"{path.name}: the index keeps its rows in memory here; use a size above the resident limit")
    lookup = {q: v for q, v in zip(questions, qvecs, strict=True)}
    p.semantic.embed_query = lookup.__getitem__  # the query embedding is not what we time
    now = datetime.now(timezone.utc)
    p.retriever.clock = lambda: now  # both ways see the same recency
    for q in questions[:BLOCK]:
        for read in PATHS.values():
            hnsw_rows.FileRows._read = read  # type: ignore[method-assign]
            p.retrieve(q)
    took: dict[str, list[float]] = {name: [] for name in PATHS}
    differ = 0
    log(f"timing {ROUNDS} x {len(questions):,} retrieves per way, blocks of {BLOCK} alternating")
    try:
        for round_ in range(ROUNDS):
            for lo in range(0, len(questions), BLOCK):
                names = list(PATHS) if (lo // BLOCK + round_) % 2 == 0 else list(PATHS)[::-1]
                shown: dict[str, list[Any]] = {}
                for name in names:
                    hnsw_rows.FileRows._read = PATHS[name]  # type: ignore[method-assign]
                    shown[name] = []
                    for q in questions[lo : lo + BLOCK]:
                        start = time.perf_counter()
                        snippets = p.retrieve(q)
                        took[name].append((time.perf_counter() - start) * 1e3)
                        shown[name].append(_shown(snippets))
                differ += sum(a != b for a, b in zip(shown["preadv_loop"], shown["compiled"], strict=True))
    finally:
        hnsw_rows.FileRows._read = COMPILED  # type: ignore[method-assign]
    n = len(p.semantic)
    p.close()
    return {
        "memories": n,
        "retrieve": {k: percentiles(v) for k, v in took.items()},
        "differ": differ,
        "n": len(took["compiled"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    scale_stores.add_arguments(parser, [1_000_000])
    args = parser.parse_args()
    work = scale_stores.workload(args)
    questions = work.questions
    with tempfile.TemporaryDirectory(prefix="mempager-rows-") as scratch:
        paths = list(scale_stores.stores(args, work, Path(scratch), log))
        if len(paths) != 1:
            raise SystemExit("one size at a time: its rows must be read from the saved file (above 262,144)")
        row = compare(paths[0], questions, work.vectors)
    if row["differ"]:
        raise SystemExit(f"{row['differ']} retrievals differ between the two ways of reading: not the same bytes")
    a, b = row["retrieve"]["preadv_loop"], row["retrieve"]["compiled"]
    code = git_state()
    text = "\n".join(
        [
            "| `retrieve`, query embedding excluded | one `os.preadv` a row (before) | one compiled call (after) "
            "| before / after |",
            "|---|---|---|---|",
            f"| {row['memories']:,} memories, p50 ms | {a['p50_ms']} | {b['p50_ms']} "
            f"| {a['p50_ms'] / b['p50_ms']:.2f}x |",
            f"| p95 ms | {a['p95_ms']} | {b['p95_ms']} | {a['p95_ms'] / b['p95_ms']:.2f}x |",
            f"| retrievals with other snippets | | {row['differ']} of {row['n']} | |",
            "",
            f"{len(questions):,} LoCoMo questions x {ROUNDS} rounds per way, blocks of {BLOCK} alternating, one "
            "process and one open store (bench_scale's corpus and vectors); pager defaults. Code measured: commit "
            f"{code['commit']}"
            + (f" with uncommitted changes in {', '.join(code['uncommitted'])}." if code["uncommitted"] else "."),
        ]
    )
    if not args.no_write:
        write_results("row_reads_before_after", {"size": row["memories"], **row}, text)
    print(text)


if __name__ == "__main__":
    main()
