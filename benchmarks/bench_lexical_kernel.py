"""The lexical lane's compiled BM25 kernel beside the numpy search it replaced, same index, same questions.

    python -m benchmarks.bench_lexical_kernel [--sizes 10000 100000 1000000] [--queries 1986] [--before REV]

Corpus: bench_scale's texts without their vectors: each memory is a random LoCoMo turn ("Speaker:
text"), made unique by a suffix of three of the turns' 2,000 most frequent words, created at a random
minute of two years; 80% are events, which key on their episode's neighbours (context keys, the
default ``PagerConfig`` context), the rest on their own text. One ``LexicalIndex`` per size, built in
this process (no store: the lane's search alone is timed).

Timed, interleaved in blocks of 50 questions so load drifts hit both alike: ``search_scored(question,
50, wanted)`` as retrieval asks it (wanted = 50 labels the question's semantic hits would name, here
its first 50 own-text hits of a shorter question, fixed per question) through the kernel
(``index.lexical_search``), and the numpy reference (``lexical_context.context_scored``) on the same
state. Every answer pair is compared: the top 50 and every wanted score must be equal, bit for bit.

``--before REV`` adds a third op, timed in the same blocks: the kernel as it was at git revision REV
(``git show REV:index/_bm25.c``, compiled here with this pyproject's flags for it into a scratch
directory and loaded beside the installed one), so a change to the kernel is measured against its
predecessor side by side; its answers are compared too.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import tomllib

import mempager  # noqa: F401  (imported before index: see tests/index/conftest.py)
from mempager import PagerConfig
from mempager.index import lexical_search
from mempager.index.lexical import LexicalIndex
from mempager.index.lexical_context import context_scored

from ._common import LOCOMO, git_state, peak_rss_mib, percentiles, write_results
from .bench_hnsw import locomo_texts
from .bench_scale import suffix_words

DEPTH = 50  # the lane depth a page fault asks for (PagerConfig.lane_depth)
BLOCK = 50


def log(message: str) -> None:
    print(f"[bench_lexical_kernel {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def corpus(turns: list[str], n: int) -> tuple[list[str], list[float]]:
    """n unique texts and their times (NaN: not an event, keyed on its own text)."""
    rng = np.random.default_rng(n)
    words = suffix_words(turns)
    base = len(words)
    picks = rng.integers(0, len(turns), size=n)
    minutes = rng.integers(0, 2 * 365 * 24 * 60, size=n)
    texts, times = [], []
    for i, turn in enumerate(picks.tolist()):
        texts.append(f"{turns[turn]} (re: {words[i // base**2 % base]} {words[i // base % base]} {words[i % base]})")
        times.append(float(minutes[i] * 60) if i % 5 else float("nan"))  # 4 in 5 are events
    return texts, times


def compile_kernel_at(rev: str, scratch: Path) -> Any:
    """The ``Kernel`` class of index/_bm25.c as of ``rev``, built with the flags pyproject gives it."""
    root = Path(__file__).resolve().parents[1]
    source = subprocess.run(
        ["git", "show", f"{rev}:index/_bm25.c"], cwd=root, capture_output=True, text=True, check=True
    ).stdout
    (scratch / "_bm25.c").write_text(source)
    modules = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["ext-modules"]
    flags = next(m for m in modules if m["name"] == "mempager.index._bm25")["extra-compile-args"]
    built = scratch / f"_bm25{sysconfig.get_config_var('EXT_SUFFIX')}"
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    include = sysconfig.get_paths()["include"]
    subprocess.run(
        [compiler, "-shared", "-fPIC", *flags, f"-I{include}", str(scratch / "_bm25.c"), "-o", str(built)], check=True
    )
    spec = importlib.util.spec_from_file_location("bench_before._bm25", built)  # PyInit__bm25: the name's tail
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Kernel


def build(turns: list[str], n: int) -> tuple[LexicalIndex, float]:
    texts, times = corpus(turns, n)
    index = LexicalIndex(context=PagerConfig().context())
    start = time.perf_counter()
    for lo in range(0, n, 50_000):
        index.add(list(range(lo, min(lo + 50_000, n))), texts[lo : lo + 50_000], times[lo : lo + 50_000])
    return index, time.perf_counter() - start


def bench_size(turns: list[str], questions: list[str], n: int, before: Any = None) -> dict[str, Any]:
    log(f"size {n:,}: indexing")
    index, build_s = build(turns, n)
    state, episodes, k1, b = index._state, index.episodes, index.k1, index.b
    terms = [index.tokenizer.terms(q) for q in questions]
    # what the semantic lane would name: a fixed 50 labels per question (the hits of its first 3 words)
    wanted = [[label for label, _ in index.search(" ".join(q.split()[:3]), DEPTH)] for q in questions]

    def kernel(i: int) -> Any:
        return lexical_search.search_scored(state, terms[i], DEPTH, wanted[i], episodes, k1, b)

    def numpy_ref(i: int) -> Any:
        return context_scored(state, terms[i], DEPTH, wanted[i], episodes, k1, b)

    ops: dict[str, Callable[[int], Any]] = {"kernel": kernel, "numpy": numpy_ref}
    if before is not None:  # the kernel of an earlier revision, on the same state (its own scratch)
        now, then = lexical_search.kernel_of(state), before(prune_from=lexical_search.PRUNE_FROM)

        def swapped(kernel_object: Any) -> Callable[[int], Any]:
            def run(i: int) -> Any:
                state.kernel = kernel_object
                return lexical_search.search_scored(state, terms[i], DEPTH, wanted[i], episodes, k1, b)

            return run

        ops = {"kernel": swapped(now), "before": swapped(then), "numpy": numpy_ref}
    for i in range(min(20, len(questions))):  # warm both
        for fn in ops.values():
            fn(i)
    took: dict[str, list[float]] = {name: [] for name in ops}
    differ = 0
    for lo in range(0, len(questions), BLOCK):
        answers: dict[str, list[Any]] = {}
        for name, fn in ops.items():
            answers[name] = []
            for i in range(lo, min(lo + BLOCK, len(questions))):
                start = time.perf_counter()
                answers[name].append(fn(i))
                took[name].append((time.perf_counter() - start) * 1000)
        differ += sum(a != b for a, b in zip(answers["kernel"], answers["numpy"], strict=True))
        if "before" in answers:
            differ += sum(a != b for a, b in zip(answers["before"], answers["numpy"], strict=True))
    out = {
        "memories": n,
        "index_build_s": round(build_s, 2),
        "latency": {name: percentiles(samples) for name, samples in took.items()},
        "answers_differing": differ,
        "questions": len(questions),
        "rows_pruned_from": lexical_search.PRUNE_FROM,
    }
    log(f"size {n:,}: kernel p50 {out['latency']['kernel']['p50_ms']} ms, numpy {out['latency']['numpy']['p50_ms']} ms")
    return out


def report(rows: list[dict[str, Any]], notes: str, before: str | None = None) -> str:
    sizes = [f"{r['memories']:,}" for r in rows]
    lines = [
        "| `search_scored`, k=50 + 50 wanted | " + " | ".join(f"{s} p50 / p95 ms" for s in sizes) + " |",
        "|---|" + "---|" * len(rows),
    ]
    named = [("numpy", "numpy reference (the search before the kernel)")]
    if before is not None:
        named.append(("before", f"compiled kernel at {before}"))
    for name, label in (*named, ("kernel", "compiled kernel")):
        cells = [f"{r['latency'][name]['p50_ms']:.3f} / {r['latency'][name]['p95_ms']:.3f}" for r in rows]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    ratios = [f"{r['latency']['numpy']['p50_ms'] / r['latency']['kernel']['p50_ms']:.2f}x" for r in rows]
    lines.append("| numpy / kernel, p50 | " + " | ".join(ratios) + " |")
    if before is not None:
        ratios = [f"{r['latency']['before']['p50_ms'] / r['latency']['kernel']['p50_ms']:.2f}x" for r in rows]
        lines.append(f"| kernel at {before} / kernel, p50 | " + " | ".join(ratios) + " |")
    lines.append(
        "| answers differing (top 50 or a wanted score) | "
        + " | ".join(f"{r['answers_differing']} of {r['questions']}" for r in rows)
        + " |"
    )
    lines.append("| index build s | " + " | ".join(str(r["index_build_s"]) for r in rows) + " |")
    return "\n".join(lines) + "\n\n" + notes


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r["memories"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, label, color in (("numpy", "numpy reference", "tab:blue"), ("kernel", "compiled kernel", "tab:green")):
        ax.plot(sizes, [r["latency"][name]["p50_ms"] for r in rows], marker="o", color=color, label=f"{label} p50")
        p95 = [r["latency"][name]["p95_ms"] for r in rows]
        ax.plot(sizes, p95, marker=".", linestyle=":", color=color, label=f"{label} p95")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("memories")
    ax.set_ylabel("ms per question")
    ax.set_title("lexical lane search_scored (k=50), LoCoMo questions")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=0, help="questions (default: all 1,986)")
    parser.add_argument("--locomo", type=Path, default=LOCOMO)
    parser.add_argument("--no-write", action="store_true", help="print the table, write no results files")
    parser.add_argument("--before", metavar="REV", help="also time the kernel of this git revision, side by side")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mempager-kernel-before-") as scratch:
        run(args, compile_kernel_at(args.before, Path(scratch)) if args.before else None)


def run(args: argparse.Namespace, earlier: Any) -> None:
    before = os.getloadavg()
    turns, questions = locomo_texts(args.locomo)
    if args.queries:
        questions = questions[: args.queries]
    rows = [bench_size(turns, questions, n, earlier) for n in args.sizes]
    after = os.getloadavg()
    code = git_state()
    notes = (
        f"{len(questions):,} LoCoMo questions per size, interleaved in blocks of {BLOCK}; one LexicalIndex per "
        "size built in this process (bench_scale's texts, 4 in 5 events keyed on their episode's neighbours). "
        f"The kernel sums every posting below {lexical_search.PRUNE_FROM:,} rows and prunes (WAND) from there. "
        f"Peak RSS of this process {peak_rss_mib():,.0f} MiB. 1-min/5-min load average {before[0]:.2f} / "
        f"{before[1]:.2f} before, {after[0]:.2f} / {after[1]:.2f} after, on {os.cpu_count()} cores shared with "
        f"other work. Code measured: commit {code['commit']}"
        + (f" with uncommitted changes in {', '.join(code['uncommitted'])}." if code["uncommitted"] else ".")
    )
    if args.before:
        notes += f" The kernel at {args.before}: that revision's index/_bm25.c, built here with the same flags."
    text = report(rows, notes, args.before)
    if args.no_write:
        print(text)
        return
    results = Path(__file__).resolve().parent / "results"
    if len(rows) > 1:
        plot(rows, results / "lexical_kernel.png")
        text += "\n\n![kernel vs numpy](lexical_kernel.png)"
    record = {"results": rows, "load_average": [list(before), list(after)], "before": args.before}
    write_results("lexical_kernel", record, text)
    print(text)


if __name__ == "__main__":
    main()
