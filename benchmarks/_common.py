"""Shared benchmark plumbing: machine facts, percentiles, and writing results (JSON + markdown)."""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
LOCOMO = Path(os.environ.get("MEMPAGER_LOCOMO", Path(__file__).resolve().parents[2] / "shared/data/locomo10.json"))


def versions(*packages: str) -> dict[str, str]:
    out = {"python": sys.version.split()[0]}
    for name in ("mempager", "duckdb", "numpy", "hnswlib", *packages):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
    }


def peak_rss_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def percentiles(samples_ms: Sequence[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 4)

    return {"p50_ms": round(statistics.median(ordered), 4), "p95_ms": at(0.95), "p99_ms": at(0.99), "n": len(ordered)}


def time_calls(fn: Callable[[], object], repeat: int, warmup: int = 5) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def git_state() -> dict[str, Any]:
    """The commit measured, and whether the measured packages had uncommitted changes (others edit them)."""
    root = Path(__file__).resolve().parents[1]

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
        return done.stdout

    commit = git("rev-parse", "--short", "HEAD").strip()
    if not commit:  # an exported tree (git archive): say which commit it was exported from
        return {"commit": os.environ.get("MEMPAGER_BENCH_COMMIT", "unknown") + " (exported tree)", "uncommitted": []}
    dirty = git("status", "--porcelain", "--", "pager", "index", "embedders").splitlines()  # "XY path"
    return {"commit": commit, "uncommitted": [line[3:] for line in dirty]}


def write_results(name: str, data: dict[str, Any], table: str, extra_versions: Sequence[str] = ()) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    code = git_state()
    payload = {
        "benchmark": name,
        "date": stamp,
        "machine": machine(),
        "versions": versions(*extra_versions),
        "code": code,
        "load_average_at_write": [round(x, 2) for x in os.getloadavg()],
        **data,
    }
    (RESULTS / f"{name}.json").write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    m = payload["machine"]
    dirty = f" (uncommitted changes in {', '.join(code['uncommitted'])})" if code["uncommitted"] else ""
    header = (
        f"# {name}\n\n{stamp} · commit {code['commit']}{dirty} · {m['cpu']} · {m['cores']} cores · "
        f"{m['memory_gib']} GiB · " + " · ".join(f"{k} {v}" for k, v in payload["versions"].items()) + "\n\n"
    )
    (RESULTS / f"{name}.md").write_text(header + table.strip() + "\n")
    return RESULTS / f"{name}.json"
