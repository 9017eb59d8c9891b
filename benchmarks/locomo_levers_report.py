"""The markdown of bench_locomo_levers: every lever per half, the combinations, the product's defaults
beside DRAGON, and how the product's constants would be re-chosen on each half."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mempager.evaluation.halves import HALVES, OTHER
from mempager.evaluation.levers import SETTINGS

from .locomo_levers_grid import CHANGES, HELPS

MODEL = "st:all-MiniLM-L6-v2"
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
# The LoCoMo paper's DRAGON retriever, per category (issue 19), R@10 on dialog turns.
DRAGON_R10 = {"multi-hop": 0.466, "temporal": 0.773, "open-domain": 0.408, "single-hop": 0.777}
DRAGON_OVERALL = {"R@5": 0.604, "R@10": 0.696}  # issue 19: its per-category table over our 1,540 questions
DRAGON_ALL = {"R@5": 0.567, "R@10": 0.662}  # the paper's headline, all 1,986 questions
GOALS = {"R@10": 0.75, "R@5": 0.66, "2000 tok": 0.85}
BASELINE_ROW = "baseline (the product before issue 19)"
PRODUCT_ROW = "product defaults after issue 19"
COMBOS = {"combination": "**best combination**", "core": "**core combination**"}
POOLED = {"baseline": "baseline", "product": "product defaults", "combination": "best combination", "core": "core"}


def _fmt(v: float | None) -> str:
    return "" if v is None or v != v else f"{v:.3f}"


def _knobs(k: Mapping[str, Any]) -> str:
    return ", ".join(f"{n}={v}" for n, v in k.items()) or "defaults"


def header(result: Mapping[str, Any]) -> list[str]:
    m, code = result["machine"], result["code"]
    dirty = (
        f" with uncommitted changes in {len(code['uncommitted'])} files of pager/, index/, embedders/ "
        "(listed in the JSON)"
        if code["uncommitted"]
        else ""
    )
    return [
        "# LoCoMo retrieval levers (issue 19): tuned on one half, reported on the other",
        "",
        f"{result['date']} · commit {code['commit']}{dirty} · {m['cpu']} · {m['cores']} cores · "
        f"{m['memory_gib']} GiB · " + " · ".join(f"{k} {v}" for k, v in result["versions"].items()),
        "",
        f"`{MODEL}` · half A = conversations 1-5 ({result['questions']['A']} questions), half B = conversations "
        f"6-10 ({result['questions']['B']} questions), categories 1-4 (the 4 of the 1,540 whose evidence ids do "
        "not resolve are left out, as in locomo.md).",
        "",
        "Recall = mean over questions of |evidence ∩ retrieved| / |evidence|, as `mempager bench locomo` "
        "measures it: R@k is `retrieve(q, k=k)` (budget 6000), a budget column is "
        "`retrieve(q, k=budget, budget=budget)`, each snippet charged its rendered page line, every lane "
        "as deep as `retrieve` looks for that call. Measured by the harness `mempager.evaluation.levers` "
        "(lanes, fusion and packing re-implemented on numpy so that levers needing product changes can be "
        "measured before they are written; MiniLM vectors computed once with the packaged model).",
        "",
        f"**{BASELINE_ROW}**: light stemming, BM25 k1 1.2 / b 0.5 over each turn's own text, no time lane "
        "(the harness's `BASELINE`; every lever row is on top of it). "
        f"**{PRODUCT_ROW}**: the harness's `PRODUCT`, read from the product's defaults: "
        f"{_knobs(result['product']['knobs'])} — Snowball stemming, context keys (2 neighbours each side of the "
        "episode at decay 0.5) for the terms at most min(max(share N, 8), 512) memories hold, BM25 k1 / b as "
        "listed, the time lane at an absolute 0.4 with 3 days of slack, the speaker lane at an absolute 0.2 (a "
        "candidate whose speaker the question names). It is one fixed configuration, evaluated as "
        "shipped (not tuned here); the last section shows what each half would choose for its constants.",
        "",
    ]


def _faithfulness(verify: Mapping[str, Any]) -> list[str]:
    if not verify:
        return ["**Faithfulness**: not checked in this run (`--no-verify`).", ""]
    return [
        f"**Faithfulness**: the harness's product-defaults configuration returned exactly the evidence of the "
        f"real `retrieve` (today's product, default `PagerConfig`, vectors from the cache) in "
        f"{verify['agreement']:.2%} of {verify['calls']} (question, call) pairs (every question of categories 1-5 "
        f"at every column); the real calls' R@10 over categories 1-4 is {verify['product_recall']['R@10']:.3f}, "
        f"R@5 {verify['product_recall']['R@5']:.3f}, 2000 tok {verify['product_recall']['2000 tok']:.3f}.",
        "",
    ]


def _summary(rows: Mapping[str, Any], combos: Mapping[str, Any], product: Mapping[str, Any]) -> list[str]:
    lines = [
        "## Summary: what each lever adds (reported half, constants from the other half)",
        "",
        "| lever | Δ R@5 A | Δ R@5 B | Δ R@10 A | Δ R@10 B | Δ 2000 tok A | Δ 2000 tok B | Δ mean A | Δ mean B "
        "| helps both |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    base_rows = rows[BASELINE_ROW]["halves"]

    def delta(h: Mapping[str, Any], half: str, col: str) -> str:
        return f"{h['recall'][col] - base_rows[half]['recall'][col]:+.3f}"

    extra = [(COMBOS[k], v) for k, v in combos.items()] + [(f"**{PRODUCT_ROW}**", product)]
    for name, row in [*rows.items(), *extra]:
        if name == BASELINE_ROW:
            continue
        hs = row["halves"]
        cells = [delta(hs[h], h, c) for c in ("R@5", "R@10", "2000 tok") for h in HALVES]
        cells += [f"{hs[h]['delta_mean']:+.3f}" for h in HALVES]
        both = row.get("helps_both")
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {'' if both is None else 'yes' if both else 'no'} |")
    return [*lines, ""]


def _half_tables(rows: Mapping[str, Any], combos: Mapping[str, Any], product: Mapping[str, Any]) -> list[str]:
    cols = [s.label for s in SETTINGS]
    lines: list[str] = []
    for half in HALVES:
        lines += [
            f"## Half {half} (conversations {HALVES[half].start + 1}-{HALVES[half].stop}), "
            f"constants tuned on half {OTHER[half]}",
            "",
            "| lever | " + " | ".join(cols) + " | mean | Δ mean | helps both | chosen on the other half |",
            "|---|" + "---|" * (len(cols) + 4),
        ]
        for name, row in rows.items():
            h = row["halves"][half]
            lines.append(
                f"| {name} | "
                + " | ".join(_fmt(h["recall"][c]) for c in cols)
                + f" | {_fmt(h['mean'])} | {h['delta_mean']:+.3f} | {'yes' if row['helps_both'] else 'no'} | "
                f"{_knobs(h['knobs'])} |"
            )
        for key, label in COMBOS.items():
            c = combos[key]["halves"][half]
            lines.append(
                f"| {label} | "
                + " | ".join(f"**{_fmt(c['recall'][x])}**" for x in cols)
                + f" | **{_fmt(c['mean'])}** | {c['delta_mean']:+.3f} |  | {_knobs(c['knobs'])} |"
            )
            for lane in ("lexical lane alone", "semantic lane alone"):
                lines.append(
                    f"| {label.strip('*')}: its {lane} | "
                    + " | ".join(_fmt(c[lane][x]) for x in cols)
                    + " |  |  |  |  |"
                )
        p = product["halves"][half]
        lines.append(
            f"| **{PRODUCT_ROW}** | "
            + " | ".join(f"**{_fmt(p['recall'][x])}**" for x in cols)
            + f" | **{_fmt(p['mean'])}** | {p['delta_mean']:+.3f} |  | shipped (not tuned) |"
        )
        r = product["rechosen"]["halves"][half]
        lines.append(
            "| product defaults, each constant re-chosen on the other half | "
            + " | ".join(_fmt(r["recall"][x]) for x in cols)
            + f" | {_fmt(r['mean'])} | {r['delta_mean']:+.3f} |  | {_knobs(r['knobs'])} |"
        )
        for lane in ("lexical lane alone", "semantic lane alone"):
            lines.append(
                f"| product defaults: its {lane} | " + " | ".join(_fmt(p[lane][x]) for x in cols) + " |  |  |  |  |"
            )
        lines.append("")
    return lines


def _pooled_tables(result: Mapping[str, Any]) -> list[str]:
    cols = [s.label for s in SETTINGS]
    pooled, everything = result["pooled"], result["all_questions"]
    lines = [
        "## Both halves pooled (each question scored with constants tuned on the other half; the product as shipped)",
        "",
        "| configuration | " + " | ".join(cols) + " |",
        "|---|" + "---|" * len(cols),
    ]
    for key, label in POOLED.items():
        cells = " | ".join(_fmt(pooled[key]["recall"][x]) for x in cols)
        lines.append(f"| {'**' + label + '**' if key == 'product' else label} | {cells} |")
    lines += [
        "| goal (issue 19) | " + " | ".join(_fmt(GOALS.get(x)) for x in cols) + " |",
        "| DRAGON, same questions (issue 19) | " + " | ".join(_fmt(DRAGON_OVERALL.get(x)) for x in cols) + " |",
        "",
        "Over all 1,986 questions (categories 1-5; adversarial questions have no evidence and score 1, as the "
        "paper's script does, and so do the 4 whose evidence does not resolve), beside the paper's headline "
        f"(DRAGON R@5 {DRAGON_ALL['R@5']:.3f}, R@10 {DRAGON_ALL['R@10']:.3f}):",
        "",
        "| configuration | " + " | ".join(cols) + " |",
        "|---|" + "---|" * len(cols),
    ]
    for key, label in POOLED.items():
        cells = " | ".join(_fmt(everything[key][x]) for x in cols)
        lines.append(f"| {'**' + label + '**' if key == 'product' else label} | {cells} |")
    lines += [
        "| DRAGON (paper, all questions) | " + " | ".join(_fmt(DRAGON_ALL.get(x)) for x in cols) + " |",
        "",
        "## Per category, R@10 (pooled halves) beside DRAGON",
        "",
        "| category | questions | baseline | **product defaults** | best combination | core combination | DRAGON "
        "| product − DRAGON | best − DRAGON |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, dragon in DRAGON_R10.items():
        b, p, c2, c3 = (pooled[k]["by_category"][name]["R@10"] for k in ("baseline", "product", "combination", "core"))
        n = pooled["product"]["category_questions"][name]
        lines.append(
            f"| {name} | {n} | {b:.3f} | **{p:.3f}** | {c2:.3f} | {c3:.3f} | {dragon:.3f} | {p - dragon:+.3f} "
            f"| {c2 - dragon:+.3f} |"
        )
    lines += [
        "",
        "## Per category, every column (pooled halves)",
        "",
        "| category / configuration | " + " | ".join(cols) + " |",
        "|---|" + "---|" * len(cols),
    ]
    for name in DRAGON_R10:
        for key, label in POOLED.items():
            src = pooled[key]["by_category"][name]
            lines.append(f"| {name}: {label} | " + " | ".join(_fmt(src[x]) for x in cols) + " |")
    return [*lines, ""]


def _product_tuning(product: Mapping[str, Any]) -> list[str]:
    lines = [
        "## The product's constants, re-chosen on each half",
        "",
        "Each tuned constant of the product's defaults swept over its grid with the others held at the shipped "
        "values; the point each half would choose (mean of the ten columns on that half, ties to the earlier "
        f"point) and how far the shipped value is from it on that half. **ok** when the shipped value is the "
        f"choice or within {HELPS} of it on both halves.",
        "",
        "| constant | grid | shipped | chosen on A | A: chosen / shipped mean | chosen on B | B: chosen / shipped mean "
        "| ok |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, t in product["tuned"].items():
        cells = []
        for half in HALVES:
            c = t["halves"][half]
            cells += [_knobs(c["choice"]), f"{c['score']:.4f} / {c['shipped_score']:.4f} ({c['gap']:+.4f})"]
        grid = "; ".join(_knobs(g) for g in t["grid"])
        lines.append(
            f"| {name} | {grid} | {_knobs(t['shipped'])} | " + " | ".join(cells) + f" | {'ok' if t['ok'] else 'no'} |"
        )
    return [*lines, ""]


def _combination_steps(combos: Mapping[str, Any]) -> list[str]:
    lines = ["## How each combination was built (on its tuning half only)", ""]
    for key, label in COMBOS.items():
        for half in HALVES:
            c = combos[key]["halves"][half]
            lines += [
                f"{label.strip('*').capitalize()}, reported on half {half}, tuned on half {c['tuned_on']}; "
                f"pool: {', '.join(c['pool'])}.",
                "",
                "| step | tuning-half mean | knobs |",
                "|---|---|---|",
            ]
            lines += [f"| {s['lever']} | {s['tuning_score']:.4f} | {_knobs(s['knobs'])} |" for s in c["steps"]]
            lines.append("")
    return lines


def markdown(result: Mapping[str, Any]) -> str:
    rows, combos, product = result["rows"], result["combinations"], result["product"]
    lines = header(result) + _faithfulness(result.get("verify") or {})
    lines += [
        "Every lever's constants (its grid, in benchmarks/locomo_levers_grid.py) are chosen on one half by the "
        f"mean of the ten columns, then reported on the other. A lever **helps both** when that mean rises by at "
        f"least {HELPS} on each half. The **best combination** is built per tuning half by greedy forward "
        "selection over the levers that helped that half alone, then each chosen lever is re-tuned with the "
        "others in place — all on the tuning half only. The **core combination** repeats that over only the "
        "levers both halves' selections picked.",
        "",
    ]
    lines += _summary(rows, combos, product)
    lines += _half_tables(rows, combos, product)
    lines += _pooled_tables(result)
    lines += _product_tuning(product)
    lines += _combination_steps(combos)
    lines += ["## What the levers that help both halves need in the product", ""]
    lines += [
        f"- **{name}**: {CHANGES[name]}" for name, row in rows.items() if row.get("helps_both") and name in CHANGES
    ]
    lines += [
        "",
        f"Evaluation time: {result['seconds']:.0f} s for {result['configurations']} configurations "
        f"(each on all {result['questions']['A'] + result['questions']['B']} questions)"
        + (f"; the check against `retrieve` {result['verify_seconds']:.0f} s." if result.get("verify") else "."),
        "",
    ]
    return "\n".join(lines)
