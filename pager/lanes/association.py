"""The association lane: strong co-citation neighbours of a query's best candidates (seed 003).

Consolidation links memories cited together (``consolidation.associations``): +1.0 when one
pattern cites both, +0.3 when one wrap does. A query's best few fused candidates (the *seeds*)
bring their neighbours whose link is at least ``min_strength`` (one pattern co-citation; a
single wrap-level co-citation is not enough). A neighbour scores ``seed score * strength / CAP``
through its best seed, so it can never outscore the hit that brought it; fusion normalises the
lane like any other and weighs it by ``lane_weights["association"]``.

The links are read from the store once and kept in memory as an adjacency map (a query must not
pay an SQL round trip): re-read after ``invalidate()`` (a wrap committed here) or when older
than ``refresh_seconds`` (a wrap committed by another process on a shared PostgreSQL store).
A neighbour is returned only while the store still holds it, so a forgotten memory never
comes back through a link the cache still has.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence

from mempager.consolidation.associations import CAP
from mempager.protocols import Store

MIN_STRENGTH = 1.0
SEEDS = 3  # only the best few candidates bring neighbours: the tail of a ranking is weak evidence
REFRESH_SECONDS = 5.0
Graph = Mapping[int, Sequence[tuple[int, float]]]


class AssociationLane:
    def __init__(
        self,
        store: Store,
        actor: str,
        *,
        min_strength: float = MIN_STRENGTH,
        seeds: int = SEEDS,
        refresh_seconds: float = REFRESH_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.actor = actor
        self.min_strength = min_strength
        self.seeds = seeds
        self.refresh_seconds = refresh_seconds
        self.clock = clock
        self._graph: Graph | None = None
        self._read_at = 0.0
        self._lock = threading.Lock()

    def invalidate(self) -> None:
        """The links changed (a wrap was saved): the next query reads them again."""
        with self._lock:
            self._graph = None

    def graph(self) -> Graph:
        """label -> [(neighbour, strength)] over the links at least ``min_strength`` strong."""
        with self._lock:
            now = self.clock()
            if self._graph is None or now - self._read_at > self.refresh_seconds:
                graph: dict[int, list[tuple[int, float]]] = {}
                for link in self.store.consolidation.links(self.actor):
                    if link.strength >= self.min_strength:
                        graph.setdefault(link.a, []).append((link.b, link.strength))
                        graph.setdefault(link.b, []).append((link.a, link.strength))
                self._graph, self._read_at = graph, now
            return self._graph

    def search(self, ranked: Sequence[tuple[int, float]], k: int) -> list[tuple[int, float]]:
        """Up to ``k`` (label, score) neighbours of the first ``seeds`` of ``ranked`` (best first,
        positive scores only), best first, ties to the lower label; the seeds themselves never."""
        graph = self.graph()
        if not graph or k <= 0:
            return []
        seeds = {int(label): float(score) for label, score in ranked[: self.seeds] if score > 0}
        best: dict[int, float] = {}
        for seed, seed_score in seeds.items():
            for other, strength in graph.get(seed, ()):
                if other not in seeds:
                    score = seed_score * min(strength, CAP) / CAP
                    if score > best.get(other, 0.0):
                        best[other] = score
        if not best:
            return []
        held = self.store.uris(self.actor, list(best))  # forgotten since the links were read: gone
        found = sorted(((label, s) for label, s in best.items() if label in held), key=lambda x: (-x[1], x[0]))
        return found[:k]
