"""`retrieve` before and after this round's hot-path changes, side by side in one process, on one store.

    HF_HUB_OFFLINE=1 python -m benchmarks.bench_scale --sizes 1000000 --keep DIR --no-write   # makes DIR
    HF_HUB_OFFLINE=1 python -m benchmarks.bench_before_after --keep DIR [--queries 1986]

Reads each ``scale-<n>.duckdb`` (with its saved indexes) and ``queries.npz`` that ``bench_scale
--keep DIR`` left in DIR, opens the pager once per store and answers every question twice, in
alternating blocks of 50 so load drifts hit both alike:

* before: the lexical lane searches with its numpy implementation (``lexical_context.numpy_scored``,
  the code the compiled kernel replaced and is held to), and the time lane's windows and span scan
  every row of the mirror (the code ``store/time_order.py`` replaced);
* after: the code as it ships.

Both answer the same pages (checked: every question's snippets, in order, must be equal). The
query embedding is excluded (each question's vector is looked up), as in bench_scale.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

import mempager
from mempager import PagerConfig
from mempager.index import lexical
from mempager.index.lexical_context import numpy_scored
from mempager.store.mirror import ActorTable

from ._common import git_state, percentiles, write_results
from .bench_retrieve import ACTOR, NameOnly

BLOCK = 50


def log(message: str) -> None:
    print(f"[bench_before_after {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _scan_between(self: ActorTable, since: float, until: float, limit: int) -> np.ndarray:
    with self.lock:  # the scan store/time_order.py replaced
        n = self.size
        created = self.num["created"][:n]
        rows = np.flatnonzero(self.num["alive"][:n] & (created >= since) & (created < until))
        order = np.lexsort((-self.labels[rows], -created[rows]))[:limit]
        return self.labels[rows[order]].astype(np.int64)


def _scan_span(self: ActorTable) -> tuple[float, float] | None:
    with self.lock:
        n = self.size
        created = self.num["created"][:n][self.num["alive"][:n]]
        return (float(created.min()), float(created.max())) if len(created) else None


@contextmanager
def before() -> Iterator[None]:
    """The hot path as it was: numpy lexical search, time windows by scanning every row."""
    saved = lexical.kernel_scored, ActorTable.created_between, ActorTable.created_span
    lexical.kernel_scored = numpy_scored
    ActorTable.created_between = _scan_between  # type: ignore[method-assign]
    ActorTable.created_span = _scan_span  # type: ignore[method-assign]
    try:
        yield
    finally:
        lexical.kernel_scored, ActorTable.created_between, ActorTable.created_span = saved  # type: ignore[method-assign]


def bench_store(path: Path, questions: list[str], qvecs: np.ndarray) -> dict[str, Any]:
    p = mempager.open(path, ACTOR, config=PagerConfig(), embedder=NameOnly())  # type: ignore[arg-type]
    p.workers.stop()
    p.semantic.embed_query = dict(zip(questions, qvecs, strict=True)).__getitem__
    dated = [bool(p.retriever.when.windows(q)) for q in questions]

    def ask(i: int) -> list[str]:
        return [s.uri for s in p.retrieve(questions[i])]

    for i in range(20):  # warm both
        ask(i)
        with before():
            ask(i)
    took: dict[str, list[float]] = {"before": [], "after": []}
    differ = 0
    for lo in range(0, len(questions), BLOCK):
        block = range(lo, min(lo + BLOCK, len(questions)))
        pages: dict[str, list[list[str]]] = {"before": [], "after": []}
        for name in ("before", "after") if (lo // BLOCK) % 2 == 0 else ("after", "before"):
            for i in block:
                start = time.perf_counter()
                if name == "before":
                    with before():
                        pages[name].append(ask(i))
                else:
                    pages[name].append(ask(i))
                took[name].append((time.perf_counter() - start) * 1000)
        differ += sum(a != b for a, b in zip(pages["before"], pages["after"], strict=True))
    mask = np.array(dated)
    out = {
        "memories": len(p.lexical),
        "questions": len(questions),
        "dated_questions": int(mask.sum()),
        "retrieve": {name: percentiles(ms) for name, ms in took.items()},
        "retrieve_dated": {name: percentiles(np.array(ms)[mask].tolist()) for name, ms in took.items()},
        "pages_differing": differ,
    }
    p.close()
    return out


def report(rows: list[dict[str, Any]], notes: str) -> str:
    lines = [
        "| `retrieve` (query embedding excluded) | memories | before p50 / p95 ms | after p50 / p95 ms "
        "| before / after p50 |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        for key, what in (("retrieve", "every question"), ("retrieve_dated", "questions naming a date")):
            b, a = r[key]["before"], r[key]["after"]
            n = r["questions"] if key == "retrieve" else r["dated_questions"]
            lines.append(
                f"| {what} ({n:,}) | {r['memories']:,} | {b['p50_ms']:.3f} / {b['p95_ms']:.3f} | "
                f"{a['p50_ms']:.3f} / {a['p95_ms']:.3f} | {b['p50_ms'] / a['p50_ms']:.2f}x |"
            )
    lines.append("")
    lines.append(
        "Pages differing between before and after: "
        + ", ".join(f"{r['pages_differing']} of {r['questions']:,} at {r['memories']:,}" for r in rows)
        + "."
    )
    return "\n".join(lines) + "\n\n" + notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", type=Path, required=True, help="the directory bench_scale --keep filled")
    parser.add_argument("--queries", type=int, default=0, help="questions (default: all 1,986)")
    parser.add_argument("--no-write", action="store_true", help="print the table, write no results files")
    args = parser.parse_args()
    stores = sorted(args.keep.glob("scale-*.duckdb"), key=lambda path: int(path.stem.split("-")[1]))
    if not stores:
        raise SystemExit(f"no scale-<n>.duckdb in {args.keep}: run bench_scale --keep {args.keep} first")
    with np.load(args.keep / "queries.npz") as data:
        questions, qvecs = [str(q) for q in data["questions"]], data["vectors"]
    if args.queries:
        questions, qvecs = questions[: args.queries], qvecs[: args.queries]
    before_load = os.getloadavg()
    rows = []
    for path in stores:
        log(f"{path.name}: {len(questions):,} questions, before and after interleaved")
        rows.append(bench_store(path, questions, qvecs))
        got = rows[-1]["retrieve"]
        log(f"{path.name}: before {got['before']['p50_ms']} ms, after {got['after']['p50_ms']} ms")
    after_load = os.getloadavg()
    code = git_state()
    notes = (
        f"Stores and questions from bench_scale --keep (its corpus: LoCoMo turn vectors and synthetic mixtures, "
        f"texts with a unique suffix, created at random minutes of two years). Blocks of {BLOCK} questions, the "
        "order of before and after alternating per block. Before = the numpy lexical search and the time lane's "
        "full scans, patched in for the block; after = the shipped code. 1-min/5-min load average "
        f"{before_load[0]:.2f} / {before_load[1]:.2f} before, {after_load[0]:.2f} / {after_load[1]:.2f} after, on "
        f"{os.cpu_count()} cores shared with other work. Code measured: commit {code['commit']}"
        + (f" with uncommitted changes in {', '.join(code['uncommitted'])}." if code["uncommitted"] else ".")
    )
    text = report(rows, notes)
    if not args.no_write:
        write_results("before_after", {"results": rows, "load_average": [list(before_load), list(after_load)]}, text)
    print(text)


if __name__ == "__main__":
    main()
