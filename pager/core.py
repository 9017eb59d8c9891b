"""The Pager: pins, page-faults, writes back. It owns no data; the store does."""

from __future__ import annotations

import logging
import re
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .audit import AuditEntry, AuditReport
from .config import PagerConfig
from .errors import InvalidInput, MemoryNotFound, PagerError
from .fence import line_prefix
from .fusion import Cut, Fused, Packer, fuse, fuse_scores, is_current
from .lexical_lane import LexicalLane
from .page import FENCE_TOKENS, HEADER_TOKENS, Page, PageReport, SectionTotal, render_pattern, snippet_report
from .patterns import Pattern
from .pinned import PinnedBlock, build_pinned, hard_constraints, select_profile
from .procedural import ProceduralMixin
from .protocols import Embedder, LexicalLaneLike, SemanticLaneLike
from .salience import params_from_config
from .semantic import SemanticLane, slug
from .store import DuckDBStore
from .types import Memory, MemoryType, PutResult, Snippet, Source
from .validate import check_actor, check_text, check_type, normalize, parse_since, parse_time, parse_uri
from .worker import EmbedWorkers
from .writeback import WriteBack

log = logging.getLogger("mempager")
_WORD = re.compile(r"[\w][\w.:/@#+-]*[\w]|[\w]")
_STOP = frozenset(
    "a an and are as at be by do for from has have how i in is it me my of on or the to was "
    "what when where which who why with you your".split()
)


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.casefold()) if w not in _STOP and len(w) > 1}


class Pager(ProceduralMixin, WriteBack):
    def __init__(
        self,
        store: DuckDBStore,
        actor: str,
        *,
        config: PagerConfig,
        embedder: Embedder,
        embedder_report: Sequence[dict[str, str]] = (),
        owns_store: bool = True,
        on_audit_event: Callable[[AuditEntry], None] | None = None,
    ) -> None:
        self.store = store
        self.actor = check_actor(actor)
        self.config = config
        self.embedder_report = list(embedder_report)
        self._owns_store = owns_store
        self.clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc)  # tests freeze it
        self.semantic: SemanticLaneLike
        self.lexical: LexicalLaneLike
        native = getattr(store, "native_lanes", None)
        if native is not None:  # a server store that answers both lanes itself (many processes)
            self.semantic, self.lexical = native(self.actor, embedder)
        else:  # the embedded store: per-process caches derived from the store, saved beside it
            index_dir = Path(store.location + ".index")
            self.semantic = SemanticLane(store, self.actor, embedder, index_dir, store_id=store.store_id)
            self.lexical = LexicalLane(store, self.actor, index_dir / slug(self.actor) / "lexical",
                                       store_id=store.store_id)
        self.semantic.open()
        self.lexical.open()
        store.add_change_listener(self.actor, self._on_change)
        self.workers = EmbedWorkers(
            self.semantic, workers=config.embed_workers, batch_size=config.embed_batch_size
        )
        self._closed = False
        self._audit_listener: Callable[[AuditEntry], None] | None = None
        if on_audit_event is not None:
            def listener(entry: AuditEntry) -> None:
                if entry.actor == self.actor:
                    on_audit_event(entry)
            self._audit_listener = listener
            store.add_audit_listener(listener)

    # -- lifecycle ----------------------------------------------------------------------------
    def __enter__(self) -> Pager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.workers.stop()
        self.store.remove_change_listener(self.actor, self._on_change)
        self.semantic.save()
        self.lexical.save()
        if self._audit_listener is not None:
            self.store.remove_audit_listener(self._audit_listener)
        if self._owns_store:
            self.store.close()

    def sync(self, timeout: float | None = None) -> bool:
        """Wait until every memory has a vector of the active model. False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self.workers.notify()
        while True:
            if self.store.pending_stats(self.actor, self.semantic.model).count == 0:
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.02)

    def _after_write(self, results: Sequence[PutResult]) -> None:
        if results:
            self.workers.notify()

    def _on_change(self, upserted: Sequence[Memory], removed: Sequence[int]) -> None:
        """Every committed change to this actor's memories, whoever made it (store write lock held)."""
        self.lexical.apply(upserted, removed)
        self.semantic.track(upserted, removed)

    # -- reads --------------------------------------------------------------------------------
    def pinned(self, goal: str | None = None) -> str:
        return self.pinned_block(goal).text

    def pinned_block(self, goal: str | None = None) -> PinnedBlock:
        now = datetime.now(timezone.utc)
        if goal is not None:
            goal = check_text(goal, self.config.max_text_bytes, "goal")
        stored = [m for m in self.store.of_types(self.actor, [MemoryType.GOAL], limit=5) if is_current(m, now)]
        if goal is None and stored:
            goal = stored[0].text
        # the stored goal that is being pinned must not come back as a retrieved snippet
        goal_uris = [m.uri for m in stored if goal is not None and normalize(m.text) == normalize(goal)]
        of_types = self.store.of_types
        identities = [m for m in of_types(self.actor, [MemoryType.IDENTITY], limit=5) if is_current(m, now)]
        rules = [m for m in of_types(self.actor, [MemoryType.RULE], "oldest", 10_000) if is_current(m, now)]
        constraints = hard_constraints(of_types(self.actor, [MemoryType.CONSTRAINT], "oldest", 10_000), now)
        profile_pool = of_types(self.actor, [MemoryType.PROFILE], limit=self.config.profile_limit * 4)
        block = build_pinned(
            identity=identities[0] if identities else None,
            rules=rules,
            constraints=constraints,
            profile=select_profile(profile_pool, self.config.profile_limit, now),
            goal=goal,
            budget=self.config.pinned_budget_tokens,
            estimate=self.config.token_estimator,
        )
        if goal_uris and goal is not None and goal.strip():
            block = replace(block, uris=block.uris + tuple(goal_uris))
        return block

    def retrieve(self, query: str, k: int | None = None, *, budget: int | None = None) -> list[Snippet]:
        """Page fault: the few memories this turn needs, fused from every lane.

        ``k`` defaults to ``retrieval_top_k``, ``budget`` (tokens) to ``retrieval_budget_tokens``.
        """
        snippets, _, _ = self._retrieve(query, k, budget, exclude=frozenset())
        return snippets

    def _lanes(self, query: str, depth: int) -> dict[str, list[tuple[int, float]]]:
        return self._rank(query, depth)[0]

    def _rank(self, query: str, depth: int) -> tuple[dict[str, list[tuple[int, float]]], dict[str, dict[int, float]]]:
        """Each lane's ranked (label, score) list, ``depth`` deep (lanes never gate each other),
        and each lane's score for the candidates the other lanes found."""
        lanes: dict[str, list[tuple[int, float]]] = {}
        completions: dict[str, dict[int, float]] = {}
        vector = None
        try:
            vector = self.semantic.embed_query(query)
            lanes["semantic"] = self.semantic.search_vector(vector, depth)
        except PagerError as exc:  # a failing embedder degrades retrieval, it does not stop it
            log.warning("semantic lane skipped for this query: %s", exc)
        semantic_labels = [label for label, _ in lanes.get("semantic", ())]
        lanes["lexical"], completions["lexical"] = self.lexical.search_scored(query, depth, semantic_labels)
        params = params_from_config(self.config, self.clock())
        only = self.semantic.unembedded_labels() if self.config.salience_mode == "unindexed" else None
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
        self, query: str, k: int | None, budget: int | None, exclude: frozenset[str]
    ) -> tuple[list[Snippet], list[Cut], dict[str, int]]:
        query = check_text(query, self.config.max_text_bytes, "query")
        k = self.config.retrieval_top_k if k is None else k
        budget = self.config.retrieval_budget_tokens if budget is None else budget
        for name, value in (("k", k), ("budget", budget)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInput(f"{name} must be a positive integer, got {value!r}")
        lanes, completions = self._rank(query, self._depth(k, budget))
        fused = self._fuse(lanes, completions)
        snippets, cuts = self._select(fused, k, budget, exclude)
        return snippets, cuts, {name: len(hits) for name, hits in lanes.items()}

    def _select(
        self, fused: Sequence[Fused], k: int, budget: int, exclude: frozenset[str]
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
        done, chunk = 0, 2 * k + 16
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
        if rest:
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

    def page(self, goal: str | None, query: str, *, turn: str | None = None) -> Page:
        """The whole per-turn context. With ``turn``, what was injected is recorded for feedback."""
        pinned = self.pinned_block(goal)
        full, menu, avoid = self._procedures(goal)
        procedure_uris = frozenset(p.uri for p in (*full, *menu, *avoid))
        estimate = self.config.token_estimator
        pattern_tokens = sum(estimate(render_pattern(p)) + 1 for p in full) + sum(
            estimate(p.menu_line()) + 1 for p in (*menu, *avoid)) + 3 * HEADER_TOKENS
        # the page as a whole has a budget too: retrieval gets what pinned and procedures leave
        room = self.config.page_budget_tokens - pinned.tokens - pattern_tokens - FENCE_TOKENS
        retrieval_budget = max(1, min(self.config.retrieval_budget_tokens, room))
        snippets, cuts, sizes = self._retrieve(
            query, None, retrieval_budget, exclude=frozenset(pinned.uris) | procedure_uris
        )
        if turn is not None:
            turn = check_text(turn, 1_000, "turn")
            self.store.record_injections(
                self.actor, turn, [(p.uri, "pattern") for p in full] + [(p.uri, "anti_pattern") for p in avoid]
            )
        report = PageReport(
            goal=goal,
            query=query,
            snippets=tuple(snippet_report(s) for s in snippets),
            cuts=tuple(cuts) + tuple(Cut(u, "budget", "pinned budget reached") for u in pinned.omitted),
            sections={
                "pinned": SectionTotal(pinned.tokens, self.config.pinned_budget_tokens, len(pinned.uris)),
                "patterns": SectionTotal(pattern_tokens if full or menu or avoid else 0,
                                         self.config.patterns_budget_tokens,
                                         len(full) + len(menu) + len(avoid)),
                "retrieved": SectionTotal(sum(s.tokens for s in snippets), retrieval_budget, len(snippets)),
            },
            embedder=self.semantic.model,
            lane_sizes=sizes,
        )
        return Page(goal, query, pinned, tuple(full), tuple(snippets), report, tuple(menu), tuple(avoid))

    def _procedures(self, goal: str | None) -> tuple[list[Pattern], list[Pattern], list[Pattern]]:
        """Proven patterns in full (within budget), a one-line menu of the rest, what to avoid."""
        if not goal:
            return [], [], []
        ranked = self.procedural(goal)
        estimate, budget = self.config.token_estimator, self.config.patterns_budget_tokens
        full: list[Pattern] = []
        menu: list[Pattern] = []
        used = 0
        for pattern in ranked:
            cost = estimate(pattern.spec.render())
            if len(full) < self.config.max_patterns_in_page and used + cost <= budget:
                full.append(pattern)
                used += cost
            elif len(menu) < self.config.menu_max_patterns and used + estimate(pattern.menu_line()) <= budget:
                menu.append(pattern)
                used += estimate(pattern.menu_line())
        avoid = [p for p in self.anti_patterns(goal) if used + estimate(p.menu_line()) <= budget]
        return full, menu, avoid[: self.config.menu_max_patterns]

    def _embedder(self) -> Embedder:
        return self.semantic.embedder

    # -- forgetting and stats ------------------------------------------------------------------
    def forget(
        self,
        uri: str | None = None,
        *,
        actor: str | None = None,
        where: Mapping[str, Any] | None = None,
        hard: bool = True,
    ) -> int:
        """Forget one memory by uri, or every memory of ``actor`` matching ``where``.

        ``where`` takes recall's filters (query, types, since, until, source, tags); an empty
        ``where`` forgets all of the actor's memories. Hard by default: after the call the text
        and vectors are gone from the store, every lane and index, and the files on disk (the
        store file is rewritten). ``hard=False`` deletes logically only: the bytes may remain in
        the files until the next hard forget or ``compact()``. Returns how many were forgotten.
        """
        if (uri is None) == (actor is None and where is None):
            raise InvalidInput("forget takes a uri, or actor= and/or where= (not both, not neither)")
        if uri is not None:
            owner, _, memory_id = parse_uri(uri)
            if owner != self.actor or self.store.get(self.actor, memory_id) is None:
                # never confirm or deny another actor's memory
                raise MemoryNotFound(f"no memory {uri} for actor {self.actor!r}; it may be forgotten already")
            ids = [memory_id]
        else:
            if actor is not None and actor != self.actor:
                raise MemoryNotFound(f"this pager serves actor {self.actor!r}; open one for {actor!r} to forget there")
            ids = [m.id for m in self.recall(limit=1_000_000_000, **dict(where or {}))]
        with self.semantic.lock:
            removed = self.store.delete_many(self.actor, ids)
            self.semantic.remove([m.label for m in removed])
        if removed and hard:
            self.compact()
        return len(removed)

    def reembed(self, progress: Callable[[int, int], None] | None = None, timeout: float | None = None) -> bool:
        """Wait while the workers give every memory a vector of the active model.

        Switching embedders starts this by itself (memories without a vector of the active model
        are pending); an interrupted run resumes where it stopped. ``progress(done, total)`` is
        called as the queue drains. Old models' vectors stay until ``finalize_migration``.
        """
        total = self.store.pending_stats(self.actor, self.semantic.model).count
        deadline = None if timeout is None else time.monotonic() + timeout
        self.workers.notify()
        while True:
            left = self.store.pending_stats(self.actor, self.semantic.model).count
            if progress is not None:
                progress(total - left, total)
            if left == 0:
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.2)

    def finalize_migration(self) -> dict[str, int]:
        """Drop other models' vectors (and their saved indexes) once the active model covers all."""
        pending = self.store.pending_stats(self.actor, self.semantic.model).count
        if pending:
            raise InvalidInput(
                f"migration to {self.semantic.model} is not complete: {pending} memories still pending; "
                "run `mempager reembed` until it finishes, then finalize"
            )
        dropped = {}
        for model in self.store.vector_models(self.actor):
            if model != self.semantic.model:
                dropped[model] = self.store.drop_vectors(self.actor, model)
                folder = getattr(self.semantic, "directory", None)  # only the embedded lane saves files
                if folder is not None and (folder.parent / slug(model)).exists():
                    shutil.rmtree(folder.parent / slug(model))
        return dropped

    def compact(self) -> None:
        """Erase deleted memories' bytes: rebuild and re-save the indexes, rewrite the store file."""
        self.semantic.purge()
        self.lexical.rebuild("purge after forget")
        self.lexical.save()
        self.store.compact()

    def audit(self, since: Any = None, limit: int = 1000) -> list[AuditEntry]:
        """This actor's audit entries, oldest first (``since``: a time, or "7d" / "12h" / "30m")."""
        return self.store.audit_entries(self.actor, parse_since(since) if since is not None else None, limit)

    def verify_audit(self) -> AuditReport:
        return self.store.verify_audit()

    def update(self, uri: str, **changes: Any) -> Memory:
        """Correct a memory in place: text, tags, importance, confidence, metadata, valid_until.

        A new text is re-embedded in the background (its old vector stops answering at once)
        and re-indexed lexically in this call.
        """
        allowed = {"text", "tags", "importance", "confidence", "metadata", "valid_until"}
        unknown = set(changes) - allowed
        if unknown:
            raise InvalidInput(f"cannot update {sorted(unknown)}; updatable: {sorted(allowed)}")
        current = self.get(uri)
        probe = self._new(current.type, changes.get("text", current.text),
                          **{k: v for k, v in changes.items() if k in ("tags", "importance", "confidence",
                                                                       "metadata")})
        clean = {k: getattr(probe, k) for k in changes if k in ("text", "tags", "importance", "confidence",
                                                                "metadata")}
        if "valid_until" in changes:
            clean["valid_until"] = None if changes["valid_until"] is None else parse_time(
                changes["valid_until"], "valid_until")
        updated = self.store.update(self.actor, current.id, op="update", **clean)
        self.workers.notify()
        return updated

    def get(self, uri: str) -> Memory:
        actor, _, memory_id = parse_uri(uri)
        memory = self.store.get(self.actor, memory_id) if actor == self.actor else None
        if memory is None:
            raise MemoryNotFound(f"no memory {uri} for actor {self.actor!r}")
        return memory

    def stats(self) -> dict[str, Any]:
        pending = self.store.pending_stats(self.actor, self.semantic.model)
        lag = None
        if pending.oldest_created_at is not None:
            lag = (datetime.now(timezone.utc) - pending.oldest_created_at).total_seconds()
        counts = self.store.counts(self.actor)
        return {
            "store": self.store.location,
            "actor": self.actor,
            "memories": sum(counts.values()),
            "by_type": counts,
            "embedder": self.semantic.model,
            "embedder_candidates": self.embedder_report,
            "vectors_indexed": len(self.semantic),
            "pending_embeddings": pending.count,
            "failing_embeddings": pending.failing,
            "embedding_lag_seconds": lag,
            "last_embed_error": self.workers.last_error,
            "vector_models": self.store.vector_models(self.actor),
        }
