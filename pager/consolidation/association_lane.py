"""The association lane's candidates: strong co-citation neighbours of a query's best hits.

A pure function over the store, not yet wired into retrieval (``lanes/`` fuses it; see the
wiring note in the issue 20 report). Each neighbour scores ``hit score * strength / CAP`` through
its best seed, so a neighbour can never outscore the hit that brought it, and a link must be at
least ``min_strength`` (a single pattern co-citation is 1.0; one wrap-level co-citation, 0.3, is
not enough) to count. Hits themselves are never returned; every neighbour is read back from the
store (the link table may hold a label another process just forgot: it is skipped).
"""

from __future__ import annotations

from collections.abc import Sequence

from mempager.consolidation.associations import CAP
from mempager.protocols import Store
from mempager.types import Memory

MIN_STRENGTH = 1.0
SEEDS = 3  # only the best few hits bring neighbours: the tail of a result list is weak evidence


def association_candidates(
    store: Store,
    actor: str,
    hits: Sequence[tuple[int, float]],
    *,
    k: int = 10,
    seeds: int = SEEDS,
    min_strength: float = MIN_STRENGTH,
) -> list[tuple[Memory, float]]:
    """Up to ``k`` (memory, score) neighbours of the first ``seeds`` (label, score) ``hits``, best first."""
    top = [(int(label), float(score)) for label, score in hits[:seeds] if score > 0]
    if not top or k <= 0:
        return []
    seen = {int(label) for label, _ in hits}
    seed_score = dict(top)
    best: dict[int, float] = {}
    for link in store.consolidation.links(actor, list(seed_score)):
        if link.strength < min_strength:
            continue
        for seed, other in ((link.a, link.b), (link.b, link.a)):
            if seed in seed_score and other not in seen:
                score = seed_score[seed] * min(link.strength, CAP) / CAP
                best[other] = max(best.get(other, 0.0), score)
    ranked = sorted(best.items(), key=lambda item: (-item[1], item[0]))[:k]
    found = store.get_many(actor, [label for label, _ in ranked])
    return [(found[label], score) for label, score in ranked if label in found]
