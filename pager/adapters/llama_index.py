"""LlamaIndex: a memory block for ``llama_index.core.memory.Memory`` that pages mempager in.

    import mempager
    from llama_index.core.memory import Memory
    from mempager.adapters.llama_index import MempagerMemoryBlock
    block = MempagerMemoryBlock(pager=mempager.open("agent.duckdb", actor="neo"))
    memory = Memory.from_defaults(session_id="chat-1", memory_blocks=[block])

On ``Memory.get()`` the block returns the page for the latest user message of the current messages
(pinned block, continuity, procedures, retrieved memories, each memory fenced as data), which
``Memory`` puts in the system message. What ``Memory`` flushes out of its short-term buffer is
handed to the block (``aput``) and written back as event memories of the pager's actor, so a
later page can recall it.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from typing import Any

from mempager.adapters import missing
from mempager.core import Pager
from mempager.errors import InvalidInput
from mempager.tokens import truncate_tokens
from mempager.types import Source

try:
    from llama_index.core.base.llms.types import ChatMessage
    from llama_index.core.bridge.pydantic import Field
    from llama_index.core.memory import BaseMemoryBlock
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing("llama-index-core", "llama-index", exc) from exc

BLOCK_TAG = "llama-index"
META_KEY = "llama_index"
MAX_MESSAGE_TOKENS = 2000  # one flushed message; a pasted log must not crowd every later page


class MempagerMemoryBlock(BaseMemoryBlock[str]):
    """Pages mempager into ``Memory`` and writes flushed messages back (one ``Pager``, one actor)."""

    name: str = Field(default="mempager", description="The name of the memory block.")
    description: str | None = Field(default="Memories paged in from mempager for the current messages.")
    pager: Pager = Field(description="The mempager.Pager to page from and write to.", exclude=True)
    goal: str | None = Field(default=None, description="The goal procedures are chosen for.")

    def __init__(self, **data: Any) -> None:
        # checked before pydantic runs: its validators would wrap our InvalidInput in a ValidationError
        if not isinstance(data.get("pager"), Pager):
            got = type(data.get("pager")).__name__
            raise InvalidInput(f"MempagerMemoryBlock needs pager=mempager.open(...), got {got}")
        super().__init__(**data)

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        query = _latest_user_text(messages or [])
        page = await asyncio.to_thread(self.pager.page, query, goal=self.goal)
        return page.render()

    async def _aput(self, messages: list[ChatMessage]) -> None:
        if not isinstance(messages, list) or not all(isinstance(m, ChatMessage) for m in messages):
            raise InvalidInput(f"a memory block is given a list of ChatMessage, got {messages!r:.200}")
        now = datetime.now(timezone.utc)
        items = [
            {
                "type": "event",
                "text": f"{_role(m)}: {truncate_tokens(text, MAX_MESSAGE_TOKENS)}",
                # a distinct time per message: the same words said twice stay two events
                "created_at": now + timedelta(microseconds=i),
                "source": Source.OBSERVED,
                "tags": [BLOCK_TAG],
                "metadata": {META_KEY: _meta(m)},
            }
            for i, m in enumerate(messages)
            for text in [_text(m)]
            if text  # a message with no words (a tool call's shell, an image) has nothing to recall
        ]
        if items:
            await asyncio.to_thread(self.pager.remember_many, items)


def _text(message: ChatMessage) -> str:
    # ``content`` joins the message's text blocks (images, audio and tool calls have no words here)
    content = message.content
    return content.strip() if isinstance(content, str) else ""


def _role(message: ChatMessage) -> str:
    role = getattr(message.role, "value", message.role)
    return str(role).capitalize()


def _meta(message: ChatMessage) -> dict[str, Any]:
    meta: dict[str, Any] = {"role": str(getattr(message.role, "value", message.role))}
    session = message.additional_kwargs.get("session_id")
    if isinstance(session, str):
        meta["session_id"] = session
    return meta


def _latest_user_text(messages: list[ChatMessage]) -> str | None:
    for message in reversed(messages):
        if _role(message) == "User":
            text = _text(message)
            if text:
                return text
    return None


__all__ = ["MempagerMemoryBlock"]
