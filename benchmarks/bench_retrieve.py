"""`retrieve` latency per lane at 10k and 100k memories, HNSW recall, cold open, and Chroma side by side.

    HF_HUB_OFFLINE=1 python -m benchmarks.bench_retrieve [--quick] [--sizes 10000 100000] [--queries 1986]

Corpus: the 5,882 LoCoMo turns ("Speaker: text") with their real all-MiniLM-L6-v2 vectors (cached in the
system temp dir by ``bench_hnsw.embeddings``), tiled to each size as in bench_hnsw: copy c of turn j is
"<turn j> (ref <8 hex>)" with turn j's vector plus Gaussian noise (sigma 0.02/dim), renormalised. Types
are 80% event, 15% fact, 5% preference; created_at spread over two years. Memories are written with
``remember_many`` (embedding workers stopped) and their vectors stored with ``DuckDBStore.put_vectors``
under the active model's name ``st:all-MiniLM-L6-v2``, so a Pager reopened with the LocalEmbedder
builds or loads its HNSW index from the store without re-embedding anything.

Latency excludes the query embedding: each query's MiniLM vector is computed once (cached) and
``Pager.semantic.embed_query`` is replaced by a dict look-up, so ``Pager.retrieve`` runs its real path
(validation, three lanes, completion scoring, fusion, hydration from the mirror, packing), and ``page``
+ ``render`` runs the whole per-turn page (pinned block, procedures, retrieve with its report of what
was cut). Each piece of ``Retriever.rank`` / ``select`` is also timed on its own, with the inputs it
gets in a real call (``select`` as ``retrieve`` calls it: without the report). All
timed operations, ours and Chroma's, run interleaved in blocks of queries in one process, so machine
load drifts hit both sides alike. Chroma is an in-memory ``EphemeralClient`` with the same vectors,
cosine space, default HNSW parameters, and metadata {actor, type}.

Cold open runs in a fresh subprocess (files evicted from the page cache first) with a stand-in embedder
that carries the model's name and dim only, so the time is the store + mirror + index open, not torch.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

import mempager
from mempager import PagerConfig
from mempager.errors import EmbedderError
from mempager.index.hnsw_graph import measured_floor
from mempager.lanes.salience import params_from_config
from mempager.store.duckdb import open_store

from ._common import LOCOMO, git_state, peak_rss_mib, percentiles, write_results
from .bench_hnsw import embeddings, exact_top, locomo_texts, tile
from .chroma_minilm import chroma_default_ef, same_model_cosine

MODEL = "st:all-MiniLM-L6-v2"
ACTOR = "bench"
SIGMA = 0.02
K = 10
_CFG = PagerConfig()  # the defaults every measured pager runs with
TYPES = ["event"] * 16 + ["fact"] * 3 + ["preference"]
Op = Callable[[int], object]


def log(message: str) -> None:
    print(f"[bench_retrieve {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def vmrss_mib(field: str = "VmRSS") -> float:
    """Resident MiB now (VmRSS) or at peak (VmHWM, which unlike ru_maxrss does not survive exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


class NameOnly:
    """The MiniLM embedder's identity without its weights: enough to open a store, never to embed."""

    name = MODEL
    dim = 384

    def embed(self, texts: Sequence[str], role: str = "document") -> np.ndarray:
        raise EmbedderError("the open probe never embeds")


# -- corpus -------------------------------------------------------------------------------------
def corpus(turns: list[str], docs: np.ndarray, n: int) -> tuple[list[dict[str, Any]], np.ndarray]:
    """n memory items (unique texts) and their vectors, row i describing item i."""
    rng = np.random.default_rng(n)
    vectors = tile(docs, n, SIGMA)
    now = datetime.now(timezone.utc)
    minutes = rng.integers(0, 2 * 365 * 24 * 60, size=n)
    seen: set[str] = set()
    items = []
    for i in range(n):
        text = turns[i % len(turns)]
        if i >= len(turns) or text in seen:
            text = f"{text} (ref {int(rng.integers(2**32)):08x})"
        seen.add(text)
        items.append(
            {"type": TYPES[i % len(TYPES)], "text": text, "created_at": now - timedelta(minutes=int(minutes[i]))}
        )
    return items, vectors


def build_store(path: Path, items: list[dict[str, Any]], vectors: np.ndarray, embedder: Any) -> dict[str, Any]:
    """Write the memories through the Pager (workers stopped), then their vectors into the store."""
    p = mempager.open(path, ACTOR, config=PagerConfig(), embedder=embedder)
    p.workers.stop()  # the vectors come from the cache, not from the workers
    start = time.perf_counter()
    for lo in range(0, len(items), 10_000):
        p.remember_many(items[lo : lo + 10_000])
        log(f"  remember_many {min(lo + 10_000, len(items)):,}/{len(items):,}")
    write_s = time.perf_counter() - start
    labels_list, texts = p.store.texts_since(ACTOR, 0)
    position = {item["text"]: i for i, item in enumerate(items)}
    rows = np.array([position[t] for t in texts], dtype=np.int64)
    labels = np.array(labels_list, dtype=np.int64)
    hashes = p.store.content_hashes(ACTOR)
    start = time.perf_counter()
    for lo in range(0, len(labels), 20_000):
        part = labels[lo : lo + 20_000]
        p.store.put_vectors(MODEL, part, vectors[rows[lo : lo + 20_000]], [hashes[int(x)] for x in part])
        log(f"  put_vectors {min(lo + 20_000, len(labels)):,}/{len(labels):,}")
    vectors_s = time.perf_counter() - start
    p.close()
    types = np.array([items[r]["type"] for r in rows])
    np.save(path.with_suffix(".types.npy"), types)
    return {
        "memories": len(labels),
        "remember_many_s": round(write_s, 2),
        "remember_many_per_s": round(len(labels) / write_s),
        "put_vectors_s": round(vectors_s, 2),
        "labels": labels,
        "vectors": vectors[rows],
        "types": types,
    }


# -- cold open in a fresh process ---------------------------------------------------------------
def evict(directory: Path) -> None:
    """Drop the store's and indexes' pages from the page cache (clean pages need no root)."""
    os.sync()
    for path in directory.rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)


def open_probe(path: Path) -> dict[str, Any]:
    """Runs in the subprocess: store, mirror and lanes opened and timed separately, then closed."""
    rss0 = vmrss_mib()
    t0 = time.perf_counter()
    store = open_store(path)
    t1 = time.perf_counter()
    store.table(ACTOR)
    t2 = time.perf_counter()
    p = mempager.open(path, ACTOR, config=PagerConfig(), embedder=NameOnly())  # type: ignore[arg-type]
    t3 = time.perf_counter()
    out = {
        "store_open_s": round(t1 - t0, 3),
        "mirror_load_s": round(t2 - t1, 3),
        "lanes_open_s": round(t3 - t2, 3),
        "total_s": round(t3 - t0, 3),
        "semantic": p.semantic.opened_how,
        "lexical": p.lexical.opened_how,
        "rss_before_mib": rss0,
        "rss_after_mib": vmrss_mib(),
    }
    start = time.perf_counter()
    p.close()
    store.close()
    out["close_with_save_s"] = round(time.perf_counter() - start, 3)
    out["peak_rss_mib"] = vmrss_mib("VmHWM")
    return out


def run_probe(path: Path, cold: bool) -> dict[str, Any]:
    if cold:
        evict(path.parent)
    cmd = [sys.executable, "-m", "benchmarks.bench_retrieve", "--open-probe", str(path)]
    done = subprocess.run(
        cmd, cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True, check=False, env=os.environ.copy()
    )
    if done.returncode:
        raise RuntimeError(f"open probe failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def cold_opens(path: Path) -> dict[str, Any]:
    index_dir = Path(str(path) + ".index")
    shutil.rmtree(index_dir, ignore_errors=True)
    out = {"rebuild_both_cold": run_probe(path, cold=True)}  # also saves both indexes on close
    out["load_cold"] = run_probe(path, cold=True)
    out["load_warm"] = run_probe(path, cold=False)
    semantic_dirs = list(index_dir.glob("*/st_all-MiniLM-L6-v2*"))  # <actor>/<model slug>-<digest>
    if not semantic_dirs:
        raise RuntimeError(f"no semantic index directory under {index_dir}: the probe below would measure a load")
    for semantic_dir in semantic_dirs:
        shutil.rmtree(semantic_dir)
    out["rebuild_semantic_cold"] = run_probe(path, cold=True)
    for name, probe in out.items():
        log(f"  open {name}: {probe['total_s']} s ({probe['semantic']}; {probe['lexical']})")
    return out


# -- timing -------------------------------------------------------------------------------------
def interleaved(ops: dict[str, Op], n: int, block: int = 50, warmup: int = 20) -> dict[str, list[float]]:
    """Each op over queries 0..n-1, the ops taking turns block by block."""
    for fn in ops.values():
        for i in range(min(warmup, n)):
            fn(i)
    samples: dict[str, list[float]] = {name: [] for name in ops}
    gc.collect()
    for lo in range(0, n, block):
        for name, fn in ops.items():
            out = samples[name]
            for i in range(lo, min(n, lo + block)):
                start = time.perf_counter()
                fn(i)
                out.append((time.perf_counter() - start) * 1000)
    return samples


def lane_inputs(p: Any, questions: list[str], qvecs: np.ndarray, depth: int, mode: str) -> list[dict[str, Any]]:
    """What each piece of ``Pager._rank``/``_retrieve`` receives for each query, computed once."""
    config = p.config.with_(salience_mode=mode)
    params = params_from_config(config, p.clock())
    out = []
    for q, v in zip(questions, qvecs, strict=True):
        lanes: dict[str, list[tuple[int, float]]] = {"semantic": p.semantic.search_vector(v, depth)}
        sem = [label for label, _ in lanes["semantic"]]
        lanes["lexical"], lex_extra = p.lexical.search_scored(q, depth, sem)
        only = p.semantic.unembedded_labels() if mode == "unindexed" else None
        lanes["salience"] = p.store.salience(ACTOR, config.salience_types, params, depth, only)
        seen = set(sem)
        others = sorted({label for name in ("lexical", "salience") for label, _ in lanes[name] if label not in seen})
        completions = {"lexical": lex_extra, "semantic": p.semantic.scores_for(v, others)}
        out.append(
            {
                "sem": sem,
                "others": others,
                "lanes": lanes,
                "completions": completions,
                "params": params,
                "only": only,
                "fused": p.retriever.fuse(lanes, completions),
            }
        )
    return out


def pager_ops(p: Any, questions: list[str], qvecs: np.ndarray) -> dict[str, Op]:
    k, budget = p.config.retrieval_top_k, p.config.retrieval_budget_tokens
    depth = p.retriever.depth(k, budget)
    default = lane_inputs(p, questions, qvecs, depth, "unindexed")
    everything = lane_inputs(p, questions, qvecs, depth, "all")
    types = p.config.salience_types
    lookup = {q: v for q, v in zip(questions, qvecs, strict=True)}
    p.semantic.embed_query = lookup.__getitem__  # the query embedding is not what we time
    config_all = p.config.with_(salience_mode="all")
    config_default = p.config
    config_nospeaker = p.config.with_(lane_weights={**p.config.lane_weights, "speaker": 0.0})

    def retrieve_with(config: Any) -> Op:
        def op(i: int) -> object:
            p.config = p.retriever.config = config
            try:
                return p.retrieve(questions[i])
            finally:
                p.config = p.retriever.config = config_default

        return op

    def candidates(i: int) -> list[int]:
        return [label for hits in default[i]["lanes"].values() for label, _ in hits]

    return {  # whole calls first in each block: the pieces after them re-read what they warmed
        "retrieve": lambda i: p.retrieve(questions[i]),
        "page": lambda i: p.page(questions[i]).render(),
        "semantic_k10": lambda i: p.semantic.search_vector(qvecs[i], K),
        "semantic": lambda i: p.semantic.search_vector(qvecs[i], depth),
        "lexical": lambda i: p.lexical.search_scored(questions[i], depth, default[i]["sem"]),
        "salience": lambda i: p.store.salience(
            ACTOR, types, default[i]["params"], depth, p.semantic.unembedded_labels()
        ),
        "salience_all": lambda i: p.store.salience(ACTOR, types, everything[i]["params"], depth, None),
        "completion": lambda i: p.semantic.scores_for(qvecs[i], default[i]["others"]),
        "completion_all": lambda i: p.semantic.scores_for(qvecs[i], everything[i]["others"]),
        "fuse": lambda i: p.retriever.fuse(default[i]["lanes"], default[i]["completions"]),
        # as retrieve runs it: no report of what was cut (page() asks for one)
        "select": lambda i: p.retriever.select(default[i]["fused"], k, budget, frozenset(), explain=False),
        "select_all": lambda i: p.retriever.select(everything[i]["fused"], k, budget, frozenset(), explain=False),
        "speaker": lambda i: p.lexical.spoken_by(questions[i], candidates(i)),
        "retrieve_salience_all": retrieve_with(config_all),
        "retrieve_no_speaker": retrieve_with(config_nospeaker),
    }


def end_to_end_ops(
    p: Any, col: Any, questions: list[str], torch_embedder: Any, onnx: tuple[Any, Any], chroma_own: Any
) -> dict[str, Op]:
    """The query embedding included: our ``page()`` embedding its own query (the lane's real path)
    and Chroma's ``query`` after the same model's vector, as Chroma's embedding_function would do
    it. Two ONNX instances (one per side) and no query cache: every call embeds. ``chroma_own``:
    the same collection with Chroma's own default MiniLM function, asked by text as its users do."""
    del p.semantic.embed_query  # pager_ops replaced it by a look-up; the lane's own method again
    ours_onnx, chroma_onnx = onnx

    def page_with(embedder: Any) -> Op:
        def op(i: int) -> object:
            p.semantic.embedder = embedder  # same name and dim: only what computes the vector changes
            return p.page(questions[i]).render()

        return op

    def chroma_with(embedder: Any) -> Op:
        def op(i: int) -> object:
            vector = embedder.embed([questions[i]], role="query")
            return col.query(query_embeddings=vector, n_results=K, include=["distances"])

        return op

    def chroma_default(i: int) -> object:
        return chroma_own.query(query_texts=[questions[i]], n_results=K, include=["distances"])

    return {
        "page_e2e_onnx": page_with(ours_onnx),
        "chroma_e2e_onnx": chroma_with(chroma_onnx),
        "chroma_e2e_default": chroma_default,
        "page_e2e_torch": page_with(torch_embedder),
        "chroma_e2e_torch": chroma_with(torch_embedder),
    }


# -- Chroma -------------------------------------------------------------------------------------
def chroma_collection(n: int, labels: np.ndarray, vectors: np.ndarray, types: np.ndarray) -> tuple[Any, Any, float]:
    import chromadb
    from chromadb.config import Settings

    client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
    name = f"bench-{n}"
    try:
        client.delete_collection(name)
    except Exception:  # noqa: BLE001 - absent is fine; Chroma's error types vary by version
        pass
    col = client.create_collection(name, metadata={"hnsw:space": "cosine"}, embedding_function=None)
    step = min(5000, client.get_max_batch_size())
    start = time.perf_counter()
    for lo in range(0, n, step):
        part = slice(lo, lo + step)
        col.add(
            ids=[str(x) for x in labels[part].tolist()],
            embeddings=vectors[part],
            metadatas=[{"actor": ACTOR, "type": str(t)} for t in types[part]],
        )
        if (lo // step) % 4 == 3 or lo + step >= n:
            log(f"  chroma add {min(lo + step, n):,}/{n:,}")
    return client, col, time.perf_counter() - start


def chroma_ops(col: Any, qvecs: np.ndarray) -> dict[str, Op]:
    def query(k: int, where: dict[str, Any] | None = None) -> Op:
        return lambda i: col.query(query_embeddings=qvecs[i : i + 1], n_results=k, include=["distances"], where=where)

    return {
        "chroma_k10": query(K),
        "chroma_k50": query(50),
        "chroma_where_actor_k10": query(K, {"actor": ACTOR}),
        "chroma_where_type_fact_k10": query(K, {"type": "fact"}),
    }


# -- one size -----------------------------------------------------------------------------------
def recall_ours(p: Any, qvecs: np.ndarray, truth: list[set[int]]) -> float:
    found = [{label for label, _ in p.semantic.search_vector(v, K)} for v in qvecs]
    return sum(len(t & f) for t, f in zip(truth, found, strict=True)) / (K * len(truth))


def recall_chroma(col: Any, qvecs: np.ndarray, truth: list[set[int]]) -> float:
    found = []
    for lo in range(0, len(qvecs), 200):
        res = col.query(query_embeddings=qvecs[lo : lo + 200], n_results=K, include=[])
        found.extend({int(x) for x in ids} for ids in res["ids"])
    return sum(len(t & f) for t, f in zip(truth, found, strict=True)) / (K * len(truth))


def bench_size(
    n: int,
    work: Path,
    turns: list[str],
    docs: np.ndarray,
    questions: list[str],
    qvecs: np.ndarray,
    embedder: Any,
    filtered_queries: int,
    onnx: tuple[Any, Any],
    e2e_queries: int,
    chroma_ef: Any,
) -> dict[str, Any]:
    from mempager.index.hnsw import HnswIndex

    log(f"size {n:,}: building the store")
    path = work / f"retrieve-{n}.duckdb"
    items, vectors = corpus(turns, docs, n)
    built = build_store(path, items, vectors, embedder)
    labels, by_label, types = built.pop("labels"), built.pop("vectors"), built.pop("types")
    del items, vectors
    log(f"size {n:,}: cold opens in fresh processes")
    opens = cold_opens(path)
    rss_before = vmrss_mib()
    start = time.perf_counter()
    p = mempager.open(path, ACTOR, config=PagerConfig(), embedder=embedder)
    open_s = time.perf_counter() - start
    rss_pager = vmrss_mib() - rss_before
    assert p.sync(timeout=30), "memories still pending: the vectors were not all stored"
    assert len(p.semantic) == n and len(p.lexical) == n, (len(p.semantic), len(p.lexical))

    log(f"size {n:,}: index build and store queries")
    start = time.perf_counter()
    fetched_labels, fetched = p.store.vectors(ACTOR, MODEL)
    fetch_s = time.perf_counter() - start
    fresh = HnswIndex(
        fetched.shape[1],
        M=_CFG.hnsw_m,
        ef_construction=_CFG.hnsw_ef_construction,
        ef=_CFG.hnsw_ef,
        ef_per_million=_CFG.hnsw_ef_per_million,
    )  # the lane's parameters
    start = time.perf_counter()
    fresh.add(fetched_labels, fetched)
    build_s = time.perf_counter() - start
    del fresh, fetched
    store_queries = {
        "pending_claim_query": percentiles([_ms(lambda: p.store.pending(ACTOR, MODEL, 128)) for _ in range(20)]),
        "pending_stats_query": percentiles([_ms(lambda: p.store.pending_stats(ACTOR, MODEL)) for _ in range(20)]),
    }

    log(f"size {n:,}: recall@{K} against the exact top {K}")
    truth_rows = exact_top(by_label, qvecs, K)
    truth = [{int(labels[r]) for r in rows} for rows in truth_rows]
    recall = round(recall_ours(p, qvecs, truth), 4)

    log(f"size {n:,}: Chroma collection")
    rss_chroma0 = vmrss_mib()
    client, col, chroma_build_s = chroma_collection(n, labels, by_label, types)
    rss_chroma = vmrss_mib() - rss_chroma0
    chroma_recall = round(recall_chroma(col, qvecs, truth), 4)

    log(f"size {n:,}: latency, {len(questions):,} queries, ours and Chroma interleaved")
    chroma = chroma_ops(col, qvecs)
    ops = {**pager_ops(p, questions, qvecs), "chroma_k10": chroma["chroma_k10"], "chroma_k50": chroma["chroma_k50"]}
    latency = {name: percentiles(s) for name, s in interleaved(ops, len(questions)).items()}

    log(f"size {n:,}: filtered queries ({filtered_queries})")
    fact_labels = frozenset(labels[types == "fact"].tolist())
    filt_ops: dict[str, Op] = {
        "semantic_k10": ops["semantic_k10"],
        "ours_type_fact_k10": lambda i: p.semantic.index.search(qvecs[i], K, allow=fact_labels),
        "chroma_k10": ops["chroma_k10"],
        "chroma_where_actor_k10": chroma["chroma_where_actor_k10"],
        "chroma_where_type_fact_k10": chroma["chroma_where_type_fact_k10"],
    }
    filtered = {
        name: percentiles(s)
        for name, s in interleaved(filt_ops, min(filtered_queries, len(questions)), block=25, warmup=5).items()
    }
    log(f"size {n:,}: end to end, query embedding included ({min(e2e_queries, len(questions))} queries)")
    end_to_end = {
        name: percentiles(s)
        for name, s in interleaved(
            end_to_end_ops(
                p, col, questions, embedder, onnx, client.get_collection(col.name, embedding_function=chroma_ef)
            ),
            min(e2e_queries, len(questions)),
            block=25,
            warmup=5,
        ).items()
    }
    p.semantic.embedder = embedder
    client.delete_collection(col.name)
    p.close()
    gc.collect()
    return {
        "n": n,
        "build": built,
        "opens": opens,
        "open_in_process_warm_s": round(open_s, 3),
        "rss_pager_open_delta_mib": round(rss_pager, 1),
        "rss_chroma_delta_mib": round(rss_chroma, 1),
        "vectors_fetch_s": round(fetch_s, 2),
        "hnsw_build_s": round(build_s, 2),
        "recall_at_10": recall,
        "chroma_recall_at_10": chroma_recall,
        "chroma_build_s": round(chroma_build_s, 2),
        "store_queries": store_queries,
        "latency": latency,
        "filtered": filtered,
        "end_to_end": end_to_end,
        "fact_share": round(float(np.mean(types == "fact")), 3),
        "peak_rss_mib": peak_rss_mib(),
    }


def _ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


# -- report -------------------------------------------------------------------------------------
PIECES = [
    ("semantic", "semantic lane: HNSW search, depth 50"),
    ("semantic_k10", "semantic lane: HNSW search, k=10"),
    ("lexical", "lexical lane: BM25 `search_scored`, depth 50 (+ scores of the semantic hits)"),
    ("salience", "salience lane, default `unindexed` mode (only memories without a vector: none here)"),
    ("salience_all", 'salience lane over all memories (`salience_mode="all"`, or mid-migration)'),
    ("completion", "completion: semantic scores of the other lanes' hits"),
    ("completion_all", "completion, salience over all"),
    ("speaker", "speaker lane: the candidates' speakers the query names (`spoken_by`)"),
    ("fuse", "fusion (`score`)"),
    ("select", "hydration from the mirror + packing (`select`, no cut report, as `retrieve` runs it)"),
    ("select_all", "hydration + packing, salience over all"),
    ("retrieve", "**`retrieve` total, default config**"),
    ("retrieve_salience_all", "**`retrieve` total, salience over all**"),
    ("retrieve_no_speaker", "**`retrieve` total, speaker lane off** (`lane_weights['speaker']=0`)"),
    ("page", "**`page()` + `render()` (pinned, procedures, retrieve with its cut report)**"),
    ("chroma_k10", "Chroma `query`, k=10"),
    ("chroma_k50", "Chroma `query`, k=50"),
]


def cell(stats: dict[str, float]) -> str:
    return f"{stats['p50_ms']:.3f} / {stats['p95_ms']:.3f}"


def ratio(a: dict[str, float], b: dict[str, float]) -> str:
    return f"{a['p50_ms'] / b['p50_ms']:.1f}x"


def report(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    sizes = " | ".join(f"{r['n']:,} p50 / p95 ms" for r in rows)
    lines = [
        "## `retrieve` and its pieces (query embedding excluded)",
        "",
        f"| piece | {sizes} |",
        "|---|" + "---|" * len(rows),
    ]
    for key, title in PIECES:
        lines.append(f"| {title} | " + " | ".join(cell(r["latency"][key]) for r in rows) + " |")
    lines += [
        "",
        "Ratios of Chroma's p50 to ours, same run (higher = we are faster):",
        "",
        "| comparison | " + " | ".join(f"{r['n']:,}" for r in rows) + " |",
        "|---|" + "---|" * len(rows),
    ]
    comparisons = [
        ("Chroma k=10 / our semantic lane k=10", "latency", "chroma_k10", "latency", "semantic_k10"),
        ("Chroma k=50 / our semantic lane depth 50", "latency", "chroma_k50", "latency", "semantic"),
        ("Chroma k=10 / our whole `retrieve` (3 lanes)", "latency", "chroma_k10", "latency", "retrieve"),
        ("Chroma k=10 / our `page()` + render", "latency", "chroma_k10", "latency", "page"),
        (
            "Chroma k=10 where actor / our semantic k=10",
            "filtered",
            "chroma_where_actor_k10",
            "filtered",
            "semantic_k10",
        ),
        (
            "Chroma k=10 where type=fact / ours allow=fact labels",
            "filtered",
            "chroma_where_type_fact_k10",
            "filtered",
            "ours_type_fact_k10",
        ),
        ("Chroma k=10 where actor / our whole `retrieve`", "filtered", "chroma_where_actor_k10", "latency", "retrieve"),
    ]
    for title, ga, a, gb, b in comparisons:
        lines.append(f"| {title} | " + " | ".join(ratio(r[ga][a], r[gb][b]) for r in rows) + " |")
    nq = rows[0]["filtered"]["semantic_k10"]["n"]
    lines += [
        "",
        f"Filtered queries ({nq} queries per op, interleaved; type=fact is "
        f"{rows[0]['fact_share']:.0%} of memories; actor matches all of them):",
        "",
        f"| op | {sizes} |",
        "|---|" + "---|" * len(rows),
    ]
    for key in (
        "semantic_k10",
        "ours_type_fact_k10",
        "chroma_k10",
        "chroma_where_actor_k10",
        "chroma_where_type_fact_k10",
    ):
        lines.append(f"| {key} | " + " | ".join(cell(r["filtered"][key]) for r in rows) + " |")
    if all("end_to_end" in r for r in rows):
        ne = rows[0]["end_to_end"]["page_e2e_onnx"]["n"]
        lines += [
            "",
            f"## End to end, the query embedding included ({ne} questions per op, interleaved, no query cache)",
            "",
            "Ours: `page()` + `render()` computing the query vector itself (pinned, procedures, the three lanes, "
            "the cut report). Chroma: the same model's query vector, then `query` k=10 (what its "
            "embedding_function does inside `query`). ONNX = the default local backend (fp32 export of the packaged "
            "MiniLM weights, cosine 1.0 to torch); torch = sentence-transformers. Chroma default: the same "
            "collection asked by text, `query(query_texts=[q])`, through Chroma's own default embedding function "
            "(`ONNXMiniLM_L6_V2`: ONNX Runtime, its default session options, every text padded to 256 tokens), its "
            "files made offline from the same packaged weights (`benchmarks/chroma_minilm.py`; lowest cosine to our "
            f"vectors over 300 questions: {meta.get('chroma_default_ef_min_cosine', 'n/a')}, the same model).",
            "",
            f"| op | {sizes} |",
            "|---|" + "---|" * len(rows),
        ]
        for key, title in (
            ("page_e2e_onnx", "our `page()`, ONNX (default backend)"),
            ("chroma_e2e_onnx", "Chroma `query`, ONNX"),
            ("chroma_e2e_default", "Chroma `query` by text, its default embedding function"),
            ("page_e2e_torch", "our `page()`, torch"),
            ("chroma_e2e_torch", "Chroma `query`, torch"),
        ):
            lines.append(f"| {title} | " + " | ".join(cell(r["end_to_end"][key]) for r in rows) + " |")
        for title, a, b in (
            (
                "Chroma by text, its default function / our `page()` ONNX (each as shipped)",
                "chroma_e2e_default",
                "page_e2e_onnx",
            ),
            (
                "Chroma torch / our `page()` ONNX (each with its default local model runtime)",
                "chroma_e2e_torch",
                "page_e2e_onnx",
            ),
            ("Chroma ONNX / our `page()` ONNX (same runtime)", "chroma_e2e_onnx", "page_e2e_onnx"),
            ("Chroma torch / our `page()` torch (same runtime)", "chroma_e2e_torch", "page_e2e_torch"),
        ):
            lines.append(
                f"| ratio: {title} | " + " | ".join(ratio(r["end_to_end"][a], r["end_to_end"][b]) for r in rows) + " |"
            )
    lines += [
        "",
        "## Index, recall, open, memory",
        "",
        "| | " + " | ".join(f"{r['n']:,}" for r in rows) + " |",
        "|---|" + "---|" * len(rows),
    ]
    facts: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
        (f"HNSW recall@10 vs exact (semantic lane, ef {measured_floor(_CFG.hnsw_m)} at M={_CFG.hnsw_m})",
         lambda r: r["recall_at_10"]),
        ("Chroma recall@10 vs exact (defaults)", lambda r: r["chroma_recall_at_10"]),
        (f"HNSW build s (M={_CFG.hnsw_m}, ef_construction={_CFG.hnsw_ef_construction})", lambda r: r["hnsw_build_s"]),
        ("Chroma add s (same vectors + metadata)", lambda r: r["chroma_build_s"]),
        ("vectors read from DuckDB s", lambda r: r["vectors_fetch_s"]),
        ("`remember_many` memories/s (through the Pager, no embedding)", lambda r: r["build"]["remember_many_per_s"]),
        ("`put_vectors` s", lambda r: r["build"]["put_vectors_s"]),
        ("cold open, saved indexes valid: s (store / mirror / lanes)", lambda r: _open(r["opens"]["load_cold"])),
        ("warm open, saved indexes valid: s", lambda r: _open(r["opens"]["load_warm"])),
        ("cold open, semantic index dir deleted: s", lambda r: _open(r["opens"]["rebuild_semantic_cold"])),
        ("cold open, whole `.index` dir deleted: s", lambda r: _open(r["opens"]["rebuild_both_cold"])),
        ("close (saves both indexes) s", lambda r: r["opens"]["load_warm"]["close_with_save_s"]),
        ("open-probe process peak RSS MiB (no torch)", lambda r: r["opens"]["load_warm"]["peak_rss_mib"]),
        (
            "RSS added by opening the pager MiB",
            lambda r: r["opens"]["load_warm"]["rss_after_mib"] - r["opens"]["load_warm"]["rss_before_mib"],
        ),
        ("RSS added by the Chroma collection MiB", lambda r: r["rss_chroma_delta_mib"]),
        (
            "worker claim query (`store.pending`, 128) p50 ms",
            lambda r: r["store_queries"]["pending_claim_query"]["p50_ms"],
        ),
        ("`sync` poll (`store.pending_stats`) p50 ms", lambda r: r["store_queries"]["pending_stats_query"]["p50_ms"]),
        ("benchmark process peak RSS MiB (model + Chroma + pager)", lambda r: r["peak_rss_mib"]),
    ]
    for title, get in facts:
        lines.append(f"| {title} | " + " | ".join(str(get(r)) for r in rows) + " |")
    lines += ["", meta["notes"]]
    return "\n".join(lines)


def _open(probe: dict[str, Any]) -> str:
    return f"{probe['total_s']} ({probe['store_open_s']} / {probe['mirror_load_s']} / {probe['lanes_open_s']})"


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    xs = [r["n"] for r in rows]
    for key, style in (
        ("semantic", "o-"),
        ("lexical", "s-"),
        ("salience_all", "^-"),
        ("completion", "v-"),
        ("fuse", "*-"),
        ("select", "d-"),
        ("retrieve", "o-"),
        ("retrieve_salience_all", "o--"),
        ("chroma_k10", "x:"),
        ("chroma_k50", "+:"),
    ):
        ax.plot(
            xs, [r["latency"][key]["p50_ms"] for r in rows], style, label=key, linewidth=2 if "retrieve" in key else 1
        )
    ax.plot(xs, [r["filtered"]["chroma_where_actor_k10"]["p50_ms"] for r in rows], "x--", label="chroma where actor")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("memories")
    ax.set_ylabel("p50 ms (query embedding excluded)")
    ax.set_title("mempager retrieve and its lanes vs Chroma (same run, same vectors)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def query_embedding_costs(embedder: Any, questions: list[str]) -> dict[str, Any]:
    from mempager.embedders import HashEmbedder

    hashed = HashEmbedder()
    sample = questions[:200]
    return {
        "minilm": percentiles([_ms(lambda q=q: embedder.embed([q], role="query")) for q in sample]),
        "hash": percentiles([_ms(lambda q=q: hashed.embed([q], role="query")) for q in sample]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="10k only, 500 queries; prints, writes no results")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=0, help="queries per timed op (default: all 1,986)")
    parser.add_argument("--filtered-queries", type=int, default=300)
    parser.add_argument("--e2e-queries", type=int, default=300, help="queries per end-to-end op (embedding included)")
    parser.add_argument("--locomo", type=Path, default=LOCOMO)
    parser.add_argument("--open-probe", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.open_probe:
        print(json.dumps(open_probe(args.open_probe)), flush=True)
        return
    if args.quick:
        args.sizes, args.queries, args.filtered_queries = [10_000], args.queries or 500, 100
    from mempager.embedders import LocalEmbedder
    from mempager.embedders.local_backend import load_local

    load_before = os.getloadavg()
    code = git_state()
    turns, questions = locomo_texts(args.locomo)
    docs, qvecs = embeddings(args.locomo)
    if args.queries:
        questions, qvecs = questions[: args.queries], qvecs[: args.queries]
    start = time.perf_counter()
    embedder = LocalEmbedder()
    model_load_s = time.perf_counter() - start
    query_cost = query_embedding_costs(embedder, questions)
    onnx_dir = Path(tempfile.mkdtemp(prefix="mempager-bench-onnx-"))  # the export: made once, outside the repo
    onnx = (load_local(backend="onnx", cache_dir=onnx_dir), load_local(backend="onnx", cache_dir=onnx_dir))
    log("Chroma's default MiniLM embedding function, made offline from the packaged weights")
    chroma_ef = chroma_default_ef(onnx_dir / "chroma")
    chroma_ef_cosine = same_model_cosine(chroma_ef, onnx[0], questions[:300])
    rows = []
    with tempfile.TemporaryDirectory(prefix="mempager-bench-retrieve-") as work:
        for n in args.sizes:
            rows.append(
                bench_size(
                    n,
                    Path(work),
                    turns,
                    docs,
                    questions,
                    qvecs,
                    embedder,
                    args.filtered_queries,
                    onnx,
                    args.e2e_queries,
                    chroma_ef,
                )
            )
            log(f"size {n:,}: retrieve p50 {rows[-1]['latency']['retrieve']['p50_ms']} ms")
    load_after = os.getloadavg()
    load = f"{load_before[0]:.2f} / {load_before[1]:.2f} before, {load_after[0]:.2f} / {load_after[1]:.2f} after"
    notes = (
        f"Data: {len(docs):,} real all-MiniLM-L6-v2 LoCoMo turn vectors tiled to each size (sigma {SIGMA}/dim), "
        f"{len(questions):,} LoCoMo questions as queries with their MiniLM vectors. Pager defaults: "
        "fusion `score`, lane depth 50, top_k 8, budget 6000 tokens. Query embedding, excluded above: MiniLM p50 "
        f"{query_cost['minilm']['p50_ms']:.2f} ms, hash embedder p50 {query_cost['hash']['p50_ms']:.3f} ms; "
        f"MiniLM model load (first construction, sha256 check) {model_load_s:.1f} s. Chroma: in-memory "
        "EphemeralClient, cosine, default HNSW (M=16, ef_construction=100, ef_search=100), include=distances. "
        "Open times come from a fresh process each, page cache evicted first for `cold`; `lanes` = HNSW + "
        f"BM25 open (load+verify+catch-up, or rebuild from the store). 1-min/5-min load average {load} on "
        f"{os.cpu_count()} cores shared with other engineers: compare within this run, and read p95 as noisy. "
        f"Code measured: commit {code['commit']}"
        + (f" with uncommitted changes in {', '.join(code['uncommitted'])}." if code["uncommitted"] else ".")
    )
    meta = {
        "notes": notes,
        "code": code,
        "load_average": [list(load_before), list(load_after)],
        "model_load_s": round(model_load_s, 2),
        "query_embedding": query_cost,
        "sigma": SIGMA,
        "k": K,
        "queries": len(questions),
        "chroma_default_ef_min_cosine": round(chroma_ef_cosine, 7),
    }
    text = report(rows, meta)
    if args.quick:
        print(text)
        log("--quick: results files not written")
        return
    if len(rows) > 1:
        plot(rows, Path(__file__).resolve().parent / "results" / "retrieve.png")
        text += "\n\n![latency vs size per lane](retrieve.png)"
    path = write_results(
        "retrieve",
        {"params": meta, "results": rows},
        text,
        extra_versions=("sentence-transformers", "torch", "chromadb"),
    )
    print(text)
    log(f"wrote {path}")


if __name__ == "__main__":
    main()
