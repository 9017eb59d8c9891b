"""Embedder speed: the local MiniLM, the hash fallback, and what HTTP adds on top of the model.

    python -m benchmarks.bench_embedders [--texts 384] [--queries 100] [--repeat 3]

* local throughput: texts/s embedding real conversation turns (LoCoMo) in batches of 64;
* single-query latency p50/p95 (one short text per call, as a page fault does);
* HTTP overhead: the same texts through ``HttpEmbedder`` → a real OpenAI-format server on
  127.0.0.1 (``embedders.testing.EmbeddingServer``) serving the same loaded model, against calling
  the model directly, batch by batch and query by query in pairs, in the same run. The ratio is
  the cost of JSON, sockets and the server thread.

The LoCoMo file is only read, never copied; without it the texts are generated sentences.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import random
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from mempager.embedders import HashEmbedder, HttpEmbedder, HttpOptions, LocalEmbedder
from mempager.embedders.testing import EmbeddingServer

from ._common import LOCOMO, peak_rss_mib, percentiles, time_calls, write_results

BATCH = 64


def load_texts(n: int) -> tuple[list[str], str]:
    """The first ``n`` dialogue turns of LoCoMo, or generated sentences if it is not there."""
    if LOCOMO.is_file():
        texts: list[str] = []
        for sample in json.loads(LOCOMO.read_text()):
            conversation = sample["conversation"]
            for key, turns in conversation.items():
                if key.startswith("session_") and isinstance(turns, list):
                    texts.extend(turn["text"] for turn in turns if turn.get("text"))
        if len(texts) >= n:
            return texts[:n], f"LoCoMo turns ({LOCOMO.name})"
    rng = random.Random(3)
    words = "deploy release vault key dog park weekend painting concert job sister trip recipe".split()
    return [" ".join(rng.choice(words) for _ in range(14)) for _ in range(n)], "generated sentences"


def seconds(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def single_queries(embedder: LocalEmbedder | HttpEmbedder, queries: Sequence[str]) -> list[float]:
    """Milliseconds per one-text ``embed`` call, cycling through ``queries``."""
    texts = itertools.cycle(queries)
    return time_calls(lambda: embedder.embed([next(texts)], role="query"), repeat=len(queries))


def paired(
    a: Callable[[Sequence[str]], object],
    b: Callable[[Sequence[str]], object],
    inputs: Sequence[Sequence[str]],
    repeat: int,
) -> tuple[list[float], list[float]]:
    """Seconds of ``a`` and ``b`` on each input, back to back: the pair shares whatever load the
    machine has at that moment, so their ratio stays meaningful on a busy box."""
    times_a, times_b = [], []
    for _ in range(repeat):
        for item in inputs:
            times_a.append(seconds(functools.partial(a, item)))
            times_b.append(seconds(functools.partial(b, item)))
    return times_a, times_b


def bench_local_and_http(
    local: LocalEmbedder, texts: Sequence[str], queries: Sequence[str], repeat: int
) -> dict[str, Any]:
    with EmbeddingServer(local, model="all-MiniLM-L6-v2") as server:
        http = HttpEmbedder.provider(
            server.url, model="all-MiniLM-L6-v2", dim=local.dim, options=HttpOptions(batch_size=BATCH)
        )
        local.embed(texts[:BATCH])  # warm both paths
        http.embed(texts[:BATCH])
        chunks = [texts[i : i + BATCH] for i in range(0, len(texts), BATCH)]
        direct_b, http_b = paired(local.embed, http.embed, chunks, repeat)
        direct_q, http_q = paired(local.embed, http.embed, [[q] for q in queries], 1)
        http.close()
    n = len(texts) * repeat
    direct_ms, http_ms = [t * 1000 for t in direct_q], [t * 1000 for t in http_q]
    local_result = {"throughput_texts_per_s": round(n / sum(direct_b), 1), "single_query": percentiles(direct_ms)}
    http_result = {
        "batch_direct_texts_per_s": round(n / sum(direct_b), 1),
        "batch_http_texts_per_s": round(n / sum(http_b), 1),
        "batch_time_ratio_http_over_direct": round(
            statistics.median(h / d for h, d in zip(http_b, direct_b, strict=True)), 3
        ),
        "single_query_direct": percentiles(direct_ms),
        "single_query_http": percentiles(http_ms),
        "single_query_overhead_p50_ms": round(
            statistics.median(h - d for h, d in zip(http_ms, direct_ms, strict=True)), 3
        ),
    }
    return {"local": local_result, "http": http_result}


def bench_hash(texts: Sequence[str], queries: Sequence[str], repeat: int) -> dict[str, Any]:
    """Hash throughput, and one HTTP round trip to a hash-backed server: the transport cost alone."""
    embedder = HashEmbedder(dim=384)
    best = min(seconds(lambda: embedder.embed(texts)) for _ in range(repeat))
    with EmbeddingServer(embedder) as server, HttpEmbedder.provider(server.url, model="hash", dim=384) as http:
        round_trip = percentiles(single_queries(http, queries))
    return {"throughput_texts_per_s": round(len(texts) / best, 1), "http_round_trip": round_trip}


def table(r: dict[str, Any]) -> str:
    loc, http, q = r["local"], r["http"], r["local"]["single_query"]
    http_q, direct_q = http["single_query_http"], http["single_query_direct"]
    trip = r["hash"]["http_round_trip"]
    return f"""
Texts: {r["n_texts"]} {r["corpus"]} (mean {r["mean_chars"]} chars); batch {BATCH}; {r["torch_threads"]} torch threads.

| metric | value |
|---|---|
| local `st:all-MiniLM-L6-v2` throughput (direct) | {loc["throughput_texts_per_s"]:,} texts/s |
| local single query p50 / p95 | {q["p50_ms"]:.2f} / {q["p95_ms"]:.2f} ms |
| HTTP (127.0.0.1 server, same model) throughput | {http["batch_http_texts_per_s"]:,} texts/s |
| batch time ratio HTTP / direct (median of paired batches) | {http["batch_time_ratio_http_over_direct"]}× |
| single query p50 HTTP / direct | {http_q["p50_ms"]:.2f} / {direct_q["p50_ms"]:.2f} ms |
| HTTP single-query overhead (median of paired differences) | {http["single_query_overhead_p50_ms"]:.2f} ms |
| HTTP round trip alone (hash-backed server) p50 / p95 | {trip["p50_ms"]:.2f} / {trip["p95_ms"]:.2f} ms |
| hash `hash-v2-384` throughput | {r["hash"]["throughput_texts_per_s"]:,} texts/s |
| model load (torch import + weights + sha256) | {r["load_s"]:.2f} s |

peak RSS {r["peak_rss_mib"]} MiB; 1-min load average before / after: {r["load_before"]} / {r["load_after"]}
(other work on the machine slows everything here; compare ratios from one run, not absolutes across runs)
"""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=384)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # belt and braces: the model loads from disk anyway
    load_before = round(os.getloadavg()[0], 2)
    texts, corpus = load_texts(args.texts)
    queries = [t[:120] for t in texts[: args.queries]]
    start = time.perf_counter()
    local = LocalEmbedder(batch_size=BATCH)
    load_s = time.perf_counter() - start
    import torch

    result = {
        "corpus": corpus,
        "n_texts": len(texts),
        "mean_chars": round(sum(map(len, texts)) / len(texts), 1),
        "torch_threads": torch.get_num_threads(),
        "load_s": round(load_s, 3),
        **bench_local_and_http(local, texts, queries, args.repeat),
        "hash": bench_hash(texts, queries, args.repeat),
        "peak_rss_mib": peak_rss_mib(),
        "load_before": load_before,
        "load_after": round(os.getloadavg()[0], 2),
    }
    path = write_results("embedders", result, table(result), extra_versions=("torch", "sentence-transformers", "httpx"))
    print(table(result))
    print(f"wrote {path} and {path.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
