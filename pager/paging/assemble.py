"""Assembling one turn's page: the pinned block, proven procedures, then retrieved memories.

Each section gets the budget the ones before it leave; what did not fit is named in the report.
With the tiers (paging/tiers.py): the crystal menu is pinned after the continuity (whose
crystallized pattern lines it replaces); the spores the turn cues come after the procedures; the
crystals the turn cues after those, from a share reserved before retrieval (only when the actor
has crystals), because an evidence edge to a retrieved memory is one of their cues.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from mempager.config import PagerConfig
from mempager.consolidation.crystal import matched_labels
from mempager.errors import InvalidInput
from mempager.lanes.filters import ANYTHING, Where
from mempager.lanes.fusion import Cut, is_current
from mempager.lanes.lines import neutral
from mempager.lanes.retrieval import Retriever
from mempager.paging.continuity import render_continuity
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
from mempager.paging.pinned import PinnedBlock, build_pinned, hard_constraints, select_profile
from mempager.paging.tier_sections import (
    EMPTY,
    MAX_CRYSTALS,
    Section,
    crystal_bodies,
    crystal_menu,
    spore_lines,
    without_crystallized,
)
from mempager.patterns import Pattern
from mempager.procedural.procedures import Procedures
from mempager.protocols import Store

if TYPE_CHECKING:
    from mempager.paging.tiers import Tiers
from mempager.types import MemoryType
from mempager.validate import check_text, normalize


class PageAssembler:
    def __init__(
        self,
        store: Store,
        actor: str,
        config: PagerConfig,
        *,
        retriever: Retriever,
        procedures: Procedures,
        tiers: Tiers | None = None,
    ) -> None:
        self.store = store
        self.actor = actor
        self.config = config
        self.retriever = retriever
        self.procedures = procedures
        self.tiers = tiers

    def pinned_block(
        self, goal: str | None = None, *, budget: int | None = None, total: int | None = None
    ) -> PinnedBlock:
        """The pinned block within ``budget`` tokens (default ``pinned_budget_tokens``), then the
        continuity within ``continuity_budget_tokens`` (and what ``total`` leaves of the two)."""
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
        return self._with_continuity(block, total)

    def _with_continuity(self, block: PinnedBlock, total: int | None) -> PinnedBlock:
        found = self.store.consolidation.continuity(self.actor, 1)
        crystals = self.tiers.crystals.all() if self.tiers is not None else []
        block = replace(block, has_crystals=bool(crystals))
        room = self.config.continuity_budget_tokens
        if total is not None:
            room = min(room, total - block.tokens - 1)
        text = without_crystallized(found[0].text, {c.key for c in crystals}) if found else ""
        shown = render_continuity(text, room, self.config.token_estimator) if text and room > 0 else ""
        estimate = self.config.token_estimator
        if shown:
            text = f"{block.text}\n{shown}" if block.text else shown
            block = replace(block, text=text, tokens=estimate(text), continuity_tokens=estimate(text) - block.tokens)
        room = self.config.crystal_menu_budget_tokens
        if total is not None:
            room = min(room, total - block.tokens - 1)
        menu = crystal_menu(crystals, room, estimate)
        if not menu.text:
            return block
        text = f"{block.text}\n{menu.text}" if block.text else menu.text
        return replace(block, text=text, tokens=estimate(text), crystal_menu_tokens=estimate(text) - block.tokens)

    def page(self, goal: str | None, query: str, *, turn: str | None = None, where: Where = ANYTHING) -> Page:
        """The whole per-turn context. With ``turn``, what was injected is recorded for feedback;
        ``where`` filters the retrieved section by tags and metadata (pinned material always shows)."""
        cfg = self.config
        pinned = self.pinned_block(
            goal, budget=min(cfg.pinned_budget_tokens, cfg.page_budget_tokens), total=cfg.page_budget_tokens
        )
        # the page as a whole has a budget too: each section gets what the ones before it leave
        left = cfg.page_budget_tokens - (pinned.tokens + 1 if pinned.text else 0)
        patterns_budget = max(0, min(cfg.patterns_budget_tokens, left))
        full, menu, avoid, pattern_tokens = self._procedures(goal, patterns_budget)
        procedure_uris = frozenset(p.uri for p in (*full, *menu, *avoid))
        left -= pattern_tokens
        spores = self._spores(query, goal, max(0, min(cfg.spore_budget_tokens, left)))
        left -= (spores.tokens + 1) if spores.text else 0
        has_crystals = pinned.has_crystals
        reserve = max(0, min(cfg.crystal_budget_tokens, left)) if has_crystals else 0
        retrieval_budget = max(0, min(cfg.retrieval_budget_tokens, left - reserve - FENCE_TOKENS))
        snippets, cuts, sizes = self.retriever.retrieve_with_cuts(
            query, None, retrieval_budget, exclude=frozenset(pinned.uris), shown=procedure_uris, where=where
        )
        crystals = self._crystals(query, matched_labels(snippets), reserve) if reserve else EMPTY
        if turn is not None:
            turn = check_text(turn, 1_000, "turn")
            self.store.record_injections(
                self.actor, turn, [(p.uri, "pattern") for p in full] + [(p.uri, "anti_pattern") for p in avoid]
            )
        parts = self.retriever.salience_parts(snippets)
        report = PageReport(
            goal=goal,
            query=query,
            snippets=tuple(snippet_report(s, parts.get(s.uri)) for s in snippets),
            cuts=tuple(cuts) + tuple(Cut(u, "budget", "pinned budget reached") for u in pinned.omitted),
            sections={
                "pinned": SectionTotal(
                    pinned.tokens - pinned.continuity_tokens - pinned.crystal_menu_tokens,
                    cfg.pinned_budget_tokens,
                    len(pinned.uris),
                ),
                **self._continuity_total(pinned),
                "patterns": SectionTotal(pattern_tokens, patterns_budget, len(full) + len(menu) + len(avoid)),
                **_tier_totals(pinned, spores, crystals, cfg),
                "retrieved": SectionTotal(sum(s.tokens for s in snippets), retrieval_budget, len(snippets)),
            },
            embedder=self.retriever.semantic.model,
            lane_sizes=sizes,
        )
        return Page(
            goal, query, pinned, tuple(full), tuple(snippets), report, tuple(menu), tuple(avoid), spores, crystals
        )

    def _spores(self, query: str, goal: str | None, budget: int) -> Section:
        if self.tiers is None or budget <= 0:
            return EMPTY
        return spore_lines(self.tiers.spores.for_turn((query, goal)), budget, self.config.token_estimator)

    def _crystals(self, query: str, matched: list[int], budget: int) -> Section:
        assert self.tiers is not None
        hits = self.tiers.crystals.recall(query, k=MAX_CRYSTALS, matched=matched)
        return crystal_bodies(hits, budget, self.config.token_estimator)

    def _continuity_total(self, pinned: PinnedBlock) -> dict[str, SectionTotal]:
        """The continuity's line in the report, when one is pinned."""
        if not pinned.continuity_tokens:
            return {}
        return {"continuity": SectionTotal(pinned.continuity_tokens, self.config.continuity_budget_tokens, 1)}

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
        for pattern in self.procedures.procedural(goal):
            if len(full) < self.config.max_patterns_in_page and fits(
                PROVEN_HEADER, bool(full), render_pattern(pattern)
            ):
                full.append(pattern)
            elif len(menu) < self.config.menu_max_patterns and fits(
                MENU_HEADER, bool(menu), neutral(pattern.menu_line())
            ):
                menu.append(pattern)
        avoid: list[Pattern] = []
        for pattern in self.procedures.anti_patterns(goal):
            if len(avoid) < self.config.menu_max_patterns and fits(AVOID_HEADER, bool(avoid), avoid_line(pattern)):
                avoid.append(pattern)
        return full, menu, avoid, used


def _tier_totals(pinned: PinnedBlock, spores: Section, crystals: Section, cfg: PagerConfig) -> dict[str, SectionTotal]:
    """The report's lines for the crystal menu, the cued spores and crystals, when shown."""
    out = {}
    if pinned.crystal_menu_tokens:
        out["crystal_menu"] = SectionTotal(pinned.crystal_menu_tokens, cfg.crystal_menu_budget_tokens, 1)
    if spores.text:
        out["spores"] = SectionTotal(spores.tokens, cfg.spore_budget_tokens, len(spores.shown))
    if crystals.text:
        out["crystals"] = SectionTotal(crystals.tokens, cfg.crystal_budget_tokens, len(crystals.shown))
    return out


def page_arguments(query: str | None, old_query: str | None, goal: str | None) -> tuple[str, str | None]:
    """``(query, goal)`` from ``page(query, goal=...)`` or the deprecated ``page(goal, query)``."""
    if old_query is not None:
        if goal is not None:
            raise InvalidInput("page takes page(query, goal=...); pass the goal once, by keyword")
        warnings.warn("page(goal, query) is deprecated: call page(query, goal=goal)", DeprecationWarning, stacklevel=3)
        goal, query = query, old_query
    if query is None:
        raise InvalidInput("page needs a query: page(query, goal=..., turn=...)")
    return query, goal
