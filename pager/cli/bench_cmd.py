"""``mempager bench locomo|longmemeval``: the offline recall benchmarks, from the command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from mempager.config import PagerConfig
from mempager.errors import InvalidInput

COMMAND = "bench"


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        COMMAND,
        parents=[common],
        help="offline benchmarks: `bench locomo --data locomo10.json`, `bench longmemeval --data FILE.json`",
    )
    p.add_argument("suite", choices=["locomo", "longmemeval"])
    p.add_argument(
        "--data",
        required=True,
        help="locomo: path to locomo10.json; longmemeval: a LongMemEval JSON file or generated:updates[:N[:SEED]]",
    )
    p.add_argument("--out", default=None, help="results directory (default benchmarks/results if present)")
    p.add_argument("--limit", type=int, default=None, help="only the first N conversations (locomo) / questions")
    p.add_argument("--keep-stores", default=None, metavar="DIR", help="longmemeval: keep each question's store in DIR")


def run(args: argparse.Namespace) -> int:
    """``mempager bench``: run one suite with the embedder the environment picks."""
    from mempager.embedders import EmbedderSettings, pick_embedder

    forced = getattr(args, "embedder", None) or "auto"
    choice = pick_embedder(EmbedderSettings.from_env(None, actor="bench", force=forced))
    print(f"mempager bench {args.suite}: embedder {choice.embedder.name}", file=sys.stderr)
    out = (
        Path(args.out)
        if args.out
        else (Path("benchmarks/results") if Path("benchmarks/results").is_dir() else Path("mempager-bench"))
    )
    if args.suite == "longmemeval":
        return _bench_longmemeval(args, choice.embedder, out)
    from mempager.evaluation.bench_locomo import run

    result = run(Path(args.data), choice.embedder, PagerConfig.from_env(), out, limit=args.limit)
    default = next(n for n in result["configurations"] if n.startswith("fused") and n.endswith("default)"))
    r10 = result["configurations"][default]["at_k"][10]
    print(f"fused R@10 {r10:.3f} over {result['questions']} questions; results in {out}/locomo.md")
    return 0


def _bench_longmemeval(args: argparse.Namespace, embedder: Any, out: Path) -> int:
    from mempager.evaluation import longmemeval

    if args.limit is not None and args.limit < 1:
        raise InvalidInput(f"--limit must be at least 1, got {args.limit}")
    keep = Path(args.keep_stores) if args.keep_stores else None
    result = longmemeval.run(args.data, embedder, PagerConfig.from_env(), out, limit=args.limit, keep=keep)
    overall = result["groups"]["overall"]
    line = (
        f"session R@10 strict {overall['strict']['at_k'][10]:.3f}, any-hit {overall['any_hit']['at_k'][10]:.3f} "
        f"over {result['questions']} questions"
    )
    for key in ("newest_wins", "older_wins"):
        if result[key]:
            line += f"; {key.replace('_', ' ')} {result[key]['wins']:.3f} (chance {result[key]['wins_chance']:.3f})"
    print(f"{line}; results in {out}/{result['name']}.md")
    return 0
