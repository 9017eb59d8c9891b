"""The Pager: pins, page-faults, writes back. It owns no data; the store does."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mempager.store.audit import AuditEntry
from mempager.config import PagerConfig
from mempager.paging.fence import neutralize
from mempager.lanes.fusion import Cut, is_current
from mempager.lanes.lexical import LexicalLane
from mempager.maintenance.erasure import MaintenanceMixin
from mempager.paging.page import (
    AVOID_HEADER,
    FENCE_TOKENS,
    MENU_HEADER,
    PROVEN_HEADER,
    Page,
    PageReport,
    SectionTotal,
    avoid_line,
    render_pattern,
    snippet_report,
)
from mempager.procedural.patterns import Pattern
from mempager.paging.pinned import PinnedBlock, build_pinned, hard_constraints, select_profile
from mempager.procedural.procedures import ProceduralMixin
from mempager.protocols import Embedder, LexicalLaneLike, SemanticLaneLike
from mempager.lanes.semantic import SemanticLane, slug
from mempager.store.duckdb import DuckDBStore
from mempager.store.base import translate
from mempager.types import Memory, MemoryType, PutResult
from mempager.validate import check_actor, check_text, normalize
from mempager.maintenance.workers import EmbedWorkers
from mempager.writing.writeback import WriteBack

log = logging.getLogger("mempager")
_WORD = re.compile(r"[\w][\w.:/@#+-]*[\w]|[\w]")
_STOP = frozenset(
    "a an and are as at be by do for from has have how i in is it me my of on or the to was "
    "what when where which who why with you your".split()
)


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.casefold()) if w not in _STOP and len(w) > 1}


class Pager(MaintenanceMixin, ProceduralMixin, WriteBack):
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
            self.semantic = SemanticLane(store, self.actor, embedder, index_dir, store_id=store.store_id,
                                         M=config.hnsw_m, ef_construction=config.hnsw_ef_construction,
                                         ef=config.hnsw_ef, max_deleted_share=config.hnsw_max_deleted_share)
            self.lexical = LexicalLane(store, self.actor, index_dir / slug(self.actor) / "lexical",
                                       store_id=store.store_id)
        # Two caches from two sets of files: loaded side by side (file reads, hashing, DuckDB and
        # numpy release the GIL), so opening costs about the slower of the two, not their sum.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="mempager-open") as pool:
            lexical_opened = pool.submit(self.lexical.open)
            self.semantic.open()
            lexical_opened.result()
        store.add_change_listener(self.actor, self._on_change)
        self.workers = EmbedWorkers(
            self.semantic, workers=config.embed_workers, batch_size=config.embed_batch_size,
            max_attempts=config.embed_max_attempts, backoff=config.embed_backoff_seconds,
            max_backoff=config.embed_max_backoff_seconds,
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
        if self._audit_listener is not None:
            self.store.remove_audit_listener(self._audit_listener)
        failed: OSError | None = None
        try:  # the indexes are caches: a failed save is rebuilt or caught up on the next open
            self.semantic.save()
            self.lexical.save()
        except OSError as exc:
            failed = exc
            log.error("could not save the index caches of %s (they will be rebuilt on open): %s", self.actor, exc)
        finally:
            if self._owns_store:
                self.store.close()
        if failed is not None:
            raise translate(failed, self.store.location) from failed

    def sync(self, timeout: float | None = None) -> bool:
        """Wait until every memory has a vector of the active model. False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self.workers.notify()
        while True:
            # "done" means indexed, not just stored: the last batch is claimed until it is in the lane
            if self._pending() == 0 and not self.workers.busy:
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.02)

    def _pending(self) -> int:
        hint = getattr(self.semantic, "pending_hint", None)  # the embedded lane knows without SQL
        return int(hint()) if hint is not None else self.store.pending_stats(self.actor, self.semantic.model).count

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

    def pinned_block(self, goal: str | None = None, *, budget: int | None = None) -> PinnedBlock:
        """The pinned block within ``budget`` tokens (default ``pinned_budget_tokens``)."""
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
            budget=self.config.pinned_budget_tokens if budget is None else budget,
            estimate=self.config.token_estimator,
        )
        if goal_uris and goal is not None and goal.strip():
            block = replace(block, uris=block.uris + tuple(goal_uris))
        return block

    def page(self, goal: str | None, query: str, *, turn: str | None = None) -> Page:
        """The whole per-turn context. With ``turn``, what was injected is recorded for feedback."""
        cfg = self.config
        pinned = self.pinned_block(goal, budget=min(cfg.pinned_budget_tokens, cfg.page_budget_tokens))
        # the page as a whole has a budget too: each section gets what the ones before it leave
        left = cfg.page_budget_tokens - (pinned.tokens + 1 if pinned.text else 0)
        patterns_budget = max(0, min(cfg.patterns_budget_tokens, left))
        full, menu, avoid, pattern_tokens = self._procedures(goal, patterns_budget)
        procedure_uris = frozenset(p.uri for p in (*full, *menu, *avoid))
        room = left - pattern_tokens - FENCE_TOKENS
        retrieval_budget = max(0, min(cfg.retrieval_budget_tokens, room))
        snippets, cuts, sizes = self._retrieve(
            query, None, retrieval_budget, exclude=frozenset(pinned.uris), shown=procedure_uris
        )
        if turn is not None:
            turn = check_text(turn, 1_000, "turn")
            self.store.record_injections(
                self.actor, turn, [(p.uri, "pattern") for p in full] + [(p.uri, "anti_pattern") for p in avoid]
            )
        parts = self._salience_parts(snippets)
        report = PageReport(
            goal=goal,
            query=query,
            snippets=tuple(snippet_report(s, parts.get(s.uri)) for s in snippets),
            cuts=tuple(cuts) + tuple(Cut(u, "budget", "pinned budget reached") for u in pinned.omitted),
            sections={
                "pinned": SectionTotal(pinned.tokens, cfg.pinned_budget_tokens, len(pinned.uris)),
                "patterns": SectionTotal(pattern_tokens, patterns_budget, len(full) + len(menu) + len(avoid)),
                "retrieved": SectionTotal(sum(s.tokens for s in snippets), retrieval_budget, len(snippets)),
            },
            embedder=self.semantic.model,
            lane_sizes=sizes,
        )
        return Page(goal, query, pinned, tuple(full), tuple(snippets), report, tuple(menu), tuple(avoid))

    def _procedures(self, goal: str | None, budget: int) -> tuple[list[Pattern], list[Pattern], list[Pattern], int]:
        """Proven patterns in full, a one-line menu of the rest, what to avoid, and the tokens of
        all that as rendered (headers and line breaks included), never more than ``budget``."""
        if not goal:
            return [], [], [], 0
        estimate = self.config.token_estimator
        used = 0

        def fits(header: str, started: bool, text: str) -> bool:
            nonlocal used
            cost = estimate(text) + 1 + (0 if started else estimate(header) + 1)
            if used + cost > budget:
                return False
            used += cost
            return True

        full: list[Pattern] = []
        menu: list[Pattern] = []
        for pattern in self.procedural(goal):
            if len(full) < self.config.max_patterns_in_page and fits(PROVEN_HEADER, bool(full),
                                                                      render_pattern(pattern)):
                full.append(pattern)
            elif len(menu) < self.config.menu_max_patterns and fits(MENU_HEADER, bool(menu),
                                                                     neutralize(pattern.menu_line())):
                menu.append(pattern)
        avoid: list[Pattern] = []
        for pattern in self.anti_patterns(goal):
            if len(avoid) < self.config.menu_max_patterns and fits(AVOID_HEADER, bool(avoid),
                                                                    avoid_line(pattern)):
                avoid.append(pattern)
        return full, menu, avoid, used

    def _embedder(self) -> Embedder:
        return self.semantic.embedder

    # -- forgetting and stats ------------------------------------------------------------------
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
            "patterns_by_stage": self.pattern_stages(),
        }
