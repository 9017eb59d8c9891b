"""Recall at a budget on LoCoMo with the local MiniLM model: `python -m benchmarks.bench_locomo`.

The same run as `mempager bench locomo --data ../shared/data/locomo10.json`, writing into
benchmarks/results/ (locomo.json, locomo.md, locomo.png).
"""

from __future__ import annotations

import argparse
import os

from mempager.cli.main import main

from ._common import LOCOMO, RESULTS

if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()
    argv = ["bench", "locomo", "--data", str(LOCOMO), "--out", str(RESULTS)]
    raise SystemExit(main(argv + (["--limit", str(args.limit)] if args.limit else [])))
