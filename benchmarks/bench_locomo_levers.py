"""Issue 19: which retrieval levers lift LoCoMo evidence recall, tuned on one half, reported on the other.

    HF_HUB_OFFLINE=1 .venv/bin/python -m benchmarks.bench_locomo_levers --data ../shared/data/locomo10.json

Writes benchmarks/results/locomo_levers.{json,md}. Every row is a lever alone on top of the
baseline (the product before issue 19; its constants chosen on the other half), then the best
combination (greedy forward selection and re-tuning on the other half only), then the product's
defaults after issue 19 as shipped, beside DRAGON, with the point each half would choose for each
of its tuned constants. The harness is ``mempager.evaluation.levers``; its product-defaults
configuration is checked call for call against the real ``retrieve`` (``--no-verify`` skips
that). The rows and grids are in ``locomo_levers_grid``, the markdown in ``locomo_levers_report``.
MiniLM vectors of every turn, question and turn window are computed once and cached under /tmp.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from mempager.evaluation import halves, levers, locomo
from mempager.evaluation.evalkit import progress_bar
from mempager.evaluation.halves import HALVES, OTHER, mask
from mempager.evaluation.levers import BASELINE, PRODUCT, SETTINGS, Knobs, Outcome

from ._common import LOCOMO, git_state, machine, versions
from .locomo_levers_grid import CHANGES, HELPS, LEVERS, PRODUCT_TUNED
from .locomo_levers_report import BASELINE_ROW, CATEGORY_NAMES, DRAGON_R10, GOALS, MODEL, markdown

CACHE = Path("/tmp/mempager-levers/minilm.npz")


class Runner:
    """Evaluates each configuration once, on every question."""

    def __init__(self, lanes: levers.Lanes) -> None:
        self.lanes = lanes
        self.done: dict[Knobs, Outcome] = {}
        self.seconds = 0.0

    def __call__(self, knobs: Knobs) -> Outcome:
        got = self.done.get(knobs)
        if got is None:
            t = time.perf_counter()
            got = self.done[knobs] = levers.evaluate(self.lanes, knobs)
            self.seconds += time.perf_counter() - t
        return got


def _half_row(outcome: Outcome, half: str, base: Outcome) -> dict[str, Any]:
    m = mask(outcome, half)
    return {
        "recall": levers.means(outcome, m),
        "mean": levers.objective(outcome, m),
        "delta_mean": levers.objective(outcome, m) - levers.objective(base, m),
        "by_category": {
            name: levers.means(outcome, mask(outcome, half, (cat,))) for cat, name in CATEGORY_NAMES.items()
        },
    }


def _pooled(run: halves.Run, choice: Mapping[str, Knobs]) -> dict[str, Any]:
    """Each half with its own (other-half-tuned) constants, pooled over every question."""
    rows = np.zeros((0, len(SETTINGS)))
    cats = np.zeros(0, np.int64)
    for half, knobs in choice.items():
        o = run(knobs)
        m = mask(o, half)
        rows, cats = np.concatenate([rows, o.recall[m]]), np.concatenate([cats, o.category[m]])
    pooled = Outcome(rows, cats, np.zeros(len(cats), np.int64))
    return {
        "recall": levers.means(pooled),
        "by_category": {name: levers.means(pooled, cats == cat) for cat, name in CATEGORY_NAMES.items()},
        "category_questions": {name: int((cats == cat).sum()) for cat, name in CATEGORY_NAMES.items()},
        "questions": len(cats),
    }


def _all_questions(run: halves.Run, choice: Mapping[str, Knobs], total: int) -> dict[str, float]:
    """Over all LoCoMo questions: categories 1-5 with resolvable evidence as measured, the rest 1."""
    sums = np.zeros(len(SETTINGS))
    n = 0
    for half, knobs in choice.items():
        o = run(knobs)
        m = mask(o, half, (1, 2, 3, 4, 5))
        sums += o.recall[m].sum(axis=0)
        n += int(m.sum())
    missing = total - n
    return {s.label: float((sums[j] + missing) / total) for j, s in enumerate(SETTINGS)}


def measure(run: Runner, names: Sequence[str] | None = None) -> dict[str, Any]:
    base = run(BASELINE)
    rows: dict[str, Any] = {
        BASELINE_ROW: {
            "description": "fusion score 0.5/0.5, floor 0.1, BM25 (k1 1.2, b 0.5) over the turn's own text, "
            "light stemming, no time lane",
            "halves": {h: {**_half_row(base, h, base), "knobs": {}} for h in HALVES},
            "grid": 1,
        }
    }
    chosen = names or list(LEVERS)
    bar = progress_bar(sum(len(LEVERS[n][1]) for n in chosen), "levers")
    with bar:
        for name in chosen:
            what, overrides = LEVERS[name]
            grid = halves.grid_of(BASELINE, overrides)
            choice = halves.cross_tune(grid, run)
            bar.update(len(grid))
            bar.set_postfix_str(name[:30])
            rows[name] = {
                "description": what,
                "grid": len(grid),
                "halves": {
                    h: {
                        **_half_row(run(c.knobs), h, base),
                        "knobs": c.knobs.changed(),
                        "tuned_on": OTHER[h],
                        "tuning_score": c.tuning_score,
                    }
                    for h, c in choice.items()
                },
            }
    for row in rows.values():
        row["helps_both"] = all(row["halves"][h]["delta_mean"] >= HELPS for h in HALVES)
    return rows


def combine(run: Runner, rows: Mapping[str, Any], candidates: Sequence[str]) -> dict[str, Any]:
    """Greedy forward selection per tuning half, over the ``candidates`` that helped that half alone."""
    out: dict[str, Any] = {}
    choice: dict[str, Knobs] = {}
    base = run(BASELINE)
    for half in HALVES:
        tune = OTHER[half]
        tune_base = levers.objective(base, mask(base, tune))
        pool = {
            name: LEVERS[name][1]
            for name in candidates
            # the lever alone, at its point tuned on `tune`, improved `tune` (in-sample: `half` unseen)
            if name in rows and rows[name]["halves"][half]["tuning_score"] >= tune_base + HELPS
        }
        steps = halves.forward(pool, run, tune, log=lambda line: print(line, file=sys.stderr, flush=True))
        final = steps[-1].knobs
        choice[half] = final
        out[half] = {
            **_half_row(run(final), half, base),
            "knobs": final.changed(),
            "tuned_on": tune,
            "pool": sorted(pool),
            "chosen": [s.lever for s in steps[1:] if not s.lever.startswith("re-tune ")],
            "steps": [{"lever": s.lever, "knobs": s.knobs.changed(), "tuning_score": s.tuning_score} for s in steps],
        }
        out[half].update(_lanes_alone(run, final, half))
    return {"halves": out, "choice": choice}


def _lanes_only(knobs: Knobs) -> Knobs:
    """The lane keys of ``knobs`` with fusion and expansion back to defaults."""
    keep = {
        "stem", "lex_before", "lex_after", "lex_decay", "lex_own_df", "lex_ctx_share", "date_keys", "k1", "b",
        "prf_docs", "prf_terms",
        "prf_weight", "prf_source", "sem_before", "sem_after", "sem_alpha", "sem_decay", "sem_window_text",
    }  # fmt: skip
    return replace(BASELINE, **{k: v for k, v in knobs.changed().items() if k in keep})


# -- report ---------------------------------------------------------------------------------------


def _lanes_alone(run: Runner, knobs: Knobs, half: str) -> dict[str, Any]:
    out = {}
    for lane, alone in (
        ("lexical lane alone", replace(_lanes_only(knobs), w_sem=0.0, w_lex=1.0)),
        ("semantic lane alone", replace(_lanes_only(knobs), w_sem=1.0, w_lex=0.0)),
    ):
        o = run(alone)
        out[lane] = levers.means(o, mask(o, half))
    return out


def product_defaults(run: Runner, total: int) -> dict[str, Any]:
    """The product's defaults after issue 19 as shipped (one fixed configuration) on each half,
    pooled and over all questions; and for each of its tuned constants the grid point each half
    would choose, the others held at the shipped values."""
    base, shipped = run(BASELINE), run(PRODUCT)
    tuned: dict[str, Any] = {}
    rechosen: dict[str, dict[str, Any]] = {h: {} for h in HALVES}  # reported half -> overrides from the other
    for name, overrides in PRODUCT_TUNED.items():
        grid = halves.grid_of(PRODUCT, overrides)
        outcomes = [run(k) for k in grid]
        keys = list(overrides[0])
        at: dict[str, Any] = {}
        for tune in HALVES:
            scores = [levers.objective(o, mask(o, tune)) for o in outcomes]
            best = int(np.argmax(np.round(scores, 6)))
            mine = levers.objective(shipped, mask(shipped, tune))
            at[tune] = {
                "choice": dict(overrides[best]),
                "score": scores[best],
                "shipped_score": mine,
                "gap": mine - scores[best],
                "scores": {json.dumps(dict(o)): s for o, s in zip(overrides, scores, strict=True)},
            }
            rechosen[OTHER[tune]].update(overrides[best])
        tuned[name] = {
            "grid": [dict(o) for o in overrides],
            "shipped": {k: getattr(PRODUCT, k) for k in keys},
            "halves": at,
            "ok": all(at[h]["gap"] >= -HELPS for h in HALVES),
        }
    rechosen_knobs = {h: replace(PRODUCT, **o) for h, o in rechosen.items()}
    return {
        "knobs": PRODUCT.changed(),
        "halves": {
            h: {**_half_row(shipped, h, base), "knobs": PRODUCT.changed(), **_lanes_alone(run, PRODUCT, h)}
            for h in HALVES
        },
        "rechosen": {
            "halves": {
                h: {**_half_row(run(k), h, base), "knobs": {n: getattr(k, n) for n in rechosen[h]}}
                for h, k in rechosen_knobs.items()
            },
            "pooled": _pooled(run, rechosen_knobs),
        },
        "tuned": tuned,
        "pooled": _pooled(run, dict.fromkeys(HALVES, PRODUCT)),
        "all_questions": _all_questions(run, dict.fromkeys(HALVES, PRODUCT), total),
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--data", default=str(LOCOMO))
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    ap.add_argument("--cache", default=str(CACHE), help="vector cache file (outside the repository)")
    ap.add_argument("--no-verify", action="store_true", help="skip the call-for-call check against retrieve")
    ap.add_argument("--levers", nargs="*", default=None, help="only these rows (names as in the table)")
    args = ap.parse_args(argv)

    def make() -> Any:
        from mempager.embedders import LocalEmbedder

        return LocalEmbedder()

    conversations = locomo.load(args.data, categories=frozenset({1, 2, 3, 4, 5}))
    total = sum(len(s["qa"]) for s in json.loads(Path(args.data).read_text(encoding="utf-8")))
    cache = levers.VectorCache(Path(args.cache), MODEL, make)
    convs = levers.prepare(conversations, cache)
    for conv in convs:  # window texts for the window-embedding lever, embedded once
        cache.get(levers.window_text(conv, 1, 1))
    lanes = levers.Lanes(convs, cache)
    run = Runner(lanes)
    base = run(BASELINE)
    verify, verify_seconds = None, 0.0
    if not args.no_verify:  # the real retrieve is today's product: it is checked against PRODUCT
        mine = levers.evaluate(lanes, PRODUCT, keep_found=True)
        run.done[PRODUCT] = replace(mine, found=[])
        started = time.perf_counter()
        with progress_bar(len(mine.recall), "verify") as bar:
            verify = levers.verify_against_product(conversations, convs, cache, mine, progress=bar.update)
        verify_seconds = time.perf_counter() - started
        print(f"harness vs retrieve: {verify['agreement']:.2%} of {verify['calls']} calls agree", file=sys.stderr)
    product = product_defaults(run, total)
    rows = measure(run, args.levers)
    best = combine(run, rows, [n for n in LEVERS if n in rows])
    core_names = [n for n in LEVERS if all(n in best["halves"][h]["chosen"] for h in HALVES)]
    core = combine(run, rows, core_names)
    choices = {"combination": best.pop("choice"), "core": core.pop("choice")}
    result: dict[str, Any] = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "versions": versions("PyStemmer"),
        "code": git_state(),
        "embedder": MODEL,
        "halves": {h: [convs[i].sample_id for i in r] for h, r in HALVES.items()},
        "questions": {h: int(mask(base, h).sum()) for h in HALVES},
        "settings": [s.label for s in SETTINGS],
        "verify": verify,
        "verify_seconds": verify_seconds,
        "product": product,
        "rows": rows,
        "combinations": {"combination": best, "core": {**core, "levers": core_names}},
        "pooled": {
            "baseline": _pooled(run, dict.fromkeys(HALVES, BASELINE)),
            "product": product["pooled"],
            **{k: _pooled(run, c) for k, c in choices.items()},
        },
        "all_questions": {
            "baseline": _all_questions(run, dict.fromkeys(HALVES, BASELINE), total),
            "product": product["all_questions"],
            **{k: _all_questions(run, c, total) for k, c in choices.items()},
        },
        "goals": GOALS,
        "dragon_r10": DRAGON_R10,
        "product_changes": CHANGES,
        "configurations": len(run.done),
        "seconds": run.seconds,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "locomo_levers.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    (out / "locomo_levers.md").write_text(markdown(result))
    for key in ("baseline", "product", *choices):
        p = result["pooled"][key]["recall"]
        print(f"{key}, pooled halves: R@5 {p['R@5']:.3f} R@10 {p['R@10']:.3f} 2000 tok {p['2000 tok']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
