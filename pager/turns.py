"""Per-turn memory for an agent loop: one call before the model runs, one after.

    memory = TurnMemory(p)                              # p = mempager.open(...)
    for user_message in conversation:
        ctx = memory.before_turn(goal, user_message)
        reply = llm(system=SYSTEM + "\\n\\n" + ctx.system_block, user=user_message)
        memory.after_turn(ctx.turn_id, user_message, reply, outcome="success")

``before_turn`` pages memory in for the user's message and records which procedures the page
injected; ``after_turn`` writes the exchange back as one event and, given an outcome, credits
(success) or blames (failure) exactly those procedures. ``AsyncTurnMemory`` is the
same over asyncio: each call runs in a worker thread, so the event loop never blocks.

Every ``identity_every_turns`` turns (5; 0: never) ``after_turn`` also starts a background
extraction of user and identity facts from those turns by the configured LLM (``llm=``, else
``MEMPAGER_LLM_URL``), written through the encoding gate (consolidation/identity.py); the turn
never waits for it. ``close()`` (or leaving a ``with`` block) cancels one still running; close the
turn memory before its pager (nested ``with`` blocks do), so no extraction reads a closing store.
A process that ends without either is covered too: the exit hook stops the extraction first.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from mempager.aio import AsyncPager
from mempager.core import Pager
from mempager.errors import ConfigError, InvalidInput, InvalidText
from mempager.paging.page import Page
from mempager.tokens import truncate_tokens
from mempager.types import Source
from mempager.validate import check_text
from mempager.writing.writeback import OUTCOMES

if TYPE_CHECKING:
    from mempager.consolidation.identity import BackgroundIdentity, TurnText

TURN_TAG = "turn"


@dataclass(frozen=True, slots=True)
class TurnContext:
    """What ``before_turn`` hands the loop: the block for the system prompt and the turn's id."""

    turn_id: str
    system_block: str
    page: Page  # the full page, with ``page.report`` saying what came in and why


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """What ``after_turn`` wrote: the event, the outcome memory (with a summary), patterns moved."""

    turn_id: str
    event_uri: str
    outcome_uri: str | None = None
    patterns_updated: int = 0
    identity_extraction: bool = False  # this turn started a background identity extraction


class TurnMemory:
    """Per-turn paging and write-back over one :class:`~pager.Pager`.

    ``max_turn_tokens`` caps the stored exchange (half for each side; a cut is marked and never
    splits an id, hash or path) so one huge tool dump cannot crowd every later page.
    ``llm`` is the identity extraction's LLM (an ``LLM`` or a callable; None: ``MEMPAGER_LLM_URL``).
    """

    def __init__(self, pager: Pager, *, max_turn_tokens: int = 2000, llm: object = None) -> None:
        if isinstance(max_turn_tokens, bool) or not isinstance(max_turn_tokens, int) or max_turn_tokens < 16:
            raise ConfigError(f"max_turn_tokens must be an integer >= 16, got {max_turn_tokens!r}")
        self.pager = pager
        self.max_turn_tokens = max_turn_tokens
        self.every = pager.config.identity_every_turns
        self.turns_done = 0
        self._window: deque[TurnText] = deque(maxlen=max(1, self.every))  # the turns the next extraction reads
        self.identity: BackgroundIdentity | None = _identity(pager, llm) if self.every else None

    def __enter__(self) -> TurnMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Cancel a background identity extraction still running (nothing more is written); the
        pager stays open. Idempotent."""
        if self.identity is not None:
            self.identity.close()

    def before_turn(self, goal: str | None, user_message: str, turn_id: str | None = None) -> TurnContext:
        """Page memory in for ``user_message``; the returned ``system_block`` goes in the system prompt.

        ``turn_id`` defaults to a fresh unique id; pass your own to tie feedback to your logs.
        """
        turn = turn_id if turn_id is not None else f"turn-{uuid.uuid4().hex[:16]}"
        page = self.pager.page(user_message, goal=goal, turn=turn)
        return TurnContext(turn_id=turn, system_block=page.render(), page=page)

    def after_turn(
        self,
        turn_id: str,
        user_message: str,
        assistant_reply: str,
        outcome: str | None = None,
        *,
        summary: str | None = None,
        used: Sequence[str] | None = None,
    ) -> TurnRecord:
        """Write the exchange back as one event; an ``outcome`` becomes feedback.

        ``used`` (labels or uris of the page's procedures the agent followed) narrows the
        feedback to those, as in ``Pager.feedback``.

        ``outcome`` is success, failure, partial or unknown. It is noted on the event, and
        success or failure moves the confidence of exactly the patterns ``before_turn`` injected
        for ``turn_id`` (once per turn). With ``summary`` (one line: what was attempted), the
        outcome is also stored as an outcome memory linked to the event.
        """
        turn_id = check_text(turn_id, 1_000, "turn_id")
        if outcome is not None and outcome not in OUTCOMES:  # checked before anything is written
            raise InvalidInput(f"outcome must be one of {', '.join(OUTCOMES)} or None, got {outcome!r}")
        if summary is not None:
            if outcome is None:
                raise InvalidInput("a summary describes an outcome; pass outcome= too")
            summary = check_text(summary, self.pager.config.max_text_bytes, "summary")
        half = self.max_turn_tokens // 2
        text = (
            f"User: {_side(user_message, 'user_message', half)}\n"
            f"Assistant: {_side(assistant_reply, 'assistant_reply', half)}"
            + (f"\nOutcome: {outcome}" if outcome else "")
        )
        # feedback before the event: it refuses a second, different verdict for a turn, and a
        # refusal must leave nothing written; a retry after a failed write is a no-op here
        updated = self.pager.feedback(turn_id, outcome, used=used) if outcome in ("success", "failure") else 0
        # an explicit time keeps two identical exchanges as two events instead of one deduplicated
        event_uri = self.pager.remember(
            "event",
            text,
            source=Source.OBSERVED,
            tags=[TURN_TAG],
            metadata={"turn": turn_id, "outcome": outcome},
            created_at=datetime.now(timezone.utc),
        )
        outcome_uri = None
        if summary is not None and outcome is not None:  # (outcome is set whenever summary is)
            # turn=None: this turn's feedback was given above, exactly once
            outcome_uri = self.pager.record_outcome(
                summary, outcome, event_uri, source=Source.OBSERVED, metadata={"turn_id": turn_id}
            )
        return TurnRecord(turn_id, event_uri, outcome_uri, updated, self._count_turn(turn_id, event_uri, text))

    def _count_turn(self, turn_id: str, event_uri: str, text: str) -> bool:
        """Counts a stored turn; every ``every``-th starts the identity extraction (never waited for)."""
        self.turns_done += 1
        if self.identity is None:
            return False
        from mempager.consolidation.identity import TurnText

        self._window.append(TurnText(event_uri, turn_id, text))
        if self.turns_done % self.every:
            return False
        return self.identity.submit(list(self._window)) is None


def _side(text: object, what: str, max_tokens: int) -> str:
    if not isinstance(text, str):
        raise InvalidText(f"{what} must be a str, got {type(text).__name__}")
    # a turn with no words on one side (a tool-only reply) is still a turn worth keeping
    return truncate_tokens(text.strip(), max_tokens) or "(nothing)"


def _identity(pager: Pager, llm: object) -> BackgroundIdentity:
    """The background identity extraction over ``pager``, stopped at exit before the pager closes."""
    from mempager.consolidation import identity  # lazily: pydantic stays out of `import mempager`
    from mempager.consolidation.steps import llm_provider
    from mempager.shutdown import track

    extractor = identity.IdentityExtractor(
        pager.config,
        remember=pager.writer.remember_many,
        known=lambda: identity.known_in(pager.store, pager.actor),
        llm=llm_provider(llm, pager.config),
    )
    runner = identity.BackgroundIdentity(pager, extractor, pager.config)
    track(runner)  # tracked after its pager: the exit hook stops it first (newest first)
    return runner


class AsyncTurnMemory:
    """:class:`TurnMemory` for asyncio loops; same arguments, awaitable, never blocks the loop."""

    def __init__(self, pager: AsyncPager | Pager, *, max_turn_tokens: int = 2000, llm: object = None) -> None:
        sync = pager.sync_pager if isinstance(pager, AsyncPager) else pager
        self.turns = TurnMemory(sync, max_turn_tokens=max_turn_tokens, llm=llm)

    async def close(self) -> None:
        await asyncio.to_thread(self.turns.close)

    async def before_turn(self, goal: str | None, user_message: str, turn_id: str | None = None) -> TurnContext:
        return await asyncio.to_thread(self.turns.before_turn, goal, user_message, turn_id)

    async def after_turn(
        self,
        turn_id: str,
        user_message: str,
        assistant_reply: str,
        outcome: str | None = None,
        *,
        summary: str | None = None,
        used: Sequence[str] | None = None,
    ) -> TurnRecord:
        return await asyncio.to_thread(
            functools.partial(
                self.turns.after_turn, turn_id, user_message, assistant_reply, outcome, summary=summary, used=used
            )
        )
