"""The lexical lane (BM25): LoCoMo evidence recall per tokenizer/parameter choice, and speed at scale.

    python -m benchmarks.bench_lexical [--sizes 10000 100000] [--queries 2000]

Recall: one index per LoCoMo conversation, each turn indexed as "Speaker: text [shares photo: caption]",
questions of categories 1-4, R@k = mean of |evidence in top k| / |evidence| (the data README's task).

Speed corpus: LoCoMo has 5,882 turns, so larger corpora are synthesised from them: document i is
"<speaker>: <first half of a random turn> <second half of another random turn> (ref <8 random hex>,
v<i % 7>.<i % 13>)". Word statistics stay conversational, the vocabulary keeps growing with the unique
refs (as ids and hashes do in real memories). Queries are all 1,986 LoCoMo questions, k=50.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import mempager  # noqa: F401  (imported before index: see tests/index/conftest.py)
from mempager.index.lexical import LexicalIndex
from mempager.index.tokenize import TokenizerConfig

from ._common import LOCOMO, peak_rss_mib, percentiles, time_calls, write_results

KS = (1, 3, 5, 10, 20)
REFERENCE = {"retriever": "bm25s (data README)", "R@5": 0.430, "R@10": 0.501, "R@20": 0.584}
K1, B = 1.2, 0.5  # the defaults of LexicalIndex
Conversation = tuple[dict[str, str], list[tuple[str, set[str]]]]


def load_locomo(path: Path) -> tuple[list[Conversation], list[str]]:
    convs: list[Conversation] = []
    all_questions: list[str] = []
    for sample in json.loads(path.read_text()):
        turns: dict[str, str] = {}
        for key, session in sample["conversation"].items():
            if key.startswith("session_") and isinstance(session, list):
                for turn in session:
                    caption = f" [shares photo: {turn['blip_caption']}]" if turn.get("blip_caption") else ""
                    turns[turn["dia_id"]] = f"{turn['speaker']}: {turn['text']}{caption}"
        questions = []
        for qa in sample["qa"]:
            all_questions.append(str(qa["question"]))
            ids = {f"D{a}:{int(b)}" for e in qa.get("evidence", []) for a, b in re.findall(r"D:?(\d+):(\d+)", e)}
            if qa["category"] in (1, 2, 3, 4) and ids & turns.keys():
                questions.append((str(qa["question"]), ids & turns.keys()))
        convs.append((turns, questions))
    return convs, all_questions


def recall(convs: list[Conversation], config: TokenizerConfig, k1: float, b: float) -> dict[str, float]:
    totals = dict.fromkeys(KS, 0.0)
    n = 0
    for turns, questions in convs:
        ids = list(turns)
        index = LexicalIndex(k1=k1, b=b, tokenizer=config)
        index.add(list(range(len(ids))), [turns[i] for i in ids])
        for question, evidence in questions:
            hits = [ids[label] for label, _ in index.search(question, max(KS))]
            for k in KS:
                totals[k] += len(evidence & set(hits[:k])) / len(evidence)
            n += 1
    return {"questions": n, **{f"R@{k}": round(v / n, 4) for k, v in totals.items()}}


def recall_tables(convs: list[Conversation]) -> dict[str, list[dict[str, Any]]]:
    variants = []
    for stem in ("none", "plural", "light"):
        for sub in (False, True):
            row = recall(convs, TokenizerConfig(stem=stem, subtokens=sub), K1, B)
            variants.append({"stem": stem, "subtokens": sub, "stopwords": True, **row})
            print("tokenizer", variants[-1], flush=True)
    row = recall(convs, TokenizerConfig(stopwords=False), K1, B)
    variants.append({"stem": "light", "subtokens": True, "stopwords": False, **row})
    grid = []
    for k1 in (0.9, 1.2, 1.5, 2.0):
        for b in (0.0, 0.3, 0.5, 0.75, 0.9):
            grid.append({"k1": k1, "b": b, **recall(convs, TokenizerConfig(), k1, b)})
            print("params", grid[-1], flush=True)
    return {"tokenizer": variants, "params": grid}


def synthetic(turns: list[str], n: int, seed: int = 5) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        a, b = rng.choice(turns).split(), rng.choice(turns).split()
        out.append(
            " ".join(a[: len(a) // 2 + 1] + b[len(b) // 2 :]) + f" (ref {rng.getrandbits(32):08x}, v{i % 7}.{i % 13})"
        )
    return out


def speed(texts: list[str], questions: list[str], repeat: int) -> dict[str, Any]:
    n = len(texts)
    start, cpu = time.perf_counter(), time.process_time()
    index = LexicalIndex()
    index.add(list(range(n)), texts)
    build_s, build_cpu_s = time.perf_counter() - start, time.process_time() - cpu  # CPU: the box is shared
    queries = iter(questions * (repeat // len(questions) + 2))
    search = percentiles(time_calls(lambda: index.search(next(queries), 50), repeat=repeat, warmup=50))
    syntax = iter(syntax_queries(texts))
    match = percentiles(time_calls(lambda: index.match(next(syntax)), repeat=600, warmup=10))
    out: dict[str, Any] = {
        "docs": n,
        "build_s": round(build_s, 3),
        "build_cpu_s": round(build_cpu_s, 3),
        "build_docs_per_s": round(n / build_s),
        "search_k50": search,
        "match": match,
    }
    if n >= 50_000:
        out.update(writes(index, texts))
    return out


def syntax_queries(texts: list[str]) -> list[str]:
    """Explicit-recall queries over words of the corpus: AND pairs, two-word phrases, prefix minus a word."""
    words = re.findall(r"[a-z]{5,}", " ".join(texts[:2000]).lower())[:400]
    pairs = list(zip(words, words[1:], strict=False))
    return [f"{a} {b}" for a, b in pairs[::2]] + [f'"{a} {b}"' for a, b in pairs] + [f"{a[:5]}* -{b}" for a, b in pairs]


def writes(index: LexicalIndex, texts: list[str]) -> dict[str, Any]:
    n, m = len(texts), 2000
    rng = random.Random(9)
    fresh = [rng.choice(texts) for _ in range(m)]
    start = time.perf_counter()
    for i, text in enumerate(fresh):
        index.add([n + i], [text])
    add_rate = m / (time.perf_counter() - start)
    start = time.perf_counter()
    for i, text in enumerate(fresh):
        index.add([i], [text])  # replace
    replace_rate = m / (time.perf_counter() - start)
    start = time.perf_counter()
    for i in range(m, 2 * m):
        index.remove([i])
    remove_rate = m / (time.perf_counter() - start)
    with tempfile.TemporaryDirectory() as d:
        start = time.perf_counter()
        index.save(Path(d), meta={"bench": True})
        save_s = time.perf_counter() - start
        size = sum(p.stat().st_size for p in Path(d).iterdir())
        loaded = LexicalIndex()
        start = time.perf_counter()
        loaded.load(Path(d), expect_meta={"bench": True})
        load_s = time.perf_counter() - start
    assert loaded.search("When did Caroline go to the support group?", 50) == index.search(
        "When did Caroline go to the support group?", 50
    )
    return {
        "single_add_per_s": round(add_rate),
        "replace_per_s": round(replace_rate),
        "remove_per_s": round(remove_rate),
        "save_s": round(save_s, 3),
        "load_s": round(load_s, 3),
        "saved_mib": round(size / 2**20, 1),
    }


def table(rec: dict[str, list[dict[str, Any]]], speeds: list[dict[str, Any]], load: str) -> str:
    head = "| " + " | ".join(f"R@{k}" for k in KS) + " |"

    def cells(row: dict[str, Any]) -> str:
        return " | ".join(str(row.get(f"R@{k}", "")) for k in KS)

    lines = [
        f"LoCoMo turn-level evidence recall, categories 1-4, {rec['tokenizer'][0]['questions']} questions, "
        f"one index per conversation (k1={K1}, b={B} unless stated).",
        "",
        "| tokenizer | " + head[2:],
        "|---|" + "---|" * len(KS),
        f"| reference: {REFERENCE['retriever']} | | | {REFERENCE['R@5']} | {REFERENCE['R@10']} | {REFERENCE['R@20']} |",
    ]
    for r in rec["tokenizer"]:
        name = f"stem={r['stem']}, subtokens={'on' if r['subtokens'] else 'off'}" + (
            "" if r["stopwords"] else ", no stopword removal"
        )
        lines.append(f"| {name} | {cells(r)} |")
    lines += [
        "",
        "BM25 parameters (default tokenizer: stem=light, subtokens on):",
        "",
        "| k1 | b | " + head[2:],
        "|---|---|" + "---|" * len(KS),
    ]
    lines += [f"| {r['k1']} | {r['b']} | {cells(r)} |" for r in rec["params"]]
    lines += [
        "",
        f"Speed (synthetic corpus from LoCoMo turns, see the module docstring; load average {load}):",
        "",
        "| docs | build s (CPU s) | search k=50 p50 ms | p95 ms | match p50 ms | p95 ms |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {s['docs']:,} | {s['build_s']} ({s['build_cpu_s']}) | {s['search_k50']['p50_ms']} | "
        f"{s['search_k50']['p95_ms']} | "
        f"{s['match']['p50_ms']} | {s['match']['p95_ms']} |"
        for s in speeds
    ]
    big = speeds[-1]
    if "single_add_per_s" in big:
        lines += [
            "",
            f"At {big['docs']:,} docs: single-document add {big['single_add_per_s']:,}/s, replace "
            f"{big['replace_per_s']:,}/s, remove {big['remove_per_s']:,}/s; save {big['save_s']} s "
            f"({big['saved_mib']} MiB), load (verify + rebuild postings) {big['load_s']} s.",
        ]
    return "\n".join([*lines, "", f"peak RSS {peak_rss_mib()} MiB"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=2000)
    args = parser.parse_args()
    convs, questions = load_locomo(LOCOMO)
    rec = recall_tables(convs)
    turns = [t for conv, _ in convs for t in conv.values()]
    speeds = []
    for size in args.sizes:
        speeds.append(speed(synthetic(turns, size), questions, args.queries))
        print("speed", speeds[-1], flush=True)
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    write_results(
        "lexical",
        {
            "recall": rec,
            "reference": REFERENCE,
            "speed": speeds,
            "load_average": load,
            "defaults": {"k1": K1, "b": B, "tokenizer": "stem=light, subtokens, stopwords"},
            "peak_rss_mib": peak_rss_mib(),
        },
        table(rec, speeds, load),
    )
    print(table(rec, speeds, load))


if __name__ == "__main__":
    main()
