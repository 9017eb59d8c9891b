"""LoCoMo with session wraps: does the association lane (issue 20) lower or raise evidence recall?

Each conversation is written session by session; after each session a *scripted* wrap (no LLM)
runs through the public API (``prepare_wrap`` / ``save_continuity``) and its patterns cite
turns of that session, which links them (``consolidation.associations``). Two scripts:

* ``shared-words``: a pattern per pair of the session's turns sharing at least 2 meaningful
  words (speaker names left out), the 8 pairs sharing most; each explanation is those words, so
  the immune system accepts the citations. A stand-in for an LLM that notices recurring topics.
* ``random-pairs``: 8 random pairs of the session's turns (explanations still grounded). Links
  that carry no information: the lane must not hurt even then.

Then every question of categories 1-4 goes through ``retrieve`` with the association lane at
each weight of a grid (0 = off) on the same store; the weight is chosen on one half of the
conversations (1-5 / 6-10) and reported on the other (``evaluation.halves``). Nothing here reads
the questions or their evidence before retrieval. Query and turn vectors (all-MiniLM-L6-v2) come
from the levers benchmark's cache under /tmp, the real model only for what it lacks.

    python -m benchmarks.bench_locomo_associations [--data PATH]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

import mempager
from mempager import PagerConfig
from mempager.consolidation.lines import meaningful_words
from mempager.evaluation import locomo
from mempager.evaluation.evalkit import progress_bar
from mempager.evaluation.halves import HALVES, OTHER
from mempager.evaluation.levers_data import CachedEmbedder, VectorCache
from mempager.lanes.retrieval import Retriever

from ._common import LOCOMO, write_results
from .bench_locomo_levers import CACHE, MODEL

WEIGHTS = (0.0, 0.1, 0.2, 0.4)
PAIRS = 8  # patterns per session wrap
KS = (5, 10)
BUDGET = 2000


def words(text: str) -> frozenset[str]:
    speaker, _, said = text.partition(": ")
    return meaningful_words(said) - meaningful_words(speaker)


def script(episodes: Sequence[Any], kind: str, rng: random.Random, day: str) -> str:
    """A continuity whose Patterns section cites pairs of this wrap's episodes."""
    wanted = [(e, words(e.text)) for e in episodes]
    if kind == "shared-words":
        pairs = [(len(a[1] & b[1]), i, j) for (i, a), (j, b) in combinations(enumerate(wanted), 2)]
        chosen = [(i, j) for n, i, j in sorted(pairs, key=lambda p: (-p[0], p[1], p[2])) if n >= 2][:PAIRS]
    else:
        usable = [i for i, (_, w) in enumerate(wanted) if len(w) >= 2]
        chosen = [tuple(rng.sample(usable, 2)) for _ in range(PAIRS)] if len(usable) >= 2 else []
    lines = []
    for n, (i, j) in enumerate(chosen):
        cites = []
        for x in (i, j):
            episode, mine = wanted[x]
            why = " ".join(sorted(mine & wanted[j if x == i else i][1]) or sorted(mine))
            cites.append(f'[evidence: {episode.id} "{why if len(why.split()) >= 2 else " ".join(sorted(mine))}"]')
        lines.append(f"- topic {n} | 1x ({day}) " + " ".join(cites))
    patterns = "\n".join(lines) or "-"
    return f"## State\n-\n## Patterns\n{patterns}\n## Decisions\n-\n## Context\n-\n"


def build(p: Any, conv: locomo.Conversation, kind: str, seed: int) -> tuple[dict[int, str], int]:
    """Write the conversation session by session, wrapping after each; labels -> dia ids, links."""
    rng = random.Random(seed)
    ids: dict[int, str] = {}
    sessions: dict[str, list[locomo.Turn]] = {}
    for turn in conv.turns:
        sessions.setdefault(turn.dia_id.split(":")[0], []).append(turn)
    for turns in sessions.values():
        uris = p.remember_many([{"type": "event", "text": t.memory_text(), "created_at": t.created_at} for t in turns])
        ids.update({p.get(uri).label: t.dia_id for uri, t in zip(uris, turns, strict=True)})
        p.sync()
        wrap = p.prepare_wrap()
        if wrap.status == "ready":
            p.save_continuity(
                script(wrap.episodes, kind, rng, turns[-1].created_at.date().isoformat()), allow_shrink=True
            )
    return ids, len(p.store.consolidation.links(p.actor))


def run(data: Path, kind: str, cache: VectorCache) -> dict[str, Any]:
    conversations = locomo.load(data)
    rows: list[dict[str, Any]] = []
    links_total = 0
    config = PagerConfig(embedder="auto")
    total = sum(len(c.questions) for c in conversations)
    with progress_bar(total, f"associations {kind}") as bar, tempfile.TemporaryDirectory() as tmp:
        for c, conv in enumerate(conversations):
            path = Path(tmp) / f"c{c}.duckdb"
            with mempager.open(path, actor="conv", config=config, embedder=CachedEmbedder(cache)) as p:
                ids, links = build(p, conv, kind, seed=c)
                links_total += links
                retrievers = {
                    w: Retriever(
                        p.store,
                        p.actor,
                        config.with_(lane_weights={**config.lane_weights, "association": w}),
                        clock=p.clock,
                        semantic=p.semantic,
                        lexical=p.lexical,
                    )
                    for w in WEIGHTS
                }
                for q in conv.questions:
                    row: dict[str, Any] = {"conv": c, "category": q.category}
                    for w, r in retrievers.items():
                        for k in KS:
                            got = {ids[s.label] for s in r.retrieve(q.text, k)} & q.evidence
                            row[f"{w} R@{k}"] = len(got) / len(q.evidence)
                        got = {ids[s.label] for s in r.retrieve(q.text, 100, budget=BUDGET)} & q.evidence
                        row[f"{w} {BUDGET} tok"] = len(got) / len(q.evidence)
                        row[f"{w} linked"] = int(any("association" in s.lanes for s in r.retrieve(q.text, 10)))
                    rows.append(row)
                    bar.update(1)
    return {"rows": rows, "links": links_total}


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    cols = [f"R@{k}" for k in KS] + [f"{BUDGET} tok"]

    def mean(w: float, col: str, half: str | None = None, category: int | None = None) -> float:
        vals = [
            r[f"{w} {col}"]
            for r in rows
            if (half is None or r["conv"] in HALVES[half]) and (category is None or r["category"] == category)
        ]
        return float(np.mean(vals)) if vals else float("nan")

    table = {str(w): {col: mean(w, col) for col in cols + ["linked"]} for w in WEIGHTS}
    per_half = {}
    for half in HALVES:  # the weight that scored best on the other half (R@10), reported here
        tune = OTHER[half]
        best = max(WEIGHTS, key=lambda w: (round(mean(w, "R@10", tune), 6), -w))
        per_half[half] = {
            "chosen_on_other_half": best,
            "off": {col: mean(0.0, col, half) for col in cols},
            "chosen": {col: mean(best, col, half) for col in cols},
        }
    categories = {
        locomo.CATEGORIES[cat]: {str(w): mean(w, "R@10", category=cat) for w in WEIGHTS} for cat in (1, 2, 3, 4)
    }
    return {"by_weight": table, "halves": per_half, "r10_by_category": categories, "questions": len(rows)}


def markdown(result: dict[str, Any]) -> str:
    out = [
        "LoCoMo with session wraps: the association lane. all-MiniLM-L6-v2 · "
        f"{result['questions']} questions (categories 1-4) · default config, association weight varied",
        "",
    ]
    for kind, res in result["scripts"].items():
        out += [f"## script `{kind}` ({res['links']} links over the 10 conversations)", ""]
        out += ["| association weight | R@5 | R@10 | 2000 tok | questions whose top 10 holds a linked memory |"]
        out += ["|---|---|---|---|---|"]
        for w, m in res["by_weight"].items():
            out.append(f"| {w} | {m['R@5']:.3f} | {m['R@10']:.3f} | {m[f'{BUDGET} tok']:.3f} | {m['linked']:.1%} |")
        out += ["", "Weight chosen on one half (R@10), reported on the other:", ""]
        out += ["| half | chosen | R@10 off | R@10 chosen | R@5 off | R@5 chosen |", "|---|---|---|---|---|---|"]
        for half, h in res["halves"].items():
            out.append(
                f"| {half} | {h['chosen_on_other_half']} | {h['off']['R@10']:.3f} | {h['chosen']['R@10']:.3f} "
                f"| {h['off']['R@5']:.3f} | {h['chosen']['R@5']:.3f} |"
            )
        out += ["", "R@10 by category and weight:", ""]
        out += ["| category | " + " | ".join(str(w) for w in WEIGHTS) + " |", "|---" * (len(WEIGHTS) + 1) + "|"]
        for cat, per in res["r10_by_category"].items():
            out.append(f"| {cat} | " + " | ".join(f"{v:.3f}" for v in per.values()) + " |")
        out.append("")
    out.append(result["note"])
    return "\n".join(out) + "\n"


NOTE = (
    "Each session is written, embedded and wrapped before the next (a scripted wrap: no LLM; see the "
    "module docstring). Links form only between turns of the same session (a wrap cites only its own "
    "episodes). The default weight is 0.2; with no wrap the lane is empty and retrieval is unchanged."
)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--data", type=Path, default=LOCOMO)
    ap.add_argument("--cache", type=Path, default=CACHE)
    args = ap.parse_args(argv)

    def make() -> Any:
        from mempager.embedders import LocalEmbedder

        return LocalEmbedder()

    cache = VectorCache(args.cache, MODEL, make)
    started = time.perf_counter()
    scripts = {}
    for kind in ("shared-words", "random-pairs"):
        res = run(args.data, kind, cache)
        scripts[kind] = {"links": res["links"], **summarise(res["rows"])}
    result = {
        "questions": scripts["shared-words"]["questions"],
        "weights": list(WEIGHTS),
        "scripts": scripts,
        "seconds": round(time.perf_counter() - started, 1),
        "note": NOTE,
    }
    write_results("locomo_associations", result, markdown(result))
    print(json.dumps({k: v["halves"] for k, v in scripts.items()}, indent=1), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
