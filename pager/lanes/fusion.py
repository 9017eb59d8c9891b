"""Fusion of the lanes and packing under a token budget.

Fusion is a union: a memory found by any lane is a candidate, and no lane gates another.
Candidates are ordered by weighted reciprocal-rank fusion, ties broken by label so the same
store and query always give the same page. Packing is greedy in that order; what does not make
it is reported with its reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from mempager.lanes.fused import UNEMBEDDED, Fused, FusedOrder, fuse_order
from mempager.patterns import PatternSpec
from mempager.tokens import truncate_tokens
from mempager.types import LaneHit, Memory, MemoryType, Snippet, Source

__all__ = ["UNEMBEDDED", "Cut", "Fused", "FusedOrder", "Packer", "Shown", "fuse", "fuse_order", "fuse_scores", "pack"]

# Below this many free tokens a truncated snippet is more noise than signal.
MIN_TRUNCATED_TOKENS = 32


class Shown(Protocol):
    """What packing reads of a memory: a ``Memory``, or the mirror's lighter row (``lanes.rows``)."""

    @property
    def label(self) -> int: ...
    @property
    def uri(self) -> str: ...
    @property
    def type(self) -> MemoryType: ...
    @property
    def text(self) -> str: ...
    @property
    def source(self) -> Source: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def superseded_by(self) -> str | None: ...
    @property
    def valid_until(self) -> datetime | None: ...


@dataclass(frozen=True, slots=True)
class Cut:
    """A candidate that did not reach the page, and why."""

    uri: str
    # budget | top_k | dedup (shown elsewhere in the page) | pinned | superseded | missing (index hit
    # not in the store) | decay | below_threshold
    reason: str
    detail: str
    lanes: Mapping[str, LaneHit] = field(default_factory=dict)


def fuse(lanes: Mapping[str, Sequence[tuple[int, float]]], weights: Mapping[str, float], rrf_k: int) -> list[Fused]:
    scores: dict[int, float] = {}
    hits: dict[int, dict[str, LaneHit]] = {}
    for lane in sorted(lanes):
        weight = weights.get(lane, 0.0)
        for rank, (label, score) in enumerate(lanes[lane], start=1):
            if lane in hits.get(label, {}):
                continue  # a lane that reports a label twice counts it once, at its best rank
            scores[label] = scores.get(label, 0.0) + weight / (rrf_k + rank)
            hits.setdefault(label, {})[lane] = LaneHit(lane=lane, rank=rank, score=float(score))
    order = sorted(scores, key=lambda lab: (-scores[lab], lab))
    return [Fused(label=lab, score=scores[lab], hits=hits[lab]) for lab in order]


def fuse_scores(
    lanes: Mapping[str, Sequence[tuple[int, float]]],
    completions: Mapping[str, Mapping[int, float]],
    weights: Mapping[str, float],
    semantic_floor: float,
) -> list[Fused]:
    """Weighted sum of per-lane normalised scores over the union of the lanes' candidates.

    Semantic similarity is absolute: ``(cosine - semantic_floor) / (1 - semantic_floor)``, so a
    poor best match stays poor. Lexical (BM25) and salience scores have no fixed scale and are
    divided by the best score the lane returned for this query. A candidate one lane did not
    rank still gets that lane's score when it can be looked up (``completions``), so the order
    does not depend on how deep each lane looked. Ties break by label.

    A candidate with no vector yet (``completions[UNEMBEDDED]``: just written, or mid-migration)
    has no semantic score at all, which is not the same as a poor one: while the semantic lane
    answers for the others, its semantic share is taken to equal its normalised lexical score, so
    an exact lexical match is not outranked by near matches only because they were embedded first.
    """
    return list(fuse_order(lanes, completions, weights, semantic_floor))


def display_text(memory: Shown) -> str:
    if memory.type is MemoryType.PATTERN:
        return PatternSpec.decode(memory.text).render()
    return memory.text


def is_current(memory: Shown, now: datetime) -> bool:
    return memory.superseded_by is None and (memory.valid_until is None or memory.valid_until > now)


class Packer:
    """Greedy packing in fused order; the first snippet that does not fit may be truncated.

    ``cost(memory, text, truncated)`` is what a snippet costs once rendered (its provenance
    prefix and line break included); by default only its text is counted.
    """

    def __init__(
        self,
        k: int,
        budget: int,
        estimate: Callable[[str], int],
        cost: Callable[[Shown, str, bool], int] | None = None,
        *,
        floor: int = 4,
        explain: bool = True,
    ) -> None:
        self.k, self.budget, self.estimate = k, budget, estimate
        self.cost: Callable[[Shown, str, bool], int] = cost or (lambda memory, text, truncated: estimate(text))
        self.floor = floor  # no snippet costs less: below this much room nothing fits any more
        self.explain = explain  # record what was cut (a report needs it; a plain page fault does not)
        self.snippets: list[Snippet] = []
        self.cuts: list[Cut] = []
        self.used = 0

    @property
    def full(self) -> bool:
        return len(self.snippets) >= self.k or self.budget - self.used < self.floor

    def _cut(self, memory: Shown, reason: str, detail: str, fused: Fused) -> None:
        if self.explain:
            self.cuts.append(Cut(memory.uri, reason, detail, fused.hits))

    def offer(self, memory: Shown, fused: Fused) -> None:
        text = display_text(memory)
        if len(self.snippets) >= self.k:
            self._cut(memory, "top_k", f"already {self.k} snippets", fused)
            return
        tokens = self.cost(memory, text, False)
        truncated = False
        room = self.budget - self.used
        if tokens > room:
            if self.snippets:  # only a section's first snippet is worth truncating
                self._cut(memory, "budget", f"needs {tokens} tokens, {room} left", fused)
                return
            text = self._truncate(memory, text, room)
            if not text:
                self._cut(memory, "budget", f"needs {tokens} tokens; {room} cannot hold a useful part of it", fused)
                return
            tokens, truncated = self.cost(memory, text, True), True
        self.used += tokens
        self.snippets.append(
            Snippet(
                uri=memory.uri,
                text=text,
                type=memory.type,
                score=fused.score,
                lanes=fused.hits,
                label=memory.label,
                source=memory.source,
                created_at=memory.created_at,
                tokens=tokens,
                truncated=truncated,
            )
        )

    def _truncate(self, memory: Shown, text: str, room: int) -> str:
        """The longest cut of ``text`` whose rendered line fits ``room``; "" when too little fits."""
        limit = room - self.cost(memory, "", True)
        while limit >= MIN_TRUNCATED_TOKENS:
            cut = truncate_tokens(text, limit)
            over = self.cost(memory, cut, True) - room if cut else 0
            if over <= 0:  # rendering can lengthen text (escaped characters): shrink until it fits
                return cut
            limit -= over
        return ""


def pack(
    candidates: Sequence[tuple[Memory, Fused]],
    *,
    k: int,
    budget: int,
    estimate: Callable[[str], int],
) -> tuple[list[Snippet], list[Cut]]:
    packer = Packer(k, budget, estimate)
    for memory, fused in candidates:
        packer.offer(memory, fused)
    return packer.snippets, packer.cuts
