"""Page-fault retrieval: three lanes, fusion, re-check against the store, packing; explicit recall."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any

from .config import PagerConfig
from .errors import InvalidInput, PagerError
from .fence import line_prefix
from .fusion import Cut, Fused, Packer, fuse, fuse_scores, is_current
from .protocols import LexicalLaneLike, SemanticLaneLike, Store
from .salience import params_from_config
from .types import Memory, MemoryType, Snippet, Source
from .validate import check_text, check_type, parse_since, parse_time

log = logging.getLogger("mempager")


class RetrievalMixin:
    store: Store
    actor: str
    config: PagerConfig
    clock: Callable[[], datetime]
    semantic: SemanticLaneLike
    lexical: LexicalLaneLike
    workers: Any

    def retrieve(self, query: str, k: int | None = None, *, budget: int | None = None) -> list[Snippet]:
        """Page fault: the few memories this turn needs, fused from every lane.

        ``k`` defaults to ``retrieval_top_k``, ``budget`` (tokens) to ``retrieval_budget_tokens``.
        """
        snippets, _, _ = self._retrieve(query, k, budget, exclude=frozenset(), explain=False)
        return snippets

    def _lanes(self, query: str, depth: int) -> dict[str, list[tuple[int, float]]]:
        return self._rank(query, depth)[0]

    def _rank(self, query: str, depth: int) -> tuple[dict[str, list[tuple[int, float]]], dict[str, dict[int, float]]]:
        """Each lane's ranked (label, score) list, ``depth`` deep (lanes never gate each other),
        and each lane's score for the candidates the other lanes found."""
        lanes: dict[str, list[tuple[int, float]]] = {}
        completions: dict[str, dict[int, float]] = {}
        vector = None
        unindexed = self.config.salience_mode == "unindexed"
        # Snapshot what the semantic lane cannot see before *and* after searching it: a memory the
        # worker indexes meanwhile is in the first, one a re-wording pulls out is in the second,
        # so no memory falls between the two lanes for this query.
        before = set(self.semantic.unembedded_labels()) if unindexed else set()
        try:
            vector = self.semantic.embed_query(query)
            lanes["semantic"] = self.semantic.search_vector(vector, depth)
        except PagerError as exc:  # a failing embedder degrades retrieval, it does not stop it
            log.warning("semantic lane skipped for this query: %s", exc)
        semantic_labels = [label for label, _ in lanes.get("semantic", ())]
        lanes["lexical"], completions["lexical"] = self.lexical.search_scored(query, depth, semantic_labels)
        params = params_from_config(self.config, self.clock())
        only = sorted(before.union(self.semantic.unembedded_labels())) if unindexed else None
        lanes["salience"] = self.store.salience(self.actor, self.config.salience_types, params, depth, only)
        if vector is not None:
            seen = set(semantic_labels)
            others = {label for name in ("lexical", "salience") for label, _ in lanes[name] if label not in seen}
            completions["semantic"] = self.semantic.scores_for(vector, sorted(others))
        return lanes, completions

    def _fuse(
        self, lanes: dict[str, list[tuple[int, float]]], completions: dict[str, dict[int, float]]
    ) -> list[Fused]:
        if self.config.fusion == "rrf":
            return fuse(lanes, self.config.lane_weights, self.config.rrf_k)
        return fuse_scores(lanes, completions, self.config.lane_weights, self.config.semantic_floor)

    def _depth(self, k: int, budget: int) -> int:
        """How deep each lane must look to fill ``k`` snippets or ``budget`` tokens."""
        return max(self.config.lane_depth, 2 * min(k, budget // 8))

    def _retrieve(
        self, query: str, k: int | None, budget: int | None, exclude: frozenset[str], explain: bool = True
    ) -> tuple[list[Snippet], list[Cut], dict[str, int]]:
        query = check_text(query, self.config.max_text_bytes, "query")
        k = self.config.retrieval_top_k if k is None else k
        budget = self.config.retrieval_budget_tokens if budget is None else budget
        for name, value in (("k", k), ("budget", budget)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInput(f"{name} must be a positive integer, got {value!r}")
        lanes, completions = self._rank(query, self._depth(k, budget))
        fused = self._fuse(lanes, completions)
        snippets, cuts = self._select(fused, k, budget, exclude, explain)
        return snippets, cuts, {name: len(hits) for name, hits in lanes.items()}

    def _select(
        self, fused: Sequence[Fused], k: int, budget: int, exclude: frozenset[str], explain: bool = True
    ) -> tuple[list[Snippet], list[Cut]]:
        """Re-check every hit against the store, drop what must not be shown, pack the rest.

        Candidates are hydrated in chunks, in fused order, only until the page section is full.
        """
        fused = self._reserve_for_unembedded(fused, k)
        now = datetime.now(timezone.utc)
        estimate = self.config.token_estimator
        packer = Packer(k, budget, estimate, overhead=lambda m: estimate(
            line_prefix(m.type.value, m.created_at, m.source.value, m.uri, True)) + 1)
        cuts: list[Cut] = []
        seen: dict[str, Memory] = {}
        done, chunk = 0, k + 8
        while done < len(fused) and not packer.full:
            part = fused[done : done + chunk]
            done += len(part)
            memories = self.store.get_many(self.actor, [f.label for f in part])
            for item in part:
                memory = memories.get(item.label)
                if memory is None:
                    cuts.append(Cut(f"label:{item.label}", "missing", "index hit not in store", item.hits))
                elif memory.uri in exclude:
                    cuts.append(Cut(memory.uri, "pinned", "already in the pinned block", item.hits))
                elif not is_current(memory, now):
                    why = f"superseded by {memory.superseded_by}" if memory.superseded_by else "expired"
                    cuts.append(Cut(memory.uri, "superseded", why, item.hits))
                elif item.score <= 0 and self.config.fusion == "score":
                    cuts.append(Cut(memory.uri, "below_threshold", "no lane scored it above its floor", item.hits))
                else:
                    seen[memory.uri] = memory
                    packer.offer(memory, item)
        rest = fused[done:]
        if rest and explain:  # naming every candidate that ranked too low only matters in a report
            reason = "top_k" if len(packer.snippets) >= k else "budget"
            uris = self.store.uris(self.actor, [f.label for f in rest])
            cuts.extend(Cut(uris[f.label], reason, "ranked below a full section", f.hits)
                        for f in rest if f.label in uris)
        return packer.snippets, cuts + [self._blame_decay(cut, seen.get(cut.uri), now) for cut in packer.cuts]

    def _reserve_for_unembedded(self, fused: Sequence[Fused], k: int) -> list[Fused]:
        """Move the best salience-only finds up to the last ``salience_reserve`` of the k places."""
        reserve = min(self.config.salience_reserve, k)
        head = list(fused[: k - reserve])
        chosen = {f.label for f in head}
        fresh = [f for f in fused[k - reserve:] if "salience" in f.hits][:reserve]
        chosen |= {f.label for f in fresh}
        return head + fresh + [f for f in fused[k - reserve:] if f.label not in chosen]

    def _blame_decay(self, cut: Cut, memory: Memory | None, now: datetime) -> Cut:
        """A memory only the salience lane found, cut while decay had shrunk it: say so."""
        if memory is None or set(cut.lanes) != {"salience"}:
            return cut
        half = self.config.half_life_days.get(memory.type.value, self.config.default_half_life_days)
        age = max(0.0, (now - memory.created_at).total_seconds() / 86400.0)
        factor = 0.5 ** (age / half)
        if factor >= 0.5:
            return cut
        detail = f"{cut.detail}; recency ×{factor:.2f} (age {age:.0f} d, half-life {half:.0f} d)"
        return Cut(cut.uri, "decay", detail, cut.lanes)

    def recall(
        self,
        query: str | None = None,
        types: Sequence[str | MemoryType] | None = None,
        since: Any = None,
        until: Any = None,
        limit: int = 20,
        offset: int = 0,
        *,
        source: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
    ) -> list[Memory]:
        """Deliberate look-up. Without a query: newest first. With one: every match of the lexical
        query syntax (words AND'ed; ``OR``, ``NOT``/``-word``, ``"exact phrase"``, ``prefix*``,
        parentheses), best BM25 first. Filters apply to both; results are paginated."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidInput(f"limit must be a positive integer, got {limit!r}")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidInput(f"offset must be an integer >= 0, got {offset!r}")
        kinds = [check_type(t) for t in types] if types else None
        try:
            sources = [Source(s) for s in source] if source else None
        except ValueError:
            raise InvalidInput(f"source must be among {[s.value for s in Source]}, got {source!r}") from None
        lo = parse_since(since) if since is not None else None
        hi = parse_time(until, "until") if until is not None else None
        if not query:
            return self.store.query(self.actor, types=kinds, since=lo, until=hi, sources=sources,
                                    tags=tags, limit=limit, offset=offset)
        matches = self.lexical.match(check_text(query, self.config.max_text_bytes, "query"))
        memories = self.store.get_many(self.actor, [label for label, _ in matches])
        wanted_tags = set(tags or ())
        hits = [
            m for m in (memories.get(label) for label, _ in matches)
            if m is not None and (kinds is None or m.type in kinds) and (sources is None or m.source in sources)
            and (lo is None or m.created_at >= lo) and (hi is None or m.created_at < hi)
            and wanted_tags <= set(m.tags)
        ]
        return hits[offset: offset + limit]

