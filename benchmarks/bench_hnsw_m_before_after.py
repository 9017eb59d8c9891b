"""The semantic lane's graph at M=16 (the old default, ef 128 + 600 per million vectors) against M=32
(the default since, ef 96 + 240 per million), side by side on the same store.

    HF_HUB_OFFLINE=1 python -m benchmarks.bench_hnsw_m_before_after [--sizes 100000 1000000] [--store DIR]
        [--work DIR] [--queries N] [--no-write]

Per size: bench_scale's corpus and vectors (``--store DIR`` reuses a ``bench_scale --keep``
directory), copied once per M into ``--work`` (kept there, so a second run skips the graph builds:
~6 and ~8 minutes at 1M) and opened with that M, each graph built from the store and saved the way
a pager does. Then, both pagers open in one process:

* the whole ``retrieve`` (query embedding excluded: looked up), the two taking turns in blocks of
  50 questions, the order alternating per block, two rounds; the snippets of the two differ where
  the graphs find other neighbours, which recall measures;
* the semantic lane's top 10 against an exact scan of the same vectors (first 500 questions), at
  each M's default width and across a sweep of widths (search alone).

Results: results/hnsw_m_before_after.{json,md,png}.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import mempager
from mempager import PagerConfig
from mempager.index.manifest import read_manifest

from . import scale_stores
from ._common import RESULTS, git_state, percentiles, write_results
from .bench_fusion_before_after import _shown
from .bench_retrieve import ACTOR, MODEL, NameOnly

BLOCK = 50
ROUNDS = 2
K = 10
RECALL_QUERIES = 500
MS = (16, 32)  # before, after
SWEEP = {16: (64, 128, 256, 400, 600, 800), 32: (64, 96, 128, 160, 200, 240, 320)}


def log(message: str) -> None:
    print(f"[bench_hnsw_m_before_after {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def open_with(source: Path, work: Path, m: int) -> tuple[Any, dict[str, Any]]:
    """A pager on a copy of ``source`` in ``work/m<M>`` whose graph has ``m`` links a node (built and
    saved on first use)."""
    path = work / f"m{m}" / source.name
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        log(f"copying {source.name} for M={m}")
        shutil.copyfile(source, path)
    start = time.perf_counter()
    config = PagerConfig(hnsw_m=m)
    p = mempager.open(path, ACTOR, config=config, embedder=NameOnly())  # type: ignore[arg-type]
    opened_s = time.perf_counter() - start
    how = p.semantic.opened_how
    if p.semantic.index.M != m:
        raise SystemExit(f"{path}: its saved graph has M={p.semantic.index.M}; remove {path}.index to rebuild")
    if how.startswith("rebuilt"):
        log(f"M={m}: graph built in {opened_s:.0f} s; saving")
        p.close()  # saved as a pager saves it, then opened again from the files
        p = mempager.open(path, ACTOR, config=config, embedder=NameOnly())  # type: ignore[arg-type]
    p.workers.stop()
    index_dir = p.semantic.directory
    manifest = read_manifest(index_dir) if index_dir is not None else None
    graph_mib = round(manifest.files["index"].size / 2**20, 1) if manifest is not None else None
    facts = {"built_s": round(opened_s, 1) if how.startswith("rebuilt") else None, "graph_file_mib": graph_mib}
    return p, facts


def exact_truth(p: Any, queries: np.ndarray) -> list[set[int]]:
    index = p.semantic.index
    labels = index.labels()
    vectors = np.empty((len(labels), index.dim), np.float32)
    for lo in range(0, len(labels), 100_000):
        vectors[lo : lo + 100_000] = index.get_vectors(labels[lo : lo + 100_000])
    unit = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    truth: list[set[int]] = []
    for lo in range(0, len(unit), 50):
        scores = unit[lo : lo + 50] @ vectors.T
        best = np.argpartition(-scores, K, axis=1)[:, :K]
        truth += [set(labels[row].tolist()) for row in best]
    return truth


def recall_at(p: Any, queries: np.ndarray, truth: list[set[int]], ef: int | None) -> dict[str, float]:
    """Recall@10 of the lane's top 10 and its search p50, at width ``ef`` (None: the default)."""
    index = p.semantic.index
    saved = (index.ef, index.ef_per_million)
    if ef is not None:
        index.ef_per_million, index.ef = 0, ef
    searched = index.search_ef
    took, hits = [], 0
    try:
        for vector, want in zip(queries, truth, strict=True):
            start = time.perf_counter()
            found = p.semantic.search_vector(vector, K)
            took.append((time.perf_counter() - start) * 1e3)
            hits += len(want & {label for label, _ in found})
    finally:
        index.ef, index.ef_per_million = saved
    return {"ef": searched, "recall_at_10": round(hits / (K * len(truth)), 4), "search_p50_ms": percentiles(took)["p50_ms"]}


def compare(source: Path, work: Path, questions: list[str], qvecs: np.ndarray) -> dict[str, Any]:
    pagers: dict[int, Any] = {}
    facts: dict[int, dict[str, Any]] = {}
    for m in MS:
        pagers[m], facts[m] = open_with(source, work, m)
    lookup = {q: v for q, v in zip(questions, qvecs, strict=True)}
    for p in pagers.values():
        p.semantic.embed_query = lookup.__getitem__  # the query embedding is not what we time
    for q in questions[:BLOCK]:
        for p in pagers.values():
            p.retrieve(q)
    took: dict[int, list[float]] = {m: [] for m in MS}
    differ = 0
    log(f"timing {ROUNDS} x {len(questions):,} retrieves per graph, blocks of {BLOCK} alternating")
    for round_ in range(ROUNDS):
        for lo in range(0, len(questions), BLOCK):
            order = list(MS) if (lo // BLOCK + round_) % 2 == 0 else list(MS)[::-1]
            shown: dict[int, list[Any]] = {}
            for m in order:
                shown[m] = []
                for q in questions[lo : lo + BLOCK]:
                    start = time.perf_counter()
                    snippets = pagers[m].retrieve(q)
                    took[m].append((time.perf_counter() - start) * 1e3)
                    shown[m].append([s[0] for s in _shown(snippets)])
            differ += sum(a != b for a, b in zip(shown[MS[0]], shown[MS[1]], strict=True))
    log("recall against an exact scan")
    queries = qvecs[:RECALL_QUERIES]
    truth = exact_truth(pagers[MS[0]], queries)
    graphs: dict[str, Any] = {}
    for m, p in pagers.items():
        graphs[str(m)] = {
            **facts[m],
            "default": recall_at(p, queries, truth, None),
            "sweep": [recall_at(p, queries, truth, ef) for ef in SWEEP[m]],
        }
    n = len(pagers[MS[0]].semantic)
    for p in pagers.values():
        p.close()
    return {
        "memories": n,
        "retrieve": {str(m): percentiles(took[m]) for m in MS},
        "other_snippets": differ,
        "retrievals": len(took[MS[0]]),
        "graphs": graphs,
    }


def report(rows: list[dict[str, Any]], questions: int) -> str:
    head = "| | " + " | ".join(f"{r['memories']:,}: M=16 / M=32" for r in rows) + " |"
    lines = [head, "|---" * (len(rows) + 1) + "|"]

    def both(fn: Any) -> str:
        return " | ".join(f"{fn(r, '16')} / {fn(r, '32')}" for r in rows)

    lines += [
        f"| `retrieve` p50 ms | {both(lambda r, m: r['retrieve'][m]['p50_ms'])} |",
        f"| `retrieve` p95 ms | {both(lambda r, m: r['retrieve'][m]['p95_ms'])} |",
        "| `retrieve` p50, M=16 / M=32 | "
        + " | ".join(f"{r['retrieve']['16']['p50_ms'] / r['retrieve']['32']['p50_ms']:.2f}x" for r in rows)
        + " |",
        f"| search width (ef) in use | {both(lambda r, m: r['graphs'][m]['default']['ef'])} |",
        f"| semantic recall@10 vs exact | {both(lambda r, m: r['graphs'][m]['default']['recall_at_10'])} |",
        f"| semantic search alone, p50 ms | {both(lambda r, m: r['graphs'][m]['default']['search_p50_ms'])} |",
        f"| saved graph file, MiB | {both(lambda r, m: r['graphs'][m]['graph_file_mib'])} |",
        "| retrievals whose snippets differ | "
        + " | ".join(f"{r['other_snippets']} of {r['retrievals']}" for r in rows)
        + " |",
        "",
        "Width sweep (semantic search alone, k=10): recall@10 (search p50 ms) at each ef.",
        "",
    ]
    for r in rows:
        for m in ("16", "32"):
            cells = ", ".join(
                f"ef {s['ef']}: {s['recall_at_10']} ({s['search_p50_ms']})" for s in r["graphs"][m]["sweep"]
            )
            lines.append(f"- {r['memories']:,}, M={m}: {cells}")
    code = git_state()
    lines += [
        "",
        f"{questions:,} LoCoMo questions x {ROUNDS} rounds per graph, blocks of {BLOCK} alternating, one process, "
        "both pagers open (bench_scale's corpus and vectors, one store copied per M, each graph built from it "
        "and saved as a pager does); pager defaults otherwise. Recall: the lane's top 10 vs an exact scan "
        f"(numpy) of the same vectors, first {RECALL_QUERIES} questions. Query embedding excluded. Code measured: "
        f"commit {code['commit']}"
        + (f" with uncommitted changes in {', '.join(code['uncommitted'])}." if code["uncommitted"] else "."),
        "",
        "![recall against search time per M](hnsw_m_before_after.png)",
    ]
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(rows), figsize=(5.5 * len(rows), 4), squeeze=False)
    for ax, r in zip(axes[0], rows, strict=True):
        for m, colour in (("16", "tab:grey"), ("32", "tab:blue")):
            sweep = r["graphs"][m]["sweep"]
            ax.plot([s["search_p50_ms"] for s in sweep], [s["recall_at_10"] for s in sweep], "o-", color=colour,
                    label=f"M={m}")
            for s in sweep:
                ax.annotate(str(s["ef"]), (s["search_p50_ms"], s["recall_at_10"]), fontsize=7,
                            textcoords="offset points", xytext=(3, -9))
            d = r["graphs"][m]["default"]
            ax.plot([d["search_p50_ms"]], [d["recall_at_10"]], "*", color=colour, markersize=14)
        ax.axhline(0.95, color="tab:red", linewidth=0.8, linestyle="--")
        ax.set_title(f"{r['memories']:,} memories (star: the default width)")
        ax.set_xlabel("semantic search p50, ms (labels: ef)")
        ax.set_ylabel("recall@10 vs exact")
        ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    scale_stores.add_arguments(parser, [100_000, 1_000_000])
    parser.add_argument("--work", type=Path, help="keep each M's store copy and graph here (default: temporary)")
    args = parser.parse_args()
    work = scale_stores.workload(args)
    rows = []
    with tempfile.TemporaryDirectory(prefix="mempager-hnsw-m-") as scratch:
        keep = args.work or Path(scratch) / "graphs"
        for source in scale_stores.stores(args, work, Path(scratch), log):
            rows.append(compare(source, keep / source.stem, work.questions, work.vectors))
    text = report(rows, len(work.questions))
    if not args.no_write:
        write_results("hnsw_m_before_after", {"model": MODEL, "sizes": rows}, text)
        plot(rows, RESULTS / "hnsw_m_before_after.png")
    print(text)


if __name__ == "__main__":
    main()
