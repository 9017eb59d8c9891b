"""An asyncio facade: every call runs in a worker thread, so the event loop never blocks.

    async with await AsyncPager.open("agent.duckdb", actor="neo") as p:
        uri = await p.remember_fact("...")
        page = await p.page(query, goal=goal)

The store serialises writes; reads from many tasks run concurrently in threads.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mempager.config import PagerConfig
from mempager.consolidation.report import SaveResult, Wrap
from mempager.core import Pager
from mempager.paging.assemble import page_arguments
from mempager.paging.page import Page
from mempager.patterns import Pattern, PatternSpec
from mempager.protocols import Embedder
from mempager.types import Memory, Snippet


class AsyncPager:
    def __init__(self, pager: Pager) -> None:
        self.sync_pager = pager

    @classmethod
    async def open(
        cls,
        path: str | Path,
        actor: str,
        *,
        config: PagerConfig | None = None,
        embedder: Embedder | None = None,
    ) -> AsyncPager:
        from mempager.api import open as open_sync

        pager = await asyncio.to_thread(open_sync, path, actor, config=config, embedder=embedder)
        return cls(pager)

    async def __aenter__(self) -> AsyncPager:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await asyncio.to_thread(self.sync_pager.close)

    # writes
    async def remember(self, type: str, text: str, **fields: Any) -> str:
        return await asyncio.to_thread(self.sync_pager.remember, type, text, **fields)

    async def remember_fact(self, text: str, **fields: Any) -> str:
        return await asyncio.to_thread(self.sync_pager.remember_fact, text, **fields)

    async def remember_user_fact(self, text: str, **fields: Any) -> str:
        return await asyncio.to_thread(self.sync_pager.remember_user_fact, text, **fields)

    async def remember_many(self, items: Sequence[Mapping[str, Any]]) -> list[str]:
        return await asyncio.to_thread(self.sync_pager.remember_many, items)

    async def record_outcome(self, summary: str, outcome: str, intent_ref: str | None = None, **fields: Any) -> str:
        return await asyncio.to_thread(self.sync_pager.record_outcome, summary, outcome, intent_ref, **fields)

    async def write_pattern(
        self, spec: PatternSpec, strength: float = 0.5, coverage: int = 1, derived_from: Sequence[str] = ()
    ) -> str:
        return await asyncio.to_thread(self.sync_pager.write_pattern, spec, strength, coverage, derived_from)

    async def reinforce_pattern(self, spec: PatternSpec, derived_from: Sequence[str] = ()) -> str:
        return await asyncio.to_thread(self.sync_pager.reinforce_pattern, spec, derived_from)

    async def set_identity(self, text: str) -> str:
        return await asyncio.to_thread(self.sync_pager.set_identity, text)

    async def add_rule(self, text: str) -> str:
        return await asyncio.to_thread(self.sync_pager.add_rule, text)

    async def add_constraint(self, text: str, strength: str = "hard") -> str:
        return await asyncio.to_thread(self.sync_pager.add_constraint, text, strength)

    async def set_goal(self, text: str) -> str:
        return await asyncio.to_thread(self.sync_pager.set_goal, text)

    async def forget(self, uri: str, *, hard: bool = True, wait: bool = False) -> int:
        """``Pager.forget`` by uri: out of every lane at once; bytes erased by the background pass
        (or before returning with ``wait=True``)."""
        return await asyncio.to_thread(functools.partial(self.sync_pager.forget, uri, hard=hard, wait=wait))

    async def erase_now(self) -> None:
        await asyncio.to_thread(self.sync_pager.erase_now)

    # reads
    async def pinned(self, goal: str | None = None) -> str:
        return await asyncio.to_thread(self.sync_pager.pinned, goal)

    async def retrieve(self, query: str, k: int | None = None, *, budget: int | None = None) -> list[Snippet]:
        return await asyncio.to_thread(self.sync_pager.retrieve, query, k, budget=budget)

    async def page(
        self,
        query: str | None = None,
        _old_query: str | None = None,
        *,
        goal: str | None = None,
        turn: str | None = None,
        tags: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Page:
        """``Pager.page``: ``page(query, goal=..., turn=...)`` (the old ``page(goal, query)`` warns)."""
        query, goal = page_arguments(query, _old_query, goal)
        call = functools.partial(self.sync_pager.page, query, goal=goal, turn=turn, tags=tags, metadata=metadata)
        return await asyncio.to_thread(call)

    async def feedback(self, turn: str, outcome: str, *, used: Sequence[str] | None = None) -> int:
        return await asyncio.to_thread(functools.partial(self.sync_pager.feedback, turn, outcome, used=used))

    async def update(self, uri: str, **changes: Any) -> Memory:
        return await asyncio.to_thread(self.sync_pager.update, uri, **changes)

    async def procedural(self, goal: str) -> list[Pattern]:
        return await asyncio.to_thread(self.sync_pager.procedural, goal)

    async def recall_pattern(self, label: str) -> Pattern:
        return await asyncio.to_thread(self.sync_pager.recall_pattern, label)

    async def recall(self, query: str | None = None, **filters: Any) -> list[Memory]:
        return await asyncio.to_thread(self.sync_pager.recall, query, **filters)

    async def sync(self, timeout: float | None = None) -> bool:
        return await asyncio.to_thread(self.sync_pager.sync, timeout)

    async def stats(self) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync_pager.stats)

    # consolidation: session wraps and the continuity
    async def prepare_wrap(self, *, session_id: str | None = None) -> Wrap:
        return await asyncio.to_thread(functools.partial(self.sync_pager.prepare_wrap, session_id=session_id))

    async def save_continuity(
        self, text: str, *, affect: object = None, allow_shrink: object = False, session_id: str | None = None
    ) -> SaveResult:
        call = functools.partial(
            self.sync_pager.save_continuity, text, affect=affect, allow_shrink=allow_shrink, session_id=session_id
        )
        return await asyncio.to_thread(call)

    async def continuity(self) -> str:
        return await asyncio.to_thread(self.sync_pager.continuity)
