"""Identity extraction (seed 000): every few turns the LLM reads them and proposes durable facts
about the user: who they are (``identity``), facts about them (``profile``), how they like things
(``preference``).

It runs in the background of ``TurnMemory`` (turns.py) and never blocks a turn: at most one
extraction is in flight per pager (a turn that would start a second one skips it, logged), the
LLM is resolved first (none configured: skipped, logged), and the reply is validated with pydantic
before anything is written. Every failure (timeout, HTTP error, malformed or invalid reply, a
reply later than ``identity_timeout_seconds``) skips the extraction with a logged reason and
changes nothing. Facts are written with ``source="consolidation"`` through the encoding gate
(writing/gate.py): ``copilot`` queues them for review, ``off`` drops them, and an identity always
waits for a human accept, in every mode (issue 21 item 9). Each carries the provenance of the
turns it was read from (``metadata.derived_from``: the turns' event uris). A fact the store already
holds, or that a review item already proposed (pending, accepted or rejected), is not proposed again.

``stop`` (``TurnMemory.close``, or the exit hook of pager/shutdown.py, which stops it before the
pagers close) cancels cleanly: after it returns nothing more is written, and a write under way
has finished. It does not wait for an LLM that is still answering: that reply is dropped.

This extraction does not take the store-wide consolidation lock: it only adds memories through the
gate (it rewrites none), so it cannot conflict with a merge, and a merge must not be skipped
because a turn happened.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mempager.config import PagerConfig
from mempager.consolidation.steps import OFF, LLMProvider, RememberMany, line
from mempager.errors import InvalidInput, LLMError, LLMReplyInvalid, PagerError
from mempager.llm.base import ask
from mempager.protocols import Store
from mempager.shutdown import closing
from mempager.types import MemoryType, Source
from mempager.validate import content_hash, normalize

log = logging.getLogger("mempager.consolidation")
KINDS = {"identity": MemoryType.IDENTITY, "profile": MemoryType.PROFILE, "preference": MemoryType.PREFERENCE}
CONFIDENCE = {"high": 0.9, "medium": 0.6, "low": 0.3}  # the gate's copilot threshold is 0.7 by default
MAX_FACTS = 20  # per extraction: a reply listing more is not about one user's last few turns
STOP_JOIN_SECONDS = 0.5  # stop() waits this long for the thread; past it, the thread writes nothing anyway
IN_FLIGHT = "an identity extraction is still running for this pager"
SYSTEM = (
    "You read the latest turns of a conversation between a user and an assistant, one per block. Extract "
    "only durable facts about the user that the user stated or clearly showed: `identity` (who they are: "
    "name, role, what they work on), `profile` (a fact about them), `preference` (how they like things "
    "done). One short self-contained sentence each, naming the user as 'The user'. Give each a confidence "
    "(high, medium, low). Nothing about the assistant, nothing passing or hypothetical; an empty list is a "
    "fine answer."
)


class ExtractedFact(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["identity", "profile", "preference"]
    text: str = Field(min_length=1, max_length=500)
    confidence: Literal["high", "medium", "low"] = "medium"


class ExtractedFacts(BaseModel):
    model_config = ConfigDict(extra="forbid")
    facts: list[ExtractedFact] = Field(default=[], max_length=MAX_FACTS)


@dataclass(frozen=True, slots=True)
class TurnText:
    """One turn as stored: its event's uri (the provenance), the turn id, the text the LLM reads."""

    uri: str
    turn_id: str
    text: str


@dataclass(frozen=True, slots=True)
class IdentityResult:
    skipped: str | None  # why nothing was written (no LLM, failure, timeout, cancelled, mode off); None: it ran
    read: tuple[str, ...] = ()  # the event uris of the turns read
    stored: tuple[str, ...] = ()  # mem:// uris written
    queued: tuple[str, ...] = ()  # review:// uris waiting for a human

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


Known = Callable[[MemoryType, str], bool]


def known_in(store: Store, actor: str) -> Known:
    """Whether the store holds this fact live, or a review item ever proposed it (read once)."""
    proposed = set()
    for item in store.review_list(actor, None):
        text = item.payload.get("text")
        proposed.add(content_hash(text.strip()) if isinstance(text, str) else item.payload.get("content_hash"))

    def known(mtype: MemoryType, text: str) -> bool:
        if content_hash(text.strip()) in proposed:
            return True
        found = store.find(actor, mtype, content_hash(normalize(text)))
        return found is not None and found.superseded_by is None

    return known


class IdentityExtractor:
    """One extraction, in two halves: ``ask`` (the LLM and the validation; touches no store) and ``store``."""

    def __init__(
        self, config: PagerConfig, *, remember: RememberMany, known: Callable[[], Known], llm: LLMProvider
    ) -> None:
        self.config = config
        self.remember = remember
        self.known = known
        self.llm = llm

    def ask(self, turns: Sequence[TurnText]) -> list[dict[str, Any]]:
        """The facts proposed, as ``remember_many`` items; ``LLMError`` on any failure."""
        listing = "\n\n".join(f"[turn {t.turn_id}]\n{line(t.text, 2000)}" for t in turns)
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": listing}]
        found = ask(self.llm(), messages, ExtractedFacts)
        provenance = {"derived_from": [t.uri for t in turns], "turns": [t.turn_id for t in turns]}
        items, seen = [], set()
        for fact in found.facts:
            mtype, text = KINDS[fact.kind], fact.text.strip()
            if not text or (mtype, normalize(text)) in seen:
                continue
            seen.add((mtype, normalize(text)))
            items.append(
                {
                    "type": mtype.value,
                    "text": text,
                    "source": Source.CONSOLIDATION.value,
                    "confidence": CONFIDENCE[fact.confidence],
                    "tags": ["extracted"],
                    "metadata": {**provenance, "extracted": fact.kind},
                }
            )
        return items

    def store(self, items: Sequence[dict[str, Any]]) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The facts not known yet, written through the encoding gate: (stored mem:// uris, queued review:// uris)."""
        known = self.known()
        items = [i for i in items if not known(MemoryType(i["type"]), i["text"])]
        try:  # every item is validated before any is stored: a bad one leaves nothing written
            uris = self.remember(items) if items else []
        except InvalidInput as exc:
            raise LLMReplyInvalid(f"the extracted facts cannot be stored: {exc}") from exc
        return (
            tuple(u for u in uris if u.startswith("mem://")),
            tuple(u for u in uris if u.startswith("review://")),
        )


# pager -> the thread of its extraction in flight (one per pager, whichever TurnMemory started it);
# weak, so a pager dropped without close() is not kept alive by this table
_flights: weakref.WeakKeyDictionary[object, threading.Thread] = weakref.WeakKeyDictionary()
_flights_lock = threading.Lock()


class BackgroundIdentity:
    """Runs ``IdentityExtractor`` in a daemon thread, at most one per ``pager`` at a time.

    It has ``workers.stop`` and ``close``, as a pager does, so pager/shutdown.py can track it and
    stop it at exit before the pagers close (it is tracked after its pager: newest first).
    """

    def __init__(
        self,
        pager: object,
        extractor: IdentityExtractor,
        config: PagerConfig,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._pager = weakref.ref(pager)
        self.extractor = extractor
        self.config = config
        self._monotonic = monotonic
        self._writing = threading.Lock()  # held across a write; stop() takes it to know none is under way
        self._cancelled = False
        self._thread: threading.Thread | None = None
        self.last: IdentityResult | None = None  # the last extraction's result, once it ended
        self.started = 0  # extractions started (tests and ``stats`` read it)

    @property
    def workers(self) -> BackgroundIdentity:
        return self

    def submit(self, turns: Sequence[TurnText]) -> str | None:
        """Start an extraction over ``turns``; None when started, else why it was skipped (logged)."""
        reason = self._refusal()
        if reason is None:
            try:  # resolved here, cheaply (no request): "no LLM configured" is a skip without a thread
                self.extractor.llm()
            except LLMError as exc:
                reason = f"{type(exc).__name__}: {exc}"
        if reason is None:
            reason = self._start(tuple(turns))
        if reason is not None:
            log.info("identity extraction skipped: %s", reason)
            self.last = IdentityResult(reason, tuple(t.uri for t in turns))
        return reason

    def _refusal(self) -> str | None:
        if self._cancelled:
            return "this turn memory is closed"
        if self.config.memory_mode == "off":
            return OFF
        return None

    def _start(self, turns: tuple[TurnText, ...]) -> str | None:
        pager = self._pager()
        if pager is None:
            return "the pager is gone"
        deadline = self._monotonic() + self.config.identity_timeout_seconds
        with _flights_lock:
            running = _flights.get(pager)
            if running is not None and running.is_alive():
                return IN_FLIGHT
            thread = threading.Thread(
                target=self._run, args=(pager, turns, deadline), name="mempager-identity", daemon=True
            )
            _flights[pager] = thread
            self._thread = thread
            self.started += 1
            thread.start()
        return None

    def _run(self, pager: object, turns: tuple[TurnText, ...], deadline: float) -> None:
        read = tuple(t.uri for t in turns)
        result = IdentityResult("ended before it could finish", read)
        try:
            result = self._extract(turns, deadline, read)
        finally:
            with _flights_lock:
                if _flights.get(pager) is threading.current_thread():
                    del _flights[pager]
            self.last = result
            if result.skipped is not None:
                log.warning("identity extraction skipped, nothing changed: %s", result.skipped)
            else:
                log.info("identity extraction: %d stored, %d queued for review", len(result.stored), len(result.queued))

    def _extract(self, turns: tuple[TurnText, ...], deadline: float, read: tuple[str, ...]) -> IdentityResult:
        try:
            items = self.extractor.ask(turns)  # the LLM: no store access, and no lock held while it answers
            with self._writing:  # every store access (reads included) is in here, after the checks
                if self._cancelled:
                    return IdentityResult("this turn memory closed while the LLM answered; its reply is dropped", read)
                if self._monotonic() > deadline:
                    return IdentityResult(
                        f"the reply came after identity_timeout_seconds ({self.config.identity_timeout_seconds:g}s)",
                        read,
                    )
                stored, queued = self.extractor.store(items)
        except LLMError as exc:
            return IdentityResult(f"{type(exc).__name__}: {exc}", read)
        except PagerError as exc:  # the store closed or refused the write: the turn loop must not hear of it
            return IdentityResult(f"the facts could not be written ({type(exc).__name__}: {exc})", read)
        return IdentityResult(None, read, stored, queued)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the extraction in flight (if any); whether none is running now."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return thread is None or not thread.is_alive()

    def stop(self, timeout: float = STOP_JOIN_SECONDS) -> None:
        """Cancel: no write after this returns (one under way has finished); waits ``timeout`` at
        most for the thread, which, if still waiting for the LLM, ends by itself writing nothing."""
        self._cancelled = True
        with self._writing:  # a write under way finishes first; any later one sees the flag
            pass
        thread = self._thread
        if thread is not None:
            thread.join(max(0.0, min(timeout, STOP_JOIN_SECONDS)))

    def close(self) -> None:
        with closing(self):  # no longer stopped at exit
            self.stop()
