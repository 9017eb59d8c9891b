"""Bulk ingest (``remember_many``) before and after this round's write-path changes, side by side.

    HF_HUB_OFFLINE=1 python -m benchmarks.bench_ingest_before_after [--size 1000000]

One process, two fresh stores, the same items (bench_scale's corpus: LoCoMo turns, then distinct
texts with a suffix of common words; no embedding). Batches of 10,000 go to the two stores in turn,
the order of before and after alternating per batch, so a drift of the machine's speed (large on
these shared VMs: the same run varied by a third within minutes) hits both alike:

* before: the code the changes replaced, patched in for its batches: the raw-token scan by the
  regex (``RAW_TOKEN.findall`` after NFKC), the token-to-unit lookups in Python (a flat list, a set
  difference, a ``map`` of ``__getitem__``), ``naive_utc`` by ``datetime.replace`` and one
  ``secrets.token_hex(8)`` a memory id;
* after: the code as it ships (``index/_tokens.c``, ``validate.new_ids``).

Both stores must end equal (same memories, same lexical vocabulary and postings count); the run
fails otherwise. Results: results/ingest_before_after.{json,md}.
"""

from __future__ import annotations

import argparse
import secrets
import sys
import tempfile
import time
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

import mempager
from mempager import PagerConfig
from mempager.index import tokenize
from mempager.store import writes

from ._common import LOCOMO, git_state, write_results
from .bench_hnsw import embeddings, locomo_texts
from .bench_retrieve import ACTOR, NameOnly
from .bench_scale import BATCH, corpus


def log(message: str) -> None:
    print(f"[bench_ingest_before_after {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- the code the changes replaced ---------------------------------------------------------------
def _regex_raw_tokens(self: tokenize.Tokenizer, text: str) -> list[str]:
    return tokenize.RAW_TOKEN.findall(unicodedata.normalize("NFKC", text))  # type: ignore[no-any-return]


def _python_unit_ids(
    self: tokenize.Vocabulary, tokenizer: tokenize.Tokenizer, docs: list[list[str]], total: int
) -> Any:
    flat = [raw for doc in docs for raw in doc]
    new = list(set(flat).difference(self.unit_of))
    if new:
        self._add_units(new, [tokenizer.unit(raw, remember=False) for raw in new])
    return np.fromiter(map(self.unit_of.__getitem__, flat), np.int64, total)


def _replace_naive_utc(value: datetime) -> datetime:
    return value if value.tzinfo is None else value.astimezone(timezone.utc).replace(tzinfo=None)


def _token_hex_ids(n: int) -> list[str]:
    return [secrets.token_hex(8) for _ in range(n)]


@contextmanager
def before() -> Iterator[None]:
    saved = (tokenize.Tokenizer.raw_tokens, tokenize.Vocabulary._unit_ids, writes.naive_utc, writes.new_ids)
    tokenize.Tokenizer.raw_tokens = _regex_raw_tokens  # type: ignore[method-assign]
    tokenize.Vocabulary._unit_ids = _python_unit_ids  # type: ignore[method-assign]
    writes.naive_utc = _replace_naive_utc
    writes.new_ids = _token_hex_ids
    try:
        yield
    finally:
        tokenize.Tokenizer.raw_tokens, tokenize.Vocabulary._unit_ids, writes.naive_utc, writes.new_ids = saved  # type: ignore[method-assign]


# -- the run -------------------------------------------------------------------------------------
def rates(seconds: list[float]) -> dict[str, float]:
    tail = seconds[-max(1, len(seconds) // 10) :]
    return {
        "whole_per_s": round(BATCH * len(seconds) / sum(seconds)),
        "last_tenth_per_s": round(BATCH * len(tail) / sum(tail)),
        "median_batch_per_s": round(BATCH / float(np.median(seconds))),
        "batch_s_p50": round(float(np.median(seconds)), 4),
        "batch_s_max": round(max(seconds), 4),
    }


def fingerprint(p: Any) -> tuple[int, int, int]:
    state = p.lexical.index._state
    return len(p.store.texts_since(ACTOR, 0)[0]), len(state.vocab.terms), int(state.npost.sum())


def run(size: int, scratch: Path) -> dict[str, Any]:
    turns, _ = locomo_texts(LOCOMO)
    docs, _ = embeddings(LOCOMO)
    items, _ = corpus(turns, docs, size)
    pagers = {
        name: mempager.open(scratch / f"{name}.duckdb", ACTOR, config=PagerConfig(), embedder=NameOnly())  # type: ignore[arg-type]
        for name in ("before", "after")
    }
    for p in pagers.values():
        p.workers.stop()  # no embedding: the vectors are not what is timed
    took: dict[str, list[float]] = {"before": [], "after": []}
    for b, lo in enumerate(range(0, size, BATCH)):
        batch = items[lo : lo + BATCH]
        for name in ("before", "after") if b % 2 == 0 else ("after", "before"):
            with before() if name == "before" else nullcontext():
                start = time.perf_counter()
                pagers[name].remember_many(batch)
                took[name].append(time.perf_counter() - start)
        if b % 10 == 9:
            last = {name: f"{BATCH / seconds[-1]:,.0f}/s" for name, seconds in took.items()}
            log(f"{lo + BATCH:,}/{size:,}: before {last['before']}, after {last['after']}")
    prints = {name: fingerprint(p) for name, p in pagers.items()}
    for p in pagers.values():
        p.close()
    if prints["before"] != prints["after"]:
        raise SystemExit(f"the two stores differ (memories, terms, postings): {prints}")
    return {
        "memories": size,
        "stores_equal": True,
        "fingerprint": prints["after"],
        **{n: rates(s) for n, s in took.items()},
    }


def report(result: dict[str, Any], notes: str) -> str:
    b, a = result["before"], result["after"]
    lines = [
        f"| `remember_many`, {result['memories']:,} memories in batches of {BATCH:,} | before | after "
        "| after / before |",
        "|---|---|---|---|",
    ]
    for key, what in (
        ("whole_per_s", "memories/s, whole load"),
        ("median_batch_per_s", "memories/s, median batch"),
        ("last_tenth_per_s", "memories/s, last tenth of the load"),
    ):
        lines.append(f"| {what} | {b[key]:,} | {a[key]:,} | {a[key] / b[key]:.2f}x |")
    lines.append(f"| slowest batch, s | {b['batch_s_max']} | {a['batch_s_max']} | |")
    memories, terms, postings = result["fingerprint"]
    lines.append("")
    lines.append(f"Both stores ended equal: {memories:,} memories, {terms:,} lexical terms, {postings:,} postings.")
    return "\n".join(lines) + "\n\n" + notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--no-write", action="store_true", help="print the table, write no results files")
    args = parser.parse_args()
    code = git_state()
    with tempfile.TemporaryDirectory(prefix="mempager-bench-ingest-") as scratch:
        result = run(args.size, Path(scratch))
    notes = (
        "Corpus: bench_scale's (LoCoMo turns, then distinct texts with a suffix of three common words; types "
        "cycling, created at random minutes of two years). Two fresh stores in one process, batches to each in "
        "turn, the order alternating per batch. Before = the regex raw-token scan, the Python token-to-unit "
        "lookups, naive_utc by datetime.replace and token_hex ids, patched in for its batches; after = the "
        "shipped code. The slowest batches of both are DuckDB's checkpoints (the WAL passing 256 MiB), "
        f"unchanged by this round. Code measured: commit {code['commit']}"
        + (f" with uncommitted changes in {', '.join(code['uncommitted'])}." if code["uncommitted"] else ".")
    )
    text = report(result, notes)
    print(text)
    if not args.no_write:
        data = {"params": {"size": args.size, "batch": BATCH}, "results": result}
        log(f"wrote {write_results('ingest_before_after', data, text)}")


if __name__ == "__main__":
    main()
