"""`mempager bench locomo`: evidence recall at k and at token budgets on LoCoMo.

One store per conversation, every turn a memory (an event at its session time), questions of
categories 1-4. Reported for each lane alone, for the configured fusion, for weighted RRF and a
few weightings around the default (the numbers that chose it), overall and per category; plus a
plot of recall against tokens. Nothing in the library knows it is being benchmarked: this
module only calls the public write path and the same lane/fusion code ``retrieve`` uses.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import evalkit, locomo
from .config import PagerConfig
from .protocols import Embedder

Ranker = Callable[[evalkit.QuestionRecord], Sequence[int]]
REFERENCE = {"MiniLM cosine (exact), data README": {5: 0.353, 10: 0.440, 20: 0.542},
             "BM25 (bm25s), data README": {5: 0.430, 10: 0.501, 20: 0.584},
             "RRF(MiniLM, BM25) k=60, data README": {5: 0.444, 10: 0.525, 20: 0.596}}


def rankers(config: PagerConfig) -> dict[str, Ranker]:
    out: dict[str, Ranker] = {
        "semantic": evalkit.lane_ranker("semantic"),
        "lexical": evalkit.lane_ranker("lexical"),
        "salience (unindexed only: default mode)": evalkit.lane_ranker("salience"),
        "salience (all memories)": evalkit.lane_ranker("salience_all"),
        f"fused ({config.fusion}, default)": evalkit.config_ranker(config),
        "fused rrf k=60 (semantic 1, lexical 1)": evalkit.rrf_ranker({"semantic": 1.0, "lexical": 1.0}, 60),
        "fused rrf + salience(all) lane": evalkit.rrf_ranker(
            {"semantic": 1.0, "lexical": 1.0, "salience_all": 0.5}, 60),
    }
    for sem in (0.3, 0.4, 0.6):
        weights = {**config.lane_weights, "semantic": sem, "lexical": 1.0 - sem}
        out[f"fused score semantic {sem} / lexical {1 - sem:.1f}"] = evalkit.score_ranker(
            weights, config.semantic_floor)
    return out


def run(
    data: Path,
    embedder: Embedder,
    config: PagerConfig,
    out_dir: Path,
    limit: int | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    conversations = locomo.load(data)[:limit]
    records = evalkit.collect(conversations, embedder, replace(config, embedder="auto"), depth=300)
    result = evalkit.report(records, rankers(config))
    result["decay"] = decay_check(records, config)
    result.update(embedder=embedder.name, fusion=config.fusion, lane_weights=dict(config.lane_weights),
                  semantic_floor=config.semantic_floor, conversations=len(conversations),
                  date=datetime.now(timezone.utc).isoformat(timespec="seconds"), **dict(extra or {}))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "locomo.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    (out_dir / "locomo.md").write_text(markdown(result))
    plot(result, out_dir / "locomo.png")
    return result


def decay_check(records: Sequence[evalkit.QuestionRecord], config: PagerConfig) -> dict[str, int]:
    """How many relevant memories decay alone keeps out of the top 10 (per fusion)."""
    default = evalkit.config_ranker(config)
    all_decay = evalkit.rrf_ranker({"semantic": 1.0, "lexical": 1.0, "salience_all": 0.5}, 60)
    all_flat = evalkit.rrf_ranker({"semantic": 1.0, "lexical": 1.0, "salience_all_nodecay": 0.5}, 60)
    lane_decay, lane_flat = evalkit.lane_ranker("salience_all"), evalkit.lane_ranker("salience_all_nodecay")
    return {
        "default fusion (salience sees only unembedded memories)": evalkit.excluded_by_decay(
            records, default, default, 10),
        "rrf with a salience lane over all memories": evalkit.excluded_by_decay(records, all_decay, all_flat, 10),
        "salience lane alone over all memories": evalkit.excluded_by_decay(records, lane_decay, lane_flat, 10),
        "evidence memories in total": sum(len(r.evidence) for r in records),
    }


def _row(name: str, values: Mapping[Any, float], keys: Sequence[Any]) -> str:
    return f"| {name} | " + " | ".join(f"{values[k]:.3f}" if k in values else "" for k in keys) + " |"


def markdown(result: Mapping[str, Any]) -> str:
    configs = result["configurations"]
    lines = [
        f"# LoCoMo evidence recall ({result['questions']} questions, categories 1-4, "
        f"{result['conversations']} conversations)", "",
        f"{result['date']} · embedder `{result['embedder']}` · fusion `{result['fusion']}` weights "
        f"{result['lane_weights']} · semantic floor {result['semantic_floor']}", "",
        "Recall = mean over questions of |evidence ∩ retrieved| / |evidence| (strict).", "",
        "## Recall at k", "", "| configuration | " + " | ".join(f"R@{k}" for k in evalkit.KS) + " |",
        "|---|" + "---|" * len(evalkit.KS),
    ]
    lines += [_row(name, _int_keys(c["at_k"]), evalkit.KS) for name, c in configs.items()]
    lines += [_row(f"reference: {n}", v, evalkit.KS) for n, v in REFERENCE.items()]
    lines += ["", "## Recall at a token budget (greedy packing, bytes/4 tokens)", "",
              "| configuration | " + " | ".join(f"{b} tok" for b in evalkit.BUDGETS) + " |",
              "|---|" + "---|" * len(evalkit.BUDGETS)]
    lines += [_row(name, _int_keys(c["at_budget"]), evalkit.BUDGETS) for name, c in configs.items()]
    default = next(name for name in configs if name.startswith("fused") and name.endswith("default)"))
    lines += ["", "## Decay", "", "Relevant (evidence) memories that decay alone keeps out of the top 10 — the same "
              "ranking with the recency term switched off would have included them:", "",
              "| fusion | evidence lost to decay |", "|---|---|"]
    lines += [f"| {name} | {n} |" for name, n in result["decay"].items()]
    lines += ["", "The default never lets decay exclude anything: once a memory is embedded the salience lane "
              "no longer ranks it, and before that decay only orders the reserved places.", ""]
    lines += ["", f"## Per category: {default} vs the lanes (R@10)", "",
              "| category | " + " | ".join(["fused", "semantic", "lexical"]) + " |", "|---|---|---|---|"]
    for cat in configs[default]["by_category"]:
        vals = [configs[n]["by_category"][cat]["at_k"] for n in (default, "semantic", "lexical")]
        lines.append(f"| {cat} | " + " | ".join(f"{_int_keys(v)[10]:.3f}" for v in vals) + " |")
    lines += ["", "![recall against tokens](locomo.png)", ""]
    return "\n".join(lines)


def _int_keys(values: Mapping[Any, float]) -> dict[int, float]:
    return {int(k): float(v) for k, v in values.items()}


def plot(result: Mapping[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for name, c in result["configurations"].items():
        if name.startswith("salience (unindexed"):
            continue  # empty once everything is embedded: a flat line at 0
        values = _int_keys(c["at_budget"])
        style = "-" if "default" in name else ("--" if name in ("semantic", "lexical") else ":")
        ax.plot(list(values), list(values.values()), style, marker="o", label=name,
                linewidth=2.5 if "default" in name else 1.2)
    ax.set_xscale("log")
    ax.set_xlabel("token budget (bytes/4)")
    ax.set_ylabel("evidence recall")
    ax.set_title(f"LoCoMo recall at a budget — {result['embedder']}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
