"""What the side-by-side benchmarks at scale run on: bench_scale's corpus and vectors at each size,
reused from a ``bench_scale --keep`` directory (``--store``) or built in a temporary one, and the
LoCoMo questions with their MiniLM vectors (query embedding excluded from every timing)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._common import LOCOMO
from .bench_hnsw import embeddings, locomo_texts
from .bench_scale import build


def add_arguments(parser: argparse.ArgumentParser, sizes: Sequence[int]) -> None:
    """--sizes, --store, --queries, --locomo and --no-write, as each of these benchmarks takes them."""
    parser.add_argument("--sizes", type=int, nargs="+", default=list(sizes))
    parser.add_argument("--store", type=Path, help="a bench_scale --keep directory holding scale-SIZE.duckdb")
    parser.add_argument("--queries", type=int, default=0, help="questions (default: all 1,986)")
    parser.add_argument("--locomo", type=Path, default=LOCOMO)
    parser.add_argument("--no-write", action="store_true", help="print the table, write no results files")


@dataclass(frozen=True)
class Workload:
    turns: list[str]
    docs: np.ndarray  # the turns' vectors, for building a store
    questions: list[str]
    vectors: np.ndarray  # each question's vector


def workload(args: argparse.Namespace) -> Workload:
    turns, questions = locomo_texts(args.locomo)
    docs, vectors = embeddings(args.locomo)
    if args.queries:
        questions, vectors = questions[: args.queries], vectors[: args.queries]
    return Workload(turns, docs, questions, vectors)


def stores(args: argparse.Namespace, work: Workload, scratch: Path, log: Callable[[str], None]) -> Iterator[Path]:
    """Each size's store: from ``--store`` (it must be there), else built in ``scratch``."""
    for n in args.sizes:
        path = (args.store or scratch) / f"scale-{n}.duckdb"
        if not path.exists():
            if args.store is not None:
                raise SystemExit(f"{path} is missing: keep it with bench_scale --keep, or leave out --store")
            log(f"building {n:,} memories")
            build(path, work.turns, work.docs, n)
        yield path
