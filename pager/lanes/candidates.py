"""The completions ranking asks about its candidates once every content lane has answered: the
semantic score of what the other lanes found, and the prior (salience's recency and importance
among what matched the content).

Both are one ``Store.candidate_facts`` call when the semantic lane's scores are the store's own
(pgvector: one round trip instead of two); with an in-process index (hnswlib) the lane scores and
the store ranks the prior, as before. Either way the lanes and completions are the same.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Protocol, runtime_checkable

from mempager.config import PagerConfig
from mempager.lanes.fusion import UNEMBEDDED
from mempager.protocols import CandidateAsk, CandidateFacts, SalienceParams, SemanticLaneLike, Store
from mempager.types import FloatMatrix

Lanes = dict[str, list[tuple[int, float]]]


@runtime_checkable
class ScoresInStore(Protocol):
    """A semantic lane whose scores are the store's stored-vector cosines (``PgSemanticLane``)."""

    def facts_with_scores(self, vector: FloatMatrix, ask: CandidateAsk) -> CandidateFacts: ...


class Completions:
    """Fills ``completions["semantic"]``, ``completions[UNEMBEDDED]`` and ``lanes["prior"]`` for one actor."""

    def __init__(
        self, store: Store, semantic: SemanticLaneLike, actor: str, config: Callable[[], PagerConfig]
    ) -> None:
        self.store, self.semantic, self.actor = store, semantic, actor
        self._config = config  # the retriever's, read at each call: one config, never a stale copy
        # checked once (a Protocol isinstance costs microseconds): does the lane score from the store?
        self._scored_in_store = semantic if isinstance(semantic, ScoresInStore) else None

    @property
    def config(self) -> PagerConfig:
        return self._config()

    def fill(
        self,
        lanes: Lanes,
        completions: dict[str, dict[int, float]],
        vector: FloatMatrix | None,
        unembedded: set[int],
        params: SalienceParams,
    ) -> None:
        """Complete ``lanes`` and ``completions`` in place."""
        others: set[int] = set()
        if vector is not None:
            seen = {label for label, _ in lanes.get("semantic", ())}
            others = {
                label
                for name in ("lexical", "salience", "time")
                for label, _ in lanes.get(name, ())
                if label not in seen
            }
        content: set[int] = set()
        if self.config.lane_weights.get("prior", 0.0) > 0:  # salience in steady state: a bounded prior
            floor = self.config.semantic_floor  # a semantic hit at or below it scores 0: not a match
            content = {label for label, score in lanes.get("semantic", ()) if score > floor}
            content.update(label for name in ("lexical", "time") for label, _ in lanes.get(name, ()))
        # a lane over the store's vectors asks with the prior; an in-process index scores on its own
        in_store = self._scored_in_store if vector is not None else None
        ask = CandidateAsk(
            prior=sorted(content),
            types=self.config.salience_types,
            params=replace(params, w_access=0.0, w_strength=0.0) if content else None,
            cosine=sorted(others) if in_store is not None else (),
        )
        if in_store is not None and vector is not None:
            facts = in_store.facts_with_scores(vector, ask)
            prior, scores = facts.prior, facts.cosine
        else:
            prior = self.store.candidate_facts(self.actor, ask).prior if content else []
            scores = self.semantic.scores_for(vector, sorted(others)) if vector is not None else {}
        if vector is not None:
            completions["semantic"] = scores
            completions[UNEMBEDDED] = dict.fromkeys(sorted(others & unembedded), 0.0)
        if content:
            lanes["prior"] = prior
