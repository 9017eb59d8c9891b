"""The faithfulness check: the real ``retrieve`` on the same questions, call for call."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from mempager.config import PagerConfig
from mempager.evaluation.levers_data import SETTINGS, CachedEmbedder, Conv, Outcome, VectorCache, actor_of
from mempager.evaluation.locomo import Conversation


def verify_against_product(
    conversations: Sequence[Conversation],
    convs: Sequence[Conv],
    cache: VectorCache,
    harness: Outcome,
    workdir: Path | None = None,
    progress: Callable[[int], None] | None = None,
    categories: Sequence[int] = (1, 2, 3, 4),
    config: PagerConfig | None = None,
) -> dict[str, Any]:
    """Run the real ``retrieve`` (default config, vectors from the cache) on every question at
    every setting; how often did ``harness`` return exactly its evidence? ``harness`` is
    ``evaluate(lanes, PRODUCT, keep_found=True)``: the harness's reading of the product's defaults
    (``config`` overrides the product's, for a check of another reading). The real calls' mean
    recall is reported over the questions of ``categories``."""
    import mempager

    if config is None:  # the harness leaves out the salience prior: on LoCoMo it is a constant
        # (benchmarks/results/locomo.md, "without the salience prior"), but it may break near-ties
        default = PagerConfig()
        config = replace(default, lane_weights={**default.lane_weights, "prior": 0.0})
    config = replace(config, embedder="auto")
    embedder = CachedEmbedder(cache, int(convs[0].vectors.shape[1]))
    if not harness.found:
        raise ValueError("the harness outcome needs keep_found=True")
    same = total = 0
    labels_in_order = True
    recall = np.zeros((len(harness.recall), len(SETTINGS)))
    row = 0
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        for conv, mine in zip(conversations, convs, strict=True):
            actor = actor_of(conv.sample_id)
            with mempager.open(Path(tmp) / f"{actor}.duckdb", actor=actor, config=config, embedder=embedder) as p:
                uris = p.remember_many(
                    [{"type": "event", "text": t.memory_text(), "created_at": t.created_at} for t in conv.turns]
                )
                p.sync()
                label_of = [p.get(uri).label for uri in uris]
                labels_in_order = labels_in_order and label_of == sorted(label_of)
                position = {label: i for i, label in enumerate(label_of)}
                for q in mine.questions:
                    evidence = set(q.evidence.tolist())
                    for j, s in enumerate(SETTINGS):
                        got = frozenset(
                            evidence.intersection(position[x.label] for x in p.retrieve(q.text, k=s.k, budget=s.budget))
                        )
                        recall[row, j] = len(got) / len(evidence)
                        same += got == harness.found[row][j]
                        total += 1
                    row += 1
                    if progress is not None:
                        progress(1)
    scored = np.isin(harness.category, categories)
    return {
        "agreement": same / total if total else None,
        "calls": total,
        "labels_in_insertion_order": labels_in_order,
        "product_recall": {s.label: float(recall[scored, j].mean()) for j, s in enumerate(SETTINGS)},
        "product_recall_questions": int(scored.sum()),
    }
