"""How fast the CLI answers: each command's median wall time beside `python -c "import duckdb, numpy"`.

    python -m benchmarks.bench_cli [--memories 1000] [--runs 10]

The store is built with the default embedder chain (no gateway or provider configured: the packaged
MiniLM), so its active model is the local one, as on a user's machine. Each command runs ``--runs``
times in a fresh process (one warm-up first, so the OS file cache is warm for every row, and every
module's bytecode cached outside the tree); the baseline is measured in the same loop, interleaved
with the commands, so machine noise falls on all of them alike. Goal (issue 17): commands that embed
nothing within 3x the baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._common import LOCOMO, write_results

EMBEDS = {"retrieve"}
BASELINE = 'python -c "import duckdb, numpy"'


def texts(n: int) -> list[str]:
    if LOCOMO.exists():
        from mempager.evaluation import locomo

        turns = [t.memory_text() for conv in locomo.load(LOCOMO) for t in conv.turns]
        return turns[:n]
    return [f"memory {i}: we talked about topic {i % 37} and place {i % 11}" for i in range(n)]


def build(store: Path, n: int) -> str:
    import mempager

    with mempager.open(store, actor="default") as p:
        uris = p.remember_many([{"type": "event", "text": t} for t in texts(n)])
        p.set_identity("I am the release agent.")
        p.add_rule("Never push to main on Fridays.")
        assert p.sync(timeout=600), "embedding did not finish"
        model = p.semantic.model
    assert model.startswith("st:"), f"the store's model is {model}, not the local one"
    return uris[len(uris) // 2]


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    elapsed = (time.perf_counter() - start) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {done.stderr.strip()[-400:]}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--no-write", action="store_true", help="print, do not write benchmarks/results")
    args = parser.parse_args(argv)
    exe = str(Path(sys.executable).with_name("mempager"))
    with tempfile.TemporaryDirectory(prefix="mempager-bench-cli-") as tmp:
        # Bytecode as an installed package has it: `make` sets PYTHONDONTWRITEBYTECODE (tests write
        # nothing into the tree), which would have every fresh process compile mempager's modules
        # again (~0.1 s of one core here, 29 of them on `stats`). The warm-up writes every module's
        # bytecode under the temp dir instead (PYTHONPYCACHEPREFIX), never beside the sources.
        env = {
            k: v for k, v in os.environ.items() if not k.startswith("MEMPAGER_") and k != "PYTHONDONTWRITEBYTECODE"
        } | {"HF_HUB_OFFLINE": "1", "PYTHONPYCACHEPREFIX": str(Path(tmp) / "pycache")}
        store = Path(tmp) / "agent.duckdb"
        print(f"building a store of {args.memories} memories with the local model ...", file=sys.stderr)
        uri = build(store, args.memories)
        env["MEMPAGER_STORE"] = str(store)
        commands = {
            "baseline": [sys.executable, "-c", "import duckdb, numpy"],
            "stats": [exe, "stats"],
            "recall": [exe, "recall", "painting"],
            "pinned": [exe, "pinned"],
            "get": [exe, "get", uri],
            "retrieve": [exe, "retrieve", "what does she paint?"],
        }
        samples: dict[str, list[float]] = {name: [] for name in commands}
        for cmd in commands.values():  # warm-up: file cache, bytecode
            timed(cmd, env)
        for i in range(args.runs):
            for name, cmd in commands.items():
                samples[name].append(timed(cmd, env))
            print(f"run {i + 1}/{args.runs}", file=sys.stderr)
    base = statistics.median(samples["baseline"])
    rows = {
        name: {
            "median_ms": round(statistics.median(ms), 1),
            "min_ms": round(min(ms), 1),
            "ratio_to_baseline": round(statistics.median(ms) / base, 2),
            "embeds": name in EMBEDS,
            "runs": len(ms),
        }
        for name, ms in samples.items()
    }
    light = [r["ratio_to_baseline"] for n, r in rows.items() if n != "baseline" and not r["embeds"]]
    lines = [
        f"Store: {args.memories} memories, active model st:all-MiniLM-L6-v2; median of {args.runs} fresh "
        'processes per command, interleaved with the baseline `python -c "import duckdb, numpy"`.',
        "",
        "| command | embeds | median ms | ratio to baseline |",
        "|---|---|---|---|",
        *[
            f"| `{BASELINE if n == 'baseline' else 'mempager ' + n}` | "
            f"{'yes' if r['embeds'] else 'no'} | {r['median_ms']:.0f} | {r['ratio_to_baseline']:.2f}x |"
            for n, r in rows.items()
        ],
        "",
        f"Worst ratio among the commands that embed nothing: {max(light):.2f}x (goal: <= 3x).",
    ]
    table = "\n".join(lines)
    print(table)
    if not args.no_write:
        data = {"memories": args.memories, "runs": args.runs, "commands": rows, "worst_light_ratio": max(light)}
        print(write_results("cli", data, table, extra_versions=("torch", "sentence-transformers")))
    print(json.dumps({"worst_light_ratio": max(light)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
