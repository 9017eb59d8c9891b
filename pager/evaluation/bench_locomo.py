"""`mempager bench locomo`: evidence recall at k and at token budgets on LoCoMo.

One store per conversation, every turn a memory (an event at its session time), questions of
categories 1-4. Every number is what ``retrieve`` returns (see ``pager.evalkit``): the configured
fusion by calling it, each lane alone and the weight sweep that chose the defaults by replaying
its selection and packing. Reported overall and per category, plus a plot of recall against
tokens. Nothing in the library knows it is being benchmarked: this module only calls the public
write path and the same lane, fusion and packing code ``retrieve`` runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mempager.config import PagerConfig
from mempager.evaluation import evalkit, locomo
from mempager.evaluation.evalkit import DecayPair, Variant
from mempager.protocols import Embedder

Ranker = Callable[[evalkit.QuestionRecord], Sequence[int]]
REFERENCE = {
    "MiniLM cosine (exact), data README": {5: 0.353, 10: 0.440, 20: 0.542},
    "BM25 (bm25s), data README": {5: 0.430, 10: 0.501, 20: 0.584},
    "RRF(MiniLM, BM25) k=60, data README": {5: 0.444, 10: 0.525, 20: 0.596},
}
SEMANTIC_SHARES = (0.3, 0.4, 0.5, 0.6, 0.7)
SALIENCE_WEIGHTS = (0.0, 0.1, 0.2)
BOTH = {"semantic": "semantic", "lexical": "lexical"}


def default_name(config: PagerConfig) -> str:
    return f"fused ({config.fusion}, default)"


def lanes_alone() -> list[Variant]:
    return [
        Variant("semantic", {"semantic": "semantic"}, {"semantic": 1.0}),
        Variant("lexical", {"lexical": "lexical"}, {"lexical": 1.0}),
        Variant("salience (unindexed only: default mode)", {"salience": "salience"}, {"salience": 1.0}),
        Variant("salience (all memories)", {"salience": "salience_all"}, {"salience": 1.0}),
    ]


def main_variants(config: PagerConfig) -> list[Variant]:
    """The table rows: each lane alone, the pager's fusion, plain RRF of the two content lanes."""
    rrf = Variant("fused rrf k=60 (semantic 1, lexical 1)", BOTH, {"semantic": 1.0, "lexical": 1.0}, "rrf")
    return [*lanes_alone(), evalkit.pager_variant(default_name(config), config), rrf]


def sweep_variants(config: PagerConfig) -> list[Variant]:
    """The weightings around the default, with the salience weight in the modes where it acts.

    With everything embedded the default salience lane (unembedded memories only) is empty, so
    its weight can only matter while memories wait for vectors: measured with the semantic lane
    down (salience then ranks every memory), and with ``salience_mode="all"``.
    """
    floor, sal = config.semantic_floor, config.lane_weights.get("salience", 0.0)
    time = config.lane_weights.get("time", 0.0)  # the time lane (dated questions) rides along in every row
    prior = config.lane_weights.get("prior", 0.0)  # and so does the salience prior
    speaker = config.lane_weights.get("speaker", 0.0)  # and the speaker lane
    out = [
        Variant(
            f"score: semantic {s} / lexical {1 - s:.1f} / salience {sal} / time {time} / prior {prior}"
            f" / speaker {speaker}",
            {**BOTH, "salience": "salience", "time": "time", "prior": "prior", "speaker": "speaker"},
            {
                "semantic": s,
                "lexical": round(1 - s, 2),
                "salience": sal,
                "time": time,
                "prior": prior,
                "speaker": speaker,
            },
            semantic_floor=floor,
        )
        for s in SEMANTIC_SHARES
    ]
    riding = {"salience": "salience", "time": "time", "prior": "prior", "speaker": "speaker"}
    for lane, what in (("prior", "the salience prior"), ("time", "the time lane"), ("speaker", "the speaker lane")):
        out.append(  # each riding lane taken out, to show what it adds
            Variant(
                f"without {what}: default weights, {lane} 0",
                {**BOTH, **{name: src for name, src in riding.items() if name != lane}},
                {**config.lane_weights, lane: 0.0},
                semantic_floor=floor,
            )
        )
    lexical = config.lane_weights.get("lexical", 0.0)
    down = {"lexical": "lexical", "salience": "salience_all", "time": "time", "prior": "prior", "speaker": "speaker"}
    out += [
        Variant(
            f"embedder down: lexical {lexical} / salience {w}",
            down,
            {"lexical": lexical, "salience": w, "time": time, "prior": prior, "speaker": speaker},
            semantic_floor=floor,
        )
        for w in SALIENCE_WEIGHTS
    ]
    out += [
        Variant(
            f"salience_mode all: default weights, salience {w}",
            {**BOTH, "salience": "salience_all", "time": "time", "prior": "prior", "speaker": "speaker"},
            {**config.lane_weights, "salience": w},
            semantic_floor=floor,
        )
        for w in SALIENCE_WEIGHTS[1:]
    ]
    return out


def decay_pairs(config: PagerConfig) -> list[DecayPair]:
    default = evalkit.pager_variant(default_name(config), config)
    name = f"salience_mode all: default weights, salience {config.lane_weights.get('salience', 0.0)}"
    all_mode = evalkit.pager_variant(name, replace(config, salience_mode="all"))
    alone = lanes_alone()[3]

    def flat(v: Variant, name: str) -> Variant:
        nodecay = {lane: f"{src}_nodecay" if src.startswith("salience") else src for lane, src in v.lanes.items()}
        return replace(v, name=name, lanes=nodecay)

    return [
        DecayPair(
            "default fusion (salience ranks only unembedded memories)", default, flat(default, "no decay: default")
        ),
        DecayPair("score fusion with salience_mode all", all_mode, flat(all_mode, "no decay: salience_mode all")),
        DecayPair("salience lane alone over all memories", alone, flat(alone, "no decay: salience alone")),
    ]


def rankers(config: PagerConfig) -> dict[str, Ranker]:
    """Ranking-only views of the table rows (for comparing store backends on the same lanes)."""
    return {v.name: evalkit.variant_ranker(v) for v in main_variants(config)}


def run(
    data: Path,
    embedder: Embedder,
    config: PagerConfig,
    out_dir: Path,
    limit: int | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    conversations = locomo.load(data)[:limit]
    config = replace(config, embedder="auto")
    main, sweep, decay = main_variants(config), sweep_variants(config), decay_pairs(config)
    shown = {v.name for v in (*main, *sweep)}
    hidden = [v for d in decay for v in (d.with_, d.without) if v.name not in shown]
    variants = list({v.name: v for v in (*main, *sweep, *hidden)}.values())
    measured = evalkit.evaluate(conversations, embedder, config, variants, decay, real=default_name(config))
    results = measured.results
    result: dict[str, Any] = {
        "questions": len(results),
        "configurations": evalkit.summarize(results, [v.name for v in main]),
        "sweep": evalkit.summarize(results, [v.name for v in sweep]),
        "replay_agreement": evalkit.agreement(results),
        "decay": {d.name: sum(r.lost_to_decay[d.name] for r in results) for d in decay},
        "evidence_total": sum(len(q.evidence) for c in conversations for q in c.questions),
        "depths": measured.depths,
    }
    result.update(
        embedder=embedder.name,
        fusion=config.fusion,
        lane_weights=dict(config.lane_weights),
        semantic_floor=config.semantic_floor,
        conversations=len(conversations),
        retrieval_budget_tokens=config.retrieval_budget_tokens,
        date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **dict(extra or {}),
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "locomo.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    (out_dir / "locomo.md").write_text(markdown(result))
    plot(result, out_dir / "locomo.png")
    return result


COLUMNS = [("at_k", k, f"R@{k}") for k in evalkit.KS] + [("at_budget", b, f"{b} tok") for b in evalkit.BUDGETS]


def _cells(c: Mapping[str, Any]) -> list[float | None]:
    return [_int_keys(c[kind]).get(value) for kind, value, _ in COLUMNS]


def _row(name: str, cells: Sequence[float | None], extra: Sequence[str] = ()) -> str:
    return f"| {name} | " + " | ".join([f"{v:.3f}" if v is not None else "" for v in cells] + list(extra)) + " |"


def _header(first: str, extra: Sequence[str] = ()) -> list[str]:
    names = [label for *_, label in COLUMNS] + list(extra)
    return [f"| {first} | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]


def markdown(result: Mapping[str, Any]) -> str:
    configs, sweep = result["configurations"], result["sweep"]
    default = next(name for name in configs if name.endswith("default)"))
    agree = result.get("replay_agreement")
    lines = [
        f"# LoCoMo evidence recall ({result['questions']} questions, categories 1-4, "
        f"{result['conversations']} conversations)",
        "",
        f"{result['date']} · embedder `{result['embedder']}` · fusion `{result['fusion']}` weights "
        f"{result['lane_weights']} · semantic floor {result['semantic_floor']}",
        "",
        "Recall = mean over questions of |evidence ∩ retrieved| / |evidence| (strict). Every column is what "
        f"`retrieve` returns: R@k is `retrieve(question, k=k)` (default budget {result['retrieval_budget_tokens']} "
        "tokens), a budget column is `retrieve(question, k=budget, budget=budget)` (as many snippets as fit). "
        "Each snippet costs its whole rendered page line — provenance prefix (time, source, uri) and line "
        "break included, bytes/4 — and every lane looks as deep as `retrieve` does for that call "
        f"({', '.join(f'{n}: {d}' for n, d in result['depths'].items())}).",
        "",
        f"The default row calls `retrieve` itself. The other rows replay its selection and packing on lane "
        f"rankings taken once per question; the replay of the default returned exactly the evidence of the "
        f"real call in {agree:.1%} of the (question, call) pairs."
        if agree is not None
        else "",
        "",
        "## Recall at k and at a token budget",
        "",
        *_header("configuration"),
    ]
    lines += [_row(name, _cells(c)) for name, c in configs.items()]
    lines += [
        _row(
            f"reference (ranking only, no packing): {n}",
            [v.get(value) if kind == "at_k" else None for kind, value, _ in COLUMNS],
        )
        for n, v in REFERENCE.items()
    ]
    lines += [
        "",
        "The default salience lane ranks only memories the semantic lane cannot see yet; once every turn "
        "is embedded it is empty (its row is 0 by design). `salience (all memories)` ranks every memory "
        "by salience alone, whatever the question.",
        "",
    ]
    lines += _sweep(sweep, configs, default, result["lane_weights"])
    lines += [
        "## Decay",
        "",
        "Relevant (evidence) memories that decay alone keeps out of the top 10 — the same "
        "ranking with the recency term switched off would have included them "
        f"({result['evidence_total']} evidence memories in total):",
        "",
        "| fusion | evidence lost to decay |",
        "|---|---|",
    ]
    lines += [f"| {name} | {n} |" for name, n in result["decay"].items()]
    lines += [
        "",
        "In the default mode decay cannot exclude anything: once a memory is embedded the salience lane "
        "no longer ranks it (here every turn is embedded, so its count is 0 by construction), and before "
        "that decay only orders the reserved places.",
        "",
    ]
    lines += [f"## Per category: {default} vs the lanes", "", *_header("category / configuration")]
    for cat in configs[default]["by_category"]:
        lines += [
            _row(f"{cat}: {name}", _cells(configs[name]["by_category"][cat]))
            for name in (default, "semantic", "lexical")
        ]
    lines += ["", "![recall against tokens](locomo.png)", ""]
    return "\n".join(lines)


def _sweep(
    sweep: Mapping[str, Any], configs: Mapping[str, Any], default: str, weights: Mapping[str, float]
) -> list[str]:
    """The weight sweep, with the rule that picks the default and what it picks."""
    lanes = [_cells(configs[n]) for n in ("semantic", "lexical")]

    def mean(c: Mapping[str, Any]) -> float:
        cells = [v for v in _cells(c) if v is not None]
        return sum(cells) / len(cells)

    def dominates(c: Mapping[str, Any]) -> bool:
        return all(v is not None and all(v >= (lane[i] or 0.0) for lane in lanes) for i, v in enumerate(_cells(c)))

    split = {n: c for n, c in sweep.items() if n.startswith("score:")}
    ok = {n: c for n, c in split.items() if dominates(c)} or split
    best = max(ok, key=lambda n: (round(mean(ok[n]), 4), n)) if ok else None
    lines = ["## The weight sweep that chose the defaults", "", *_header("weights", ["mean"])]
    lines += [_row(n, _cells(c), [f"{mean(c):.3f}"]) for n, c in sweep.items()]
    lines += [
        "",
        f"Rule: among the semantic/lexical splits that are at least as good as each lane alone in every "
        f"column, take the highest mean over the ten columns. It picks **{best}**; the default is "
        f"{dict(weights)}. The time and speaker lanes' weights, the lexical lane's context keys, stemmer and "
        "BM25 constants were each chosen on one half of the conversations and reported on the other "
        "(benchmarks/results/locomo_levers.md); the `without the time lane` and `without the speaker lane` rows "
        "show what those lanes add.",
        "",
        "The salience weight cannot move the `score:` rows: with every memory embedded the default salience "
        "lane is empty. Where it acts it is measured too: `embedder down` (no vectors yet, so the salience "
        "lane ranks every memory beside the lexical lane) and `salience_mode all` (salience ranks every "
        "memory beside both content lanes). Recall falls as its weight grows; it buys read-your-writes: "
        "with weight 0 a fresh memory that shares no word with the question scores 0 and is cut "
        "(below_threshold) until it is embedded. Hence a small positive weight, applied only to what the "
        "semantic lane cannot see yet.",
        "",
    ]
    return lines


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
        ax.plot(
            list(values),
            list(values.values()),
            style,
            marker="o",
            label=name,
            linewidth=2.5 if "default" in name else 1.2,
        )
    ax.set_xscale("log")
    ax.set_xlabel("token budget of retrieve() (bytes/4, rendered lines)")
    ax.set_ylabel("evidence recall")
    ax.set_title(f"LoCoMo recall at a budget — {result['embedder']}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
