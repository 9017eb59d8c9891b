"""Cost curves from 10k to 1M memories: ingest, memory, cold open, retrieve, page, HNSW recall.

    HF_HUB_OFFLINE=1 python -m benchmarks.bench_scale [--sizes 10000 100000 1000000] [--queries 1986]

Corpus: the 5,882 LoCoMo turns with their real all-MiniLM-L6-v2 vectors, then (to reach each size)
*distinct* synthetic sentence vectors: a random convex mixture of 2 or 3 real turn vectors (Dirichlet
weights) plus Gaussian noise with the real vectors' covariance (sigma 0.02/dim on average), renormalised;
its text is its heaviest turn's text with a unique suffix of common words. (Tiling noisy copies of
the turns, as before, made the exact top 10 at 1M a pile of copies a hair apart, so recall@10
measured the noise, not the index.) No model runs at ingest.
Per size, in a fresh store:

* ingest: ``Pager.remember_many`` in batches of 10,000 (embedding workers stopped), memories/s over
  the whole load and over its last tenth (the rate at that size); then the vectors go in with
  ``DuckDBStore.put_vectors`` (vectors/s), as an import or a migration would write them.
* index build: a fresh process opens the store, builds HNSW and BM25 from it, saves both on close.
* cold open and serving: a fresh process (files evicted from the page cache first) opens the store
  with its saved indexes, then answers every query with ``retrieve`` and with ``page`` (+ render),
  interleaved; the query embedding is excluded (each question's MiniLM vector is looked up). RSS is
  read after opening and after serving (VmRSS, its anonymous and file-backed parts, and the peak).
* recall@10 of the semantic lane against an exact scan of the same vectors (first 500 questions), at
  the product's ef and at other ef values (with the search p50 each costs).

Results go to results/scale.{json,md} and the curves to results/scale.png.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

import mempager
from mempager import PagerConfig
from mempager.index.hnsw_graph import measured_floor, measured_per_million

from ._common import LOCOMO, git_state, percentiles, write_results
from .bench_hnsw import embeddings, exact_top, locomo_texts
from .bench_retrieve import ACTOR, MODEL, TYPES, NameOnly, evict, vmrss_mib

# The M / ef trade-off at 1M: measured once by hand (standalone hnswlib, ~1 h a row), not by this script
CONFIG = PagerConfig()  # the defaults measured
MEF_NOTE = Path(__file__).resolve().parent / "results" / "scale_m_ef.md"
K = 10
RECALL_QUERIES = 500
BATCH = 10_000
SIGMA = 0.02  # noise per dimension (on average) added to each mixture before renormalising
EF_SWEEP = (64, 128, 256, 512)  # ef values the recall probe tries (besides the default width)
GOALS = {"ingest_per_s": 20_000, "rss_gib": 3.0, "cold_open_s": 3.0, "retrieve_p50_ms": 2.0, "recall_at_10": 0.95}


def log(message: str) -> None:
    print(f"[bench_scale {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def memory() -> dict[str, float]:
    """This process's resident MiB now (and its anonymous and file-backed parts) and at peak."""
    fields = ("VmRSS", "RssAnon", "RssFile", "VmHWM")
    return {f: vmrss_mib(f) for f in fields}


# -- corpus ---------------------------------------------------------------------------------------
def mixtures(docs: np.ndarray, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n distinct unit vectors that look like MiniLM sentence vectors: the real ones first, then
    convex mixtures of 2-3 random real ones plus noise shaped like the real vectors' own spread
    (a Gaussian with their covariance, scaled to SIGMA per dimension on average), renormalised.
    Also each row's heaviest turn. (Isotropic noise would make every neighbourhood 384-dimensional,
    which sentence vectors are not: their covariance has an effective rank of ~66.)"""
    rng = np.random.default_rng(seed)
    real = min(n, len(docs))
    out = np.empty((n, docs.shape[1]), np.float32)
    out[:real] = docs[:real]
    heaviest = np.arange(n, dtype=np.int64) % len(docs)
    spread, axes = np.linalg.eigh(np.cov(docs.T))
    shape = (axes * np.sqrt(np.maximum(spread, 0) * docs.shape[1] * SIGMA**2 / spread.sum())).T.astype(np.float32)
    for lo in range(real, n, 100_000):
        m = min(100_000, n - lo)
        picks = rng.integers(0, len(docs), size=(m, 3))
        weights = rng.dirichlet([1.0, 1.0, 1.0], size=m).astype(np.float32)
        weights[rng.random(m) < 0.5, 2] = 0.0  # half mix two turns, half three
        block = np.einsum("nk,nkd->nd", weights, docs[picks])
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        block += rng.standard_normal(size=block.shape, dtype=np.float32) @ shape
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[lo : lo + m] = block
        heaviest[lo : lo + m] = picks[np.arange(m), weights.argmax(axis=1)]
    return out, heaviest


def suffix_words(turns: list[str], count: int = 2_000) -> list[str]:
    """The turns' ``count`` most frequent words (4+ letters): a unique suffix made of them adds no term
    to the vocabulary (a unique token per memory, as before, made a 3M-term BM25 vocabulary at 1M)."""
    counts: dict[str, int] = {}
    for turn in turns:
        for word in re.findall(r"[a-z]{4,}", turn.lower()):
            counts[word] = counts.get(word, 0) + 1
    return sorted(counts, key=lambda w: (-counts[w], w))[:count]


def corpus(turns: list[str], docs: np.ndarray, n: int) -> tuple[list[dict[str, Any]], np.ndarray]:
    """n memory items (unique texts) and their vectors, row i describing item i."""
    vectors, heaviest = mixtures(docs, n, seed=n)
    rng = np.random.default_rng(n + 1)
    now = datetime.now(timezone.utc)
    minutes = rng.integers(0, 2 * 365 * 24 * 60, size=n)
    words = suffix_words(turns)
    base = len(words)
    items = []
    seen: set[str] = set()
    for i, turn in enumerate(heaviest.tolist()):
        text = turns[turn]
        if i >= len(turns) or text in seen:  # i in base-2,000 words: unique up to 8 billion
            text = f"{text} (re: {words[i // base**2 % base]} {words[i // base % base]} {words[i % base]})"
        if i < len(turns):
            seen.add(text)
        items.append(
            {"type": TYPES[i % len(TYPES)], "text": text, "created_at": now - timedelta(minutes=int(minutes[i]))}
        )
    return items, vectors


# -- build ----------------------------------------------------------------------------------------
def build(path: Path, turns: list[str], docs: np.ndarray, n: int) -> tuple[dict[str, Any], np.ndarray, np.ndarray]:
    """Write n memories and their vectors; returns the timings, and per memory its label and vector."""
    items, vectors = corpus(turns, docs, n)
    p = mempager.open(path, ACTOR, config=PagerConfig(), embedder=NameOnly())  # type: ignore[arg-type]
    p.workers.stop()  # the vectors are supplied, not embedded
    batch_s = []
    for lo in range(0, n, BATCH):
        start = time.perf_counter()
        p.remember_many(items[lo : lo + BATCH])
        batch_s.append(time.perf_counter() - start)
        if (lo // BATCH) % 10 == 9 or lo + BATCH >= n:
            log(f"  remember_many {min(lo + BATCH, n):,}/{n:,} ({BATCH / batch_s[-1]:,.0f}/s)")
    labels_list, texts = p.store.texts_since(ACTOR, 0)
    position = {item["text"]: i for i, item in enumerate(items)}
    rows = np.array([position[t] for t in texts], dtype=np.int64)
    labels = np.array(labels_list, dtype=np.int64)
    del items, position, texts
    hashes = p.store.content_hashes(ACTOR)
    start = time.perf_counter()
    for lo in range(0, len(labels), 20_000):
        part = labels[lo : lo + 20_000]
        p.store.put_vectors(MODEL, part, vectors[rows[lo : lo + 20_000]], [hashes[int(x)] for x in part])
    vectors_s = time.perf_counter() - start
    p.close()
    tail = batch_s[-max(1, len(batch_s) // 10) :]
    out = {
        "memories": len(labels),
        "remember_many_s": round(sum(batch_s), 2),
        "ingest_per_s": round(len(labels) / sum(batch_s)),
        "ingest_last_tenth_per_s": round(BATCH * len(tail) / sum(tail)),
        "put_vectors_s": round(vectors_s, 2),
        "put_vectors_per_s": round(len(labels) / vectors_s),
        "store_mib": round(path.stat().st_size / 2**20, 1),
    }
    return out, labels, vectors[rows]


# -- the probes (fresh processes) -----------------------------------------------------------------
def run_probe(args: list[str], cold_dir: Path | None = None) -> dict[str, Any]:
    if cold_dir is not None:
        evict(cold_dir)
    cmd = [sys.executable, "-m", "benchmarks.bench_scale", *args]
    done = subprocess.run(
        cmd, cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True, check=False, env=os.environ.copy()
    )
    if done.returncode:
        raise RuntimeError(f"probe {args[0]} failed:\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def index_probe(path: Path) -> dict[str, Any]:
    """Open with no saved indexes: both are built from the store, then saved on close."""
    start = time.perf_counter()
    p = mempager.open(path, ACTOR, config=PagerConfig(), embedder=NameOnly())  # type: ignore[arg-type]
    open_s = time.perf_counter() - start
    out: dict[str, Any] = {"build_open_s": round(open_s, 2), "semantic": p.semantic.opened_how}
    out["lexical"] = p.lexical.opened_how
    start = time.perf_counter()
    p.close()
    out["close_with_save_s"] = round(time.perf_counter() - start, 2)
    out["memory_mib"] = memory()
    return out


def serve_probe(path: Path, queries_file: Path) -> dict[str, Any]:
    """Cold open with saved indexes, then retrieve and page for every question, interleaved."""
    before = memory()
    start = time.perf_counter()
    p = mempager.open(path, ACTOR, config=PagerConfig(), embedder=NameOnly())  # type: ignore[arg-type]
    open_s = time.perf_counter() - start
    opened = memory()
    p.workers.stop()
    with np.load(queries_file) as data:
        questions = [str(q) for q in data["questions"]]
        qvecs = data["vectors"]
    lookup = {q: v for q, v in zip(questions, qvecs, strict=True)}
    p.semantic.embed_query = lookup.__getitem__  # the query embedding is not what we time
    ops: dict[str, Callable[[str], object]] = {
        "retrieve": p.retrieve,
        "page": lambda q: p.page(q).render(),
    }
    for q in questions[:20]:
        for fn in ops.values():
            fn(q)
    samples: dict[str, list[float]] = {name: [] for name in ops}
    for lo in range(0, len(questions), 50):
        for name, fn in ops.items():
            for q in questions[lo : lo + 50]:
                t0 = time.perf_counter()
                fn(q)
                samples[name].append((time.perf_counter() - t0) * 1000)
    found = [[label for label, _ in p.semantic.search_vector(v, K)] for v in qvecs[:RECALL_QUERIES]]
    served = memory()
    index = p.semantic.index
    default_ef, per_million, searched_ef = index.ef, index.ef_per_million, index.search_ef
    index.ef_per_million = 0  # the sweep sets the width itself
    sweep: dict[str, Any] = {}
    for ef in EF_SWEEP:  # what another ef buys (the lane's search alone, k = 10)
        index.ef = ef
        took, hits = [], []
        for v in qvecs[:RECALL_QUERIES]:
            t0 = time.perf_counter()
            hits.append([label for label, _ in p.semantic.search_vector(v, K)])
            took.append((time.perf_counter() - t0) * 1000)
        sweep[str(ef)] = {"found": hits, "search": percentiles(took)}
    index.ef, index.ef_per_million = default_ef, per_million
    out = {
        "open_s": round(open_s, 3),
        "semantic": p.semantic.opened_how,
        "lexical": p.lexical.opened_how,
        "latency": {name: percentiles(s) for name, s in samples.items()},
        "found": found,
        "ef": searched_ef,
        "ef_sweep": sweep,
        "memory_mib": {"before_open": before, "after_open": opened, "after_serving": served},
    }
    p.close()
    return out


# -- one size -------------------------------------------------------------------------------------
def bench_size(
    n: int, work: Path, turns: list[str], docs: np.ndarray, questions: list[str], qvecs: np.ndarray, keep: bool = False
) -> dict[str, Any]:
    path = work / f"scale-{n}.duckdb"
    for f in work.iterdir():  # a kept store from an earlier run is not ingested into twice
        if f.name.startswith(f"scale-{n}."):
            subprocess.run(["rm", "-rf", str(f)], check=True)
    log(f"size {n:,}: ingest")
    ingest, labels, by_label = build(path, turns, docs, n)
    log(f"size {n:,}: {ingest['ingest_per_s']:,}/s ingest; building the indexes in a fresh process")
    built = run_probe(["--index-probe", str(path)])
    log(f"size {n:,}: index build + save {built['build_open_s']} + {built['close_with_save_s']} s")
    queries_file = work / "queries.npz"
    np.savez(queries_file, questions=np.array(questions), vectors=qvecs)
    log(f"size {n:,}: cold open and serving in a fresh process")
    served = run_probe(["--serve-probe", str(path), "--queries-file", str(queries_file)], cold_dir=work)
    truth_rows = exact_top(by_label, qvecs[:RECALL_QUERIES], K)
    truth = [{int(labels[r]) for r in rows} for rows in truth_rows]

    def recall(found: list[list[int]]) -> float:
        return round(sum(len(t & set(f)) for t, f in zip(truth, found, strict=True)) / (K * len(truth)), 4)

    found = served.pop("found")
    sweep = {ef: {"recall_at_10": recall(got.pop("found")), **got} for ef, got in served.pop("ef_sweep").items()}
    log(f"size {n:,}: open {served['open_s']} s, retrieve p50 {served['latency']['retrieve']['p50_ms']} ms")
    for f in work.iterdir():  # the next size starts from an empty directory (and disk)
        if f.name.startswith(f"scale-{n}") and not keep:
            subprocess.run(["rm", "-rf", str(f)], check=True)
    return {
        "n": n,
        "ingest": ingest,
        "index_build": built,
        "serve": served,
        "recall_at_10": recall(found),
        "ef": served["ef"],
        "ef_sweep": sweep,
    }


# -- report ---------------------------------------------------------------------------------------
def report(rows: list[dict[str, Any]], notes: str) -> str:
    def gib(mib: float) -> str:
        return f"{mib / 1024:.2f}"

    head = "| | " + " | ".join(f"{r['n']:,}" for r in rows) + " | goal at 1M |"
    lines = [head, "|---" * (len(rows) + 2) + "|"]
    facts: list[tuple[str, Callable[[dict[str, Any]], object], str]] = [
        ("ingest memories/s, whole load (`remember_many`, no embedding)", lambda r: r["ingest"]["ingest_per_s"], ""),
        ("ingest memories/s, last tenth of the load", lambda r: r["ingest"]["ingest_last_tenth_per_s"], ">= 20,000"),
        ("`put_vectors` vectors/s", lambda r: r["ingest"]["put_vectors_per_s"], ""),
        ("index build from the store (HNSW + BM25), s", lambda r: r["index_build"]["build_open_s"], ""),
        ("close with save, s", lambda r: r["index_build"]["close_with_save_s"], ""),
        ("cold open with saved indexes, s", lambda r: r["serve"]["open_s"], "<= 3"),
        ("RSS after open, GiB", lambda r: gib(r["serve"]["memory_mib"]["after_open"]["VmRSS"]), ""),
        ("RSS after serving, GiB", lambda r: gib(r["serve"]["memory_mib"]["after_serving"]["VmRSS"]), "<= 3"),
        (
            "… of which anonymous / file-backed, GiB",
            lambda r: "{} / {}".format(
                gib(r["serve"]["memory_mib"]["after_serving"]["RssAnon"]),
                gib(r["serve"]["memory_mib"]["after_serving"]["RssFile"]),
            ),
            "",
        ),
        ("peak RSS of the serving process, GiB", lambda r: gib(r["serve"]["memory_mib"]["after_serving"]["VmHWM"]), ""),
        ("peak RSS of the index-building process, GiB", lambda r: gib(r["index_build"]["memory_mib"]["VmHWM"]), ""),
        (
            "`retrieve` p50 / p95 ms (query embedding excluded)",
            lambda r: f"{r['serve']['latency']['retrieve']['p50_ms']} / {r['serve']['latency']['retrieve']['p95_ms']}",
            "p50 <= 2",
        ),
        (
            "`page()` + render p50 / p95 ms",
            lambda r: f"{r['serve']['latency']['page']['p50_ms']} / {r['serve']['latency']['page']['p95_ms']}",
            "",
        ),
        ("HNSW search width (ef) in use", lambda r: r.get("ef", ""), ""),
        ("HNSW recall@10 vs exact", lambda r: r["recall_at_10"], ">= 0.95"),
        (
            "… recall@10 / search p50 ms at ef = " + " / ".join(str(ef) for ef in EF_SWEEP),
            lambda r: "; ".join(
                f"{v['recall_at_10']} / {v['search']['p50_ms']}" for v in r.get("ef_sweep", {}).values()
            ),
            "",
        ),
        ("store file MiB", lambda r: r["ingest"]["store_mib"], ""),
    ]
    for title, get, goal in facts:
        lines.append(f"| {title} | " + " | ".join(str(get(r)) for r in rows) + f" | {goal} |")
    return "\n".join(lines) + "\n\n" + notes + "\n\n![cost vs size](scale.png)"


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [r["n"] for r in rows]
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    panels: list[tuple[Any, str, list[tuple[str, list[float]]], float | None]] = [
        (
            axes[0][0],
            "ms (p50)",
            [
                ("retrieve", [r["serve"]["latency"]["retrieve"]["p50_ms"] for r in rows]),
                ("page + render", [r["serve"]["latency"]["page"]["p50_ms"] for r in rows]),
                ("retrieve p95", [r["serve"]["latency"]["retrieve"]["p95_ms"] for r in rows]),
            ],
            GOALS["retrieve_p50_ms"],
        ),
        (
            axes[0][1],
            "GiB",
            [
                ("RSS after serving", [r["serve"]["memory_mib"]["after_serving"]["VmRSS"] / 1024 for r in rows]),
                ("RSS after open", [r["serve"]["memory_mib"]["after_open"]["VmRSS"] / 1024 for r in rows]),
                ("peak, index build", [r["index_build"]["memory_mib"]["VmHWM"] / 1024 for r in rows]),
            ],
            GOALS["rss_gib"],
        ),
        (
            axes[1][0],
            "seconds",
            [
                ("cold open (saved indexes)", [r["serve"]["open_s"] for r in rows]),
                ("index build from the store", [r["index_build"]["build_open_s"] for r in rows]),
            ],
            GOALS["cold_open_s"],
        ),
        (
            axes[1][1],
            "memories/s",
            [
                ("ingest, whole load", [r["ingest"]["ingest_per_s"] for r in rows]),
                ("ingest, last tenth", [r["ingest"]["ingest_last_tenth_per_s"] for r in rows]),
            ],
            GOALS["ingest_per_s"],
        ),
    ]
    for ax, unit, series, goal in panels:
        for name, ys in series:
            ax.plot(xs, ys, "o-", label=name)
        if goal is not None:
            ax.axhline(goal, color="grey", linestyle=":", label="goal at 1M")
        ax.set_xscale("log")
        ax.set_xlabel("memories")
        ax.set_ylabel(unit)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("mempager cost vs size (384-d MiniLM vectors, LoCoMo text tiled)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=0, help="questions per timed op (default: all 1,986)")
    parser.add_argument("--quick", action="store_true", help="10k only, 300 queries; prints, writes no results")
    parser.add_argument("--locomo", type=Path, default=LOCOMO)
    parser.add_argument("--keep", type=Path, help="work in this directory and keep each size's store (profiling)")
    parser.add_argument("--no-write", action="store_true", help="print the table, write no results files")
    parser.add_argument("--index-probe", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--serve-probe", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--queries-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.index_probe:
        print(json.dumps(index_probe(args.index_probe)), flush=True)
        return
    if args.serve_probe:
        print(json.dumps(serve_probe(args.serve_probe, args.queries_file)), flush=True)
        return
    if args.quick:
        args.sizes, args.queries = [10_000], args.queries or 300
    load_before = os.getloadavg()
    code = git_state()
    turns, questions = locomo_texts(args.locomo)
    docs, qvecs = embeddings(args.locomo)
    if args.queries:
        questions, qvecs = questions[: args.queries], qvecs[: args.queries]
    rows = []
    with tempfile.TemporaryDirectory(prefix="mempager-bench-scale-") as scratch:
        work = Path(scratch) if args.keep is None else args.keep
        work.mkdir(parents=True, exist_ok=True)
        for n in args.sizes:
            rows.append(bench_size(n, work, turns, docs, questions, qvecs, keep=args.keep is not None))
    load_after = os.getloadavg()
    load = f"{load_before[0]:.2f} / {load_before[1]:.2f} before, {load_after[0]:.2f} / {load_after[1]:.2f} after"
    notes = (
        f"Data: {len(docs):,} real all-MiniLM-L6-v2 LoCoMo turn vectors, then distinct synthetic ones up to each "
        "size: a random convex mixture (Dirichlet weights) of 2 or 3 real turn vectors plus Gaussian noise with "
        f"the real vectors' covariance (scaled to sigma {SIGMA}/dim on average), renormalised: no two alike, "
        "none a near-copy; its text is its heaviest turn's with a unique suffix of three of the turns' 2,000 "
        "most frequent words ('(re: w1 w2 w3)': no new term per memory; a unique token each made a 3M-term "
        "vocabulary). "
        f"{len(questions):,} LoCoMo questions as queries, their MiniLM "
        "vectors looked up (query embedding excluded). Pager defaults (fusion `score`, lane depth 50, top_k 8, "
        f"budget 6000 tokens; HNSW M={CONFIG.hnsw_m}, ef_construction={CONFIG.hnsw_ef_construction}, ef "
        f"{measured_floor(CONFIG.hnsw_m)} growing by {measured_per_million(CONFIG.hnsw_m)} per million vectors). "
        "Cold open: a fresh process after the store "
        "and index files were evicted from the page cache; it includes the store, the in-process mirror, both "
        "indexes (checksums verified, caught up with the store), not the embedding model. RSS: VmRSS of that "
        "process (RssAnon = its own memory, RssFile = mapped file pages); a large HNSW index reads its vector rows "
        "from its saved file through the page cache, which is not counted in RSS. Recall: semantic lane top 10 vs "
        f"an exact scan (numpy, brute force) of the same vectors, first {RECALL_QUERIES} questions; the ef sweep times "
        f"the lane's search alone. 1-min/5-min load average {load} on "
        f"{os.cpu_count()} cores shared with other engineers' jobs: read p95 as noisy. Code measured: commit "
        f"{code['commit']}"
        + (f" with uncommitted changes in {', '.join(code['uncommitted'])}." if code["uncommitted"] else ".")
    )
    text = report(rows, notes)
    if MEF_NOTE.exists():  # the hand-written M / ef study (standalone hnswlib runs), kept under every run
        text += "\n\n" + MEF_NOTE.read_text().strip()
    if args.quick or args.no_write:
        print(text)
        log("results files not written")
        return
    plot(rows, Path(__file__).resolve().parent / "results" / "scale.png")
    path = write_results(
        "scale", {"params": {"notes": notes, "goals": GOALS, "sizes": args.sizes}, "results": rows}, text
    )
    print(text)
    log(f"wrote {path}")


if __name__ == "__main__":
    main()
