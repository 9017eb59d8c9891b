"""A simulated agent loop for procedural memory: does the lifecycle find the best pattern?

    python -m benchmarks.bench_procedural [--turns 2000] [--patterns 20] [--explore 0.1]

20 patterns with hidden true success rates all match one goal. They start as candidates: the
agent has met each once (one success, below the 3-success gate), so none is in a page yet.

Each turn goes through the real loop. ``page(goal, query, turn=...)`` injects the top procedures
(as many as ``max_patterns_in_page`` and the procedures budget allow: 3 here, as by default)
and records them for the turn. The agent follows the first one; the outcome is drawn from that
pattern's hidden rate and reported with ``feedback(turn, ...)``, which updates every procedure
the page injected, or (the ``+used`` strategies) with ``feedback(turn, ..., used=[followed])``,
which updates only the procedure the agent says it followed. When the page offers
nothing, or on a fraction ``--explore`` of turns, the agent improvises with a pattern the page
did not offer and, when that works, distils it with ``reinforce_pattern`` (experience is how a
candidate earns the successes that let it into pages). Proposed inversions are accepted by the
simulated reviewer with ``decide``, which deprecates the original.

Two page rankings side by side, decayed confidence and Thompson sampling, each with both kinds of
feedback attribution, plus ``uniform`` (the
agent follows a random offered procedure: no learning) as the regret baseline. Reported:
cumulative regret, turns until the best pattern is proven, turns until the first inversion and
which patterns were inverted; a PNG of the regret curves.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import mempager
from mempager import PagerConfig, PatternSpec
from mempager.cli.progress import Progress

from ._common import RESULTS, write_results

GOAL = "reconcile the monthly invoices"
QUERY = "how do I reconcile this month's invoices?"
# ranking, and "+used" where feedback names the procedure followed (``feedback(turn, ..., used=[it])``)
STRATEGIES = ("confidence", "thompson", "confidence+used", "thompson+used", "uniform")


def spec(name: str) -> PatternSpec:
    return PatternSpec(name=name, trigger=GOAL, steps=[f"{name}: do it"])


def run(strategy: str, rates: list[float], turns: int, seed: int, explore: float, tmp: Path) -> dict[str, Any]:
    cfg = PagerConfig(embedder="hash")  # 3 procedures per page, as by default
    rng = random.Random(seed)
    names = [f"recipe {i:02d}" for i in range(len(rates))]
    best = max(range(len(rates)), key=lambda i: rates[i])
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    regret, curve, picks, injected_total = 0.0, [], [0] * len(rates), 0
    proven_at: int | None = None
    inversions: list[dict[str, Any]] = []
    tmp.mkdir(parents=True, exist_ok=True)
    with mempager.open(tmp / f"{strategy.replace('+', '_')}.duckdb", actor="sim", config=cfg) as p:
        clock = {"now": start}
        p.clock = lambda: clock["now"]
        ranking, _, attribution = strategy.partition("+")
        p.pattern_ranking = "thompson" if ranking == "thompson" else "confidence"
        p.pattern_seed = seed
        for name in names:  # met once: a candidate, below the gate
            p.reinforce_pattern(spec(name))
        deprecated: set[int] = set()
        bar = Progress(turns, f"{strategy:>15}")
        for t in range(turns):
            clock["now"] = start + timedelta(hours=t)
            turn = f"turn-{t}"
            page = p.page(QUERY, goal=GOAL, turn=turn)
            offered = [names.index(x.label) for x in page.patterns]
            injected_total += len(offered)
            if offered and rng.random() >= explore:
                chosen = rng.choice(offered) if strategy == "uniform" else offered[0]
                improvised = False
            else:
                chosen = rng.choice([i for i in range(len(rates)) if i not in deprecated and i not in offered])
                improvised = True
            picks[chosen] += 1
            success = rng.random() < rates[chosen]
            if not improvised:
                used = [names[chosen]] if attribution == "used" else None
                p.feedback(turn, "success" if success else "failure", used=used)
            elif success:  # the agent distils what worked
                p.reinforce_pattern(spec(names[chosen]))
            regret += rates[best] - rates[chosen]
            curve.append(round(regret, 3))
            for item in p.review():  # the reviewer accepts every proposed inversion
                i = names.index(PatternSpec.decode(p.get(item.payload["uri"]).text).label)
                p.decide(item.id, accept=True)
                deprecated.add(i)
                inversions.append({"turn": t + 1, "pattern": i, "rate": rates[i]})
            if proven_at is None and p.recall_pattern(names[best]).maturity == "proven":
                proven_at = t + 1
            bar.advance()
        stages = p.stats()["patterns_by_stage"]
    worst = min(range(len(rates)), key=lambda i: rates[i])
    return {
        "strategy": strategy,
        "seed": seed,
        "regret": round(regret, 2),
        "curve": curve,
        "best_proven_at_turn": proven_at,
        "first_inversion_at_turn": inversions[0]["turn"] if inversions else None,
        "inversions": inversions,
        "best_pattern_share": round(picks[best] / turns, 3),
        "worst_pattern_uses": picks[worst],
        "procedures_per_page": round(injected_total / turns, 2),
        "stages_at_end": stages,
    }


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One ranking over several simulation seeds."""

    def median(values: list[int]) -> float | None:
        return statistics.median(values) if values else None

    proven = [r["best_proven_at_turn"] for r in runs if r["best_proven_at_turn"]]
    inverted = [r["first_inversion_at_turn"] for r in runs if r["first_inversion_at_turn"]]
    return {
        "strategy": runs[0]["strategy"],
        "seeds": [r["seed"] for r in runs],
        "regret_mean": round(statistics.mean(r["regret"] for r in runs), 1),
        "regret_per_seed": [r["regret"] for r in runs],
        "best_share_mean": round(statistics.mean(r["best_pattern_share"] for r in runs), 3),
        "best_proven_median_turn": median(proven),
        "best_proven_runs": len(proven),
        "first_inversion_median_turn": median(inverted),
        "inversion_runs": len(inverted),
        "inverted_rates": sorted(inv["rate"] for r in runs for inv in r["inversions"]),
        "procedures_per_page": round(statistics.mean(r["procedures_per_page"] for r in runs), 2),
    }


def plot(runs: dict[str, list[dict[str, Any]]], path: Path, patterns: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for strategy, mine in runs.items():
        color = None
        for k, r in enumerate(mine):
            label = f"{strategy} (mean regret {summarise(mine)['regret_mean']})" if k == 0 else None
            (line,) = ax.plot(r["curve"], label=label, color=color, linewidth=1.2 if k == 0 else 0.6)
            color = line.get_color()
            if r["best_proven_at_turn"]:
                ax.plot(r["best_proven_at_turn"], r["curve"][r["best_proven_at_turn"] - 1], "o", color=color, ms=4)
            for inv in r["inversions"]:
                ax.plot(inv["turn"], r["curve"][inv["turn"] - 1], "x", color=color, ms=6)
    ax.set_xlabel("turn (o: best pattern proven; x: an inversion applied)")
    ax.set_ylabel("cumulative regret")
    ax.set_title(f"Procedural memory: simulated agent loop, {patterns} patterns, one line per seed")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def table(args: argparse.Namespace, rates: list[float], summaries: list[dict[str, Any]]) -> str:
    def turn(median: float | None, runs: int) -> str:
        return "never" if median is None else f"{median:g} ({runs} of {args.seeds} seeds)"

    rows = [
        f"| {s['strategy']} | {s['regret_mean']} ({', '.join(f'{x:g}' for x in s['regret_per_seed'])}) | "
        f"{s['best_share_mean']} | {turn(s['best_proven_median_turn'], s['best_proven_runs'])} | "
        f"{turn(s['first_inversion_median_turn'], s['inversion_runs'])} | "
        f"{', '.join(f'{x:g}' for x in s['inverted_rates']) or 'none'} | {s['procedures_per_page']} |"
        for s in summaries
    ]
    return "\n".join(
        [
            f"{args.patterns} patterns, hidden success rates {min(rates)}–{max(rates)} (best {max(rates)}), "
            f"{args.turns} turns (one hour apart: confidence decays), {args.seeds} simulation seeds from {args.seed}. "
            "Every pattern starts as a candidate (1 success; 3 needed to be paged). Each turn goes through the real "
            "loop: `page(goal, query, turn=...)` injects up to 3 procedures (the default), the agent follows the "
            "first, `feedback(turn, ...)` updates every injected one (`+used`: `feedback(turn, ..., used=[followed])` "
            "updates only the one followed); when the page offers nothing, and on "
            f"{args.explore:.0%} of turns, the agent improvises with a pattern the page did not offer and "
            "`reinforce_pattern`s it when it works; proposed inversions are accepted (`decide`).",
            "",
            "| page ranking | cumulative regret: mean (per seed) | best pattern share | best proven at turn: median |"
            " first inversion at turn: median | true rates of the inverted patterns | procedures per page |",
            "|---|---|---|---|---|---|---|",
            *rows,
            "",
            "Regret counts improvised turns too (the exploration every ranking pays). `uniform`: the agent follows a "
            "random offered procedure (confidence ranking decides what is offered); the regret baseline.",
            "",
            findings(summaries),
            "",
            "![regret](procedural.png)",
        ]
    )


def findings(summaries: list[dict[str, Any]]) -> str:
    """What the recorded run says, with its numbers."""
    by = {s["strategy"]: s for s in summaries}
    conf, thom, conf_u, thom_u = by["confidence"], by["thompson"], by["confidence+used"], by["thompson+used"]
    good = [x for x in conf["inverted_rates"] if x >= 0.5]
    good_u = [x for x in conf_u["inverted_rates"] + thom_u["inverted_rates"] if x >= 0.5]

    def inverted(summary: dict[str, Any]) -> str:
        return (
            f"inverted in {summary['inversion_runs']} of {len(summary['seeds'])} seeds"
            if summary["inversion_runs"]
            else "never inverted anything"
        )

    return (
        "What the numbers say. Crediting every injected procedure makes procedures shown together share one "
        "record: under confidence ranking everything shown beside a good procedure climbs to the 1.0 clamp and "
        "whichever is then followed first pulls the others down with its failures (-0.20 each): regret "
        f"{conf['regret_mean']}, and of the {len(conf['inverted_rates'])} procedures it inverted {len(good)} had a "
        f"true rate >= 0.5 ({', '.join(f'{x:g}' for x in good) or 'none'}). Thompson sampling redraws the order "
        f"every turn, which blurs the shared record less (regret {thom['regret_mean']}; {inverted(thom)}). "
        "Naming the procedure followed (`used=`) gives each its own record: regret "
        f"{conf_u['regret_mean']} with confidence ranking and {thom_u['regret_mean']} with Thompson; the best "
        f"pattern is followed on {conf_u['best_share_mean']:.0%} / {thom_u['best_share_mean']:.0%} of turns; "
        f"confidence {inverted(conf_u)}, Thompson {inverted(thom_u)}, and "
        + (
            f"{len(good_u)} inverted procedure(s) had a true rate >= 0.5 ({', '.join(f'{x:g}' for x in good_u)})."
            if good_u
            else "no procedure with a true rate >= 0.5 was inverted."
        )
        + " Agents that can say which procedure they followed should pass `used=`."
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--patterns", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7, help="the hidden rates, and the first simulation seed")
    parser.add_argument("--seeds", type=int, default=3, help="simulation seeds per ranking")
    parser.add_argument("--explore", type=float, default=0.1)
    args = parser.parse_args()
    rates = [round(random.Random(args.seed + i).uniform(0.05, 0.95), 3) for i in range(args.patterns)]
    runs: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as d:
        for strategy in STRATEGIES:
            runs[strategy] = [
                run(strategy, rates, args.turns, args.seed + k, args.explore, Path(d) / f"{k}")
                for k in range(args.seeds)
            ]
    plot(runs, RESULTS / "procedural.png", args.patterns)
    summaries = [summarise(mine) for mine in runs.values()]
    text = table(args, rates, summaries)
    write_results(
        "procedural",
        {
            "rates": rates,
            "turns": args.turns,
            "explore": args.explore,
            "seed": args.seed,
            "seeds": args.seeds,
            "summary": summaries,
            "runs": [{k: v for k, v in r.items() if k != "curve"} for mine in runs.values() for r in mine],
        },
        text,
    )
    print(text)


if __name__ == "__main__":
    main()
