"""LoCoMo recall and retrieve speed in one run (issue 19): `python -m benchmarks.bench_recall_speed`.

Issue 19 asks for its quality goals and its speed goal side by side, measured in the same run:

* recall: the real `retrieve` with the default `PagerConfig` over LoCoMo's categories 1-4, per half
  (conversations 1-5 and 6-10, the halves every constant was tuned on, each reported on the other)
  and over all ten, per category beside the LoCoMo paper's DRAGON retriever;
* speed: `retrieve` p50 / p95 at 100,000 memories with the query embedding excluded (goal <= 1.0 ms),
  with the speaker lane on and off, beside Chroma's `query` k=10 over the same vectors; and ingest
  (`remember_many` memories/s, the lexical lane included; vectors stored separately).

    HF_HUB_OFFLINE=1 python -m benchmarks.bench_recall_speed [--size 100000] [--queries 1986]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import mempager
from mempager import PagerConfig
from mempager.evaluation import evalkit, locomo
from mempager.evaluation.halves import HALVES

from ._common import LOCOMO, git_state, percentiles, write_results
from .bench_hnsw import embeddings, locomo_texts
from .bench_retrieve import ACTOR, NameOnly, build_store, chroma_collection, corpus, interleaved
from .locomo_levers_report import CATEGORY_NAMES, DRAGON_R10, GOALS

COLUMNS = (("at_k", 5, "R@5"), ("at_k", 10, "R@10"), ("at_budget", 2000, "2000 tok"))


def log(message: str) -> None:
    print(f"[bench_recall_speed {time.strftime('%H:%M:%S')}] {message}", flush=True)


def quality(data: Path, per_half: int | None = None) -> dict[str, Any]:
    """The default retrieve's recall per half and over all ten conversations (real calls only)."""
    from mempager.embedders import LocalEmbedder

    config = replace(PagerConfig(), embedder="auto")
    default = evalkit.pager_variant("default", config)
    conversations = locomo.load(data)
    out: dict[str, Any] = {}
    every: list[evalkit.QuestionResult] = []
    embedder = LocalEmbedder()
    for half, indices in HALVES.items():
        log(f"quality: half {half}")
        part = [conversations[i] for i in indices][:per_half]
        measured = evalkit.evaluate(part, embedder, config, [default], real="default")
        every += measured.results
        out[half] = {**evalkit.summarize(measured.results, ["default"])["default"], "questions": len(measured.results)}
    out["all"] = {**evalkit.summarize(every, ["default"])["default"], "questions": len(every)}
    out["replay_agreement"] = evalkit.agreement(every)
    return out


def speed(n: int, queries: int, work: Path) -> dict[str, Any]:
    """retrieve at ``n`` memories (speaker lane on and off) beside Chroma, and ingest."""
    turns, questions = locomo_texts(LOCOMO)
    docs, qvecs = embeddings(LOCOMO)
    questions, qvecs = questions[:queries], qvecs[:queries]
    items, vectors = corpus(turns, docs, n)
    log(f"speed: building a {n:,}-memory store")
    built = build_store(work / "speed.duckdb", items, vectors, NameOnly())
    labels, by_label, types = built.pop("labels"), built.pop("vectors"), built.pop("types")
    del items, vectors
    p = mempager.open(work / "speed.duckdb", ACTOR, config=PagerConfig(), embedder=NameOnly())
    try:
        p.workers.stop()
        p.semantic.embed_query = dict(zip(questions, qvecs, strict=True)).__getitem__  # not what we time
        on = p.config
        off = on.with_(lane_weights={**on.lane_weights, "speaker": 0.0})

        def retrieve_with(config: PagerConfig) -> Any:
            def op(i: int) -> object:
                p.config = p.retriever.config = config
                return p.retrieve(questions[i])

            return op

        log("speed: Chroma collection over the same vectors")
        _client, col, chroma_build_s = chroma_collection(n, labels, by_label, types)
        ops = {
            "retrieve": retrieve_with(on),
            "retrieve_speaker_off": retrieve_with(off),
            "chroma_k10": lambda i: col.query(query_embeddings=qvecs[i : i + 1], n_results=10, include=["distances"]),
        }
        log(f"speed: {len(questions):,} queries per op, interleaved")
        samples = interleaved(ops, len(questions))
        p.config = p.retriever.config = on
    finally:
        p.close()
    return {
        "memories": n,
        "queries": len(questions),
        "latency": {name: percentiles(s) for name, s in samples.items()},
        "ingest": {k: v for k, v in built.items() if k != "memories"},
        "chroma_build_s": round(chroma_build_s, 2),
    }


def _cell(stats: dict[str, float]) -> str:
    return f"{stats['p50_ms']:.3f} / {stats['p95_ms']:.3f}"


def report(q: dict[str, Any], s: dict[str, Any], meta: dict[str, Any]) -> str:
    lines = [
        "LoCoMo recall of the default `retrieve` and its latency at "
        f"{s['memories']:,} memories, measured in one run (issue 19). {meta['notes']}",
        "",
        "## Recall (real `retrieve` calls, default `PagerConfig`, all-MiniLM-L6-v2)",
        "",
        "| questions | n | " + " | ".join(c[2] for c in COLUMNS) + " |",
        "|---|---|" + "---|" * len(COLUMNS),
    ]
    names = {"A": "half A (conversations 1-5)", "B": "half B (conversations 6-10)", "all": "both halves"}
    for key, name in names.items():
        cells = [f"{q[key][kind][value]:.3f}" for kind, value, _ in COLUMNS]
        lines.append(f"| {name} | {q[key]['questions']} | " + " | ".join(cells) + " |")
    lines.append("| goal | | " + " | ".join(f">= {GOALS[c[2]]}" for c in COLUMNS) + " |")
    lines += ["", "Per category, R@10 over both halves, beside DRAGON (the LoCoMo paper):", ""]
    lines += ["| category | ours | DRAGON |", "|---|---|---|"]
    for name in CATEGORY_NAMES.values():
        ours = q["all"]["by_category"][name]["at_k"][10]
        lines.append(f"| {name} | {ours:.3f} | {DRAGON_R10[name]:.3f} |")
    lat, ing = s["latency"], s["ingest"]
    ratio = lat["chroma_k10"]["p50_ms"] / lat["retrieve"]["p50_ms"]
    lines += [
        "",
        f"## Speed at {s['memories']:,} memories (query embedding excluded; {s['queries']:,} queries per op, "
        "interleaved in blocks of 50)",
        "",
        "| op | p50 / p95 ms |",
        "|---|---|",
        f"| **`retrieve`, default config** (goal: p50 <= 1.0 ms) | {_cell(lat['retrieve'])} |",
        f"| `retrieve`, speaker lane off | {_cell(lat['retrieve_speaker_off'])} |",
        f"| Chroma `query` k=10, same vectors | {_cell(lat['chroma_k10'])} |",
        f"| ratio Chroma p50 / our `retrieve` p50 | {ratio:.2f}x |",
        "",
        f"Ingest: `remember_many` {ing['remember_many_per_s']:,} memories/s ({s['memories']:,} memories in "
        f"{ing['remember_many_s']} s, lexical lane included, workers stopped); vectors stored afterwards in "
        f"{ing['put_vectors_s']} s.",
        "",
        f"Replay agreement of the recall harness with the real calls: {q['replay_agreement']:.2%}.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1986)
    parser.add_argument("--data", type=Path, default=LOCOMO)
    parser.add_argument("--quick", action="store_true", help="1 conversation a half, 5,000 memories; prints only")
    args = parser.parse_args()
    if args.quick:
        args.size, args.queries = 5_000, min(args.queries, 200)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    load_before = os.getloadavg()
    started = time.perf_counter()
    q = quality(args.data, 1 if args.quick else None)
    with tempfile.TemporaryDirectory(prefix="mempager-bench-recall-speed-") as work:
        s = speed(args.size, args.queries, Path(work))
    load_after = os.getloadavg()
    code = git_state()
    notes = (
        f"Speed data: {args.size:,} memories from the real MiniLM LoCoMo turn vectors tiled to size (as "
        "`bench_retrieve`); LoCoMo questions as queries with their MiniLM vectors. 1-min load average "
        f"{load_before[0]:.2f} before, {load_after[0]:.2f} after, on {os.cpu_count()} shared cores; the whole run "
        f"took {time.perf_counter() - started:.0f} s."
    )
    meta = {"notes": notes, "load_average": [list(load_before), list(load_after)], "code": code}
    text = report(q, s, meta)
    if args.quick:
        print(text)
        return
    path = write_results(
        "recall_speed",
        {"params": vars(args) | {"data": str(args.data)}, "quality": q, "speed": s, **meta},
        text,
        extra_versions=("chromadb",),
    )
    print(text)
    log(f"wrote {path}")


if __name__ == "__main__":
    main()
