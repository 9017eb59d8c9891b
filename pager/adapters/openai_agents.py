"""OpenAI Agents SDK: a ``Session`` kept in mempager, and instructions that page memory in each turn.

    import mempager
    from agents import Agent, Runner
    from mempager.adapters.openai_agents import MempagerSession, paged_instructions
    p = mempager.open("agent.duckdb", actor="neo")
    agent = Agent(name="Neo", instructions=paged_instructions(p, "You are Neo."))
    Runner.run_sync(agent, "Where is the deploy key?", session=MempagerSession("chat-1", p))

``MempagerSession`` implements the SDK's ``Session`` protocol (``get_items``, ``add_items``,
``pop_item``, ``clear_session``). Each conversation item is one event memory of the pager's actor:
the item itself (Responses-format JSON) in its metadata, its words as the memory's text, so the
lanes can page an old exchange back in later, in this session or any other of the same actor.
A session's items are tagged with a digest of its id; their order is a sequence number.

``paged_instructions`` is a dynamic ``instructions`` function: each turn it pages memory for the
user's latest message and appends the rendered page (memories fenced as data) to the base text.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable, Iterator, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from mempager.adapters import missing
from mempager.core import Pager
from mempager.errors import InvalidInput
from mempager.tokens import truncate_tokens
from mempager.types import Memory, Source
from mempager.validate import check_text
from mempager.writing.build import check_metadata

try:
    from agents.memory import SessionSettings
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing("openai-agents", "openai-agents", exc) from exc

SESSION_TAG = "openai-agents"
META_KEY = "openai_agents"
MAX_ITEM_TOKENS = 2000  # the searchable text of one item; the item itself is kept whole in metadata
_PAGE = 1_000


class MempagerSession:
    """The SDK's ``Session`` protocol over one mempager ``Pager`` (one actor, hard partition)."""

    session_settings: SessionSettings | None = None

    def __init__(self, session_id: str, pager: Pager, *, session_settings: SessionSettings | None = None) -> None:
        if not isinstance(pager, Pager):
            raise InvalidInput(
                f"MempagerSession needs a mempager.Pager (mempager.open(...)), got {type(pager).__name__}"
            )
        self.session_id = check_text(session_id, 1_000, "session_id")
        self.pager = pager
        self.session_settings = session_settings
        self._tag = f"oa-session:{hashlib.sha256(self.session_id.encode('utf-8')).hexdigest()[:24]}"
        self._lock = asyncio.Lock()  # one sequence number per item, even under concurrent add_items

    # -- the Session protocol ----------------------------------------------------------------------
    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The history, oldest first; with ``limit``, the latest ``limit`` items (still oldest first)."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise InvalidInput(f"limit must be None or an integer >= 0, got {limit!r}")
        rows = await asyncio.to_thread(self._rows)
        chosen = rows if limit is None else rows[len(rows) - limit :] if limit else []
        return [_item_of(m) for m in chosen]

    async def add_items(self, items: list[Any]) -> None:
        if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, list):
            raise InvalidInput(f"add_items takes a list of conversation items, got {type(items).__name__}")
        if not items:
            return
        async with self._lock:
            await asyncio.to_thread(self._add, items)

    async def pop_item(self) -> Any | None:
        async with self._lock:
            return await asyncio.to_thread(self._pop)

    async def clear_session(self) -> None:
        async with self._lock:
            await asyncio.to_thread(self._clear)

    # -- storage (worker threads: the pager is synchronous and thread-safe) -------------------------
    def _rows(self) -> list[Memory]:
        rows = [m for m in self._scan() if _seq(m) is not None and _session(m) == self.session_id]
        return sorted(rows, key=lambda m: _seq(m) or 0)

    def _scan(self) -> Iterator[Memory]:
        offset = 0
        while True:
            batch = self.pager.recall(types=["event"], tags=[self._tag], limit=_PAGE, offset=offset)
            yield from batch
            if len(batch) < _PAGE:
                return
            offset += _PAGE

    def _add(self, items: list[Any]) -> None:
        rows = self._rows()
        first = (_seq(rows[-1]) or 0) + 1 if rows else 1
        now = datetime.now(timezone.utc)
        batch = []
        for i, raw in enumerate(items):
            try:  # every item is checked before any is written: remember_many writes all or none
                item = check_metadata(_plain(raw))
            except InvalidInput as exc:
                raise type(exc)(f"conversation item {i}: {exc}") from exc
            meta = {META_KEY: {"session_id": self.session_id, "seq": first + i, "item": item}}
            batch.append(
                {
                    "type": "event",
                    "text": truncate_tokens(_words(item), MAX_ITEM_TOKENS) or "(empty item)",
                    # a distinct time per item: two identical messages stay two events, not one deduplicated
                    "created_at": now + timedelta(microseconds=i),
                    "source": Source.OBSERVED,
                    "tags": [SESSION_TAG, self._tag],
                    "metadata": meta,
                }
            )
        self.pager.remember_many(batch)

    def _pop(self) -> Any | None:
        rows = self._rows()
        if not rows:
            return None
        last = rows[-1]
        self.pager.forget(last.uri)
        return _item_of(last)

    def _clear(self) -> None:
        for memory in self._rows():
            self.pager.forget(memory.uri)


def paged_instructions(
    pager: Pager, base: str = "", *, goal: str | None = None
) -> Callable[[Any, Any], Awaitable[str]]:
    """A dynamic ``Agent(instructions=...)``: ``base`` plus this turn's page for the user's message.

    The page is made for the latest user message of the turn's input (``RunContextWrapper.turn_input``);
    a turn without one gets the page for ``goal`` alone (pinned block, continuity, procedures).
    """
    if not isinstance(pager, Pager):
        raise InvalidInput(f"paged_instructions needs a mempager.Pager, got {type(pager).__name__}")
    if not isinstance(base, str):
        raise InvalidInput(f"base instructions must be a str, got {type(base).__name__}")

    async def instructions(run_context: Any, agent: Any) -> str:
        query = _latest_user_text(getattr(run_context, "turn_input", None) or [])
        page = await asyncio.to_thread(pager.page, query, goal=goal)
        block = page.render()
        return "\n\n".join(part for part in (base, block) if part.strip())

    return instructions


# -- items ----------------------------------------------------------------------------------------
def _plain(item: Any) -> Any:
    """A conversation item as plain JSON data (the SDK hands dicts; a pydantic model is dumped)."""
    dump = getattr(item, "model_dump", None)
    if callable(dump) and not isinstance(item, Mapping):
        return dump(exclude_unset=True, mode="json")
    if not isinstance(item, Mapping):
        raise InvalidInput(f"a conversation item must be a dict in Responses format, got {type(item).__name__}")
    return item


def _item_of(memory: Memory) -> Any:
    return memory.metadata[META_KEY]["item"]


def _meta(memory: Memory) -> Mapping[str, Any] | None:
    meta = memory.metadata.get(META_KEY)
    return meta if isinstance(meta, Mapping) and "item" in meta else None


def _seq(memory: Memory) -> int | None:
    meta = _meta(memory)
    seq = None if meta is None else meta.get("seq")
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else None


def _session(memory: Memory) -> str | None:
    meta = _meta(memory)
    return None if meta is None else meta.get("session_id")


def _words(item: Mapping[str, Any]) -> str:
    """What the lanes search for an item: who said what, or which tool was called with what."""
    role, kind = item.get("role"), item.get("type")
    if role is not None:
        return f"{str(role).capitalize()}: {_content_text(item.get('content'))}"
    if kind == "function_call":
        return f"Tool call {item.get('name')}({item.get('arguments', '')})"
    if kind == "function_call_output":
        return f"Tool output: {_content_text(item.get('output'))}"
    return f"{kind or 'item'}: {json.dumps(item, ensure_ascii=False)}"


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [part.get("text") or part.get("refusal") for part in content if isinstance(part, Mapping)]
        return " ".join(p for p in parts if isinstance(p, str))
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def _latest_user_text(turn_input: list[Any]) -> str | None:
    for item in reversed(turn_input):
        if isinstance(item, str):
            return item
        if isinstance(item, Mapping) and item.get("role") == "user":
            text = _content_text(item.get("content")).strip()
            if text:
                return text
    return None


__all__ = ["MempagerSession", "paged_instructions"]
