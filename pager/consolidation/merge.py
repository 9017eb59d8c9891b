"""Merge (seed 000 "compaction"): the LLM proposes duplicates, restatements to merge and superseded
entries in a type/scope that holds more than ``merge_threshold`` memories.

Nothing is ever deleted: an original is superseded (``superseded_by`` names the memory that
replaces it, which takes it out of every page) and stays in the store, audited (``supersede``),
recallable and forgettable like any memory. A merged memory has ``source="consolidation"`` and
``metadata.derived_from`` (the originals' uris). Identity, rules, constraints, goals and patterns
are never offered: they are the user's own words or have their own lifecycle (issue 21 item 9).
In ``copilot`` mode each proposal waits in the review queue (kind ``merge``) for a human accept;
in ``off`` mode nothing is proposed. A reply that names an unknown id, or one id in two proposals,
is invalid as a whole: the step is skipped and the store unchanged.

Each change (a merge group) is one transaction on the store (``ConsolidationStore.apply_merge``):
the merged memory, the supersession of every original and, for an accepted review item, its
closing are written together or not at all. A group whose originals were forgotten or superseded
while the LLM was thinking is skipped (``MergeGroup.skipped``); the other groups still apply.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mempager.config import PagerConfig
from mempager.consolidation.steps import OFF, LLMProvider, StepLock, line, mode_off, run_step
from mempager.errors import InvalidInput, LLMReplyInvalid, MemoryNotFound
from mempager.llm.base import ask
from mempager.protocols import Store
from mempager.types import Memory, MemoryType, NewMemory, PutResult, Scope, Source

log = logging.getLogger("mempager.consolidation")
MERGEABLE = (
    MemoryType.FACT,
    MemoryType.PREFERENCE,
    MemoryType.BELIEF,
    MemoryType.PROFILE,
    MemoryType.EVENT,
    MemoryType.OUTCOME,
)
Kind = Literal["merge", "duplicate", "superseded"]
SYSTEM = (
    "You keep an agent's long-term memory healthy. Below are memories of one type, one per line as "
    "[id] text. Propose only what is clearly warranted: `duplicates` (same meaning: keep one id, drop "
    "the others), `merges` (restatements of one thing: two or more ids and one statement that keeps every "
    "detail of them), `superseded` (an older entry made wrong by a newer one: id and the id that replaces "
    "it). Use each id at most once across the answer. Empty lists are a fine answer."
)


class MergeItem(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ids: list[str] = Field(min_length=2)
    text: str = Field(min_length=1)
    reason: str = ""


class DuplicateItem(BaseModel):
    model_config = ConfigDict(extra="forbid")
    keep: str
    drop: list[str] = Field(min_length=1)


class SupersededItem(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    by: str
    reason: str = ""


class MergeProposal(BaseModel):
    model_config = ConfigDict(extra="forbid")
    merges: list[MergeItem] = []
    duplicates: list[DuplicateItem] = []
    superseded: list[SupersededItem] = []


@dataclass(frozen=True, slots=True)
class MergeGroup:
    """One change: ``originals`` leave the pages, replaced by ``by`` (a new merged memory or a kept one)."""

    kind: Kind
    type: str
    scope: str
    originals: tuple[str, ...]  # uris superseded
    by: str | None  # the replacing uri; None for a merge in a dry run or waiting in review
    text: str | None  # the merged statement (merges only)
    review: str | None = None  # the review:// uri when queued (copilot)
    skipped: str | None = None  # why this group was not applied (an original changed meanwhile); nothing of it written


@dataclass(frozen=True, slots=True)
class MergeResult:
    skipped: str | None  # why nothing was done (LLM failure, lock held, mode off); None when it ran
    dry_run: bool = False
    groups: tuple[MergeGroup, ...] = ()
    examined: tuple[tuple[str, str, int], ...] = ()  # (type, scope, live count) of the buckets offered

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class _Action:
    kind: Kind
    originals: tuple[Memory, ...]
    keep: Memory | None  # duplicates / superseded: the memory that replaces the originals
    text: str | None
    reason: str


class Merger:
    def __init__(
        self,
        store: Store,
        actor: str,
        config: PagerConfig,
        *,
        llm: LLMProvider,
        lock: StepLock,
        clock: Callable[[], datetime],
        after_write: Callable[[Sequence[PutResult]], None],
    ) -> None:
        self.store = store
        self.actor = actor
        self.config = config
        self.llm = llm
        self.lock = lock
        self.clock = clock
        self.after_write = after_write

    def merge(
        self, *, type: str | MemoryType | None = None, scope: str | None = None, dry_run: bool = False
    ) -> MergeResult:
        types = MERGEABLE if type is None else (_mergeable(type),)
        scopes = tuple(Scope) if scope is None else (Scope(_scope(scope)),)
        if mode_off(self.config, "merge"):
            return MergeResult(OFF, dry_run)
        return run_step(
            "merge", self.lock, lambda: self._run(types, scopes, dry_run), lambda r: MergeResult(r, dry_run)
        )

    def _run(self, types: Sequence[MemoryType], scopes: Sequence[Scope], dry_run: bool) -> MergeResult:
        buckets = [
            (t, s, live) for t in types for s in scopes if len(live := self._live(t, s)) > self.config.merge_threshold
        ]
        examined = tuple((t.value, s.value, len(live)) for t, s, live in buckets)
        llm = self.llm()
        # every bucket's plan before any write: a failure in the last leaves the first unapplied too
        plans = [(t, s, self._plan(llm, t, live[: self.config.merge_max_memories])) for t, s, live in buckets]
        groups: list[MergeGroup] = []
        for t, s, actions in plans:
            for action in actions:
                groups.append(self._apply(t, s, action, dry_run))
        log.info("merge: %d changes over %d buckets%s", len(groups), len(buckets), " (dry run)" if dry_run else "")
        return MergeResult(None, dry_run, tuple(groups), examined)

    def _live(self, mtype: MemoryType, scope: Scope) -> list[Memory]:
        now = self.clock()
        found = self.store.query(self.actor, types=[mtype], limit=1_000_000, order="newest")
        return [
            m
            for m in found
            if m.scope is scope and m.superseded_by is None and (m.valid_until is None or m.valid_until > now)
        ]

    def _plan(self, llm: Any, mtype: MemoryType, live: Sequence[Memory]) -> list[_Action]:
        listing = "\n".join(f"[{m.id}] {line(m.text)}" for m in live)
        messages = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Memories of type {mtype.value}:\n{listing}"},
        ]
        return _actions(ask(llm, messages, MergeProposal), {m.id: m for m in live})

    def _apply(self, mtype: MemoryType, scope: Scope, action: _Action, dry_run: bool) -> MergeGroup:
        uris = tuple(m.uri for m in action.originals)
        by = action.keep.uri if action.keep is not None else None
        group = MergeGroup(action.kind, mtype.value, scope.value, uris, by, action.text)
        if dry_run:
            return group
        if self.config.memory_mode == "copilot":  # a rewrite of accepted memories: a human decides
            review_id = self.store.review_add(self.actor, "merge", _payload(mtype, scope, action))
            return MergeGroup(
                action.kind, mtype.value, scope.value, uris, by, action.text, f"review://{self.actor}/{review_id}"
            )
        item = merged(self.actor, mtype, scope, action.originals, action.text) if action.text else None
        try:  # one transaction: the merged memory and every supersession, or nothing
            by, result = self.store.consolidation.apply_merge(
                self.actor, [m.id for m in action.originals], item=item, by=None if item is not None else by
            )
        except MemoryNotFound as exc:  # a forget or an edit raced the LLM: this group is stale, the rest is not
            log.warning("merge: a %s group was not applied: %s", action.kind, exc)
            return MergeGroup(action.kind, mtype.value, scope.value, uris, None, action.text, skipped=str(exc))
        if result is not None:
            self.after_write([result])
        return MergeGroup(group.kind, group.type, group.scope, group.originals, by, group.text)


def merged(actor: str, mtype: MemoryType, scope: Scope, originals: Sequence[Memory], text: str | None) -> NewMemory:
    """The memory replacing ``originals``: their strongest values, their tags, ``derived_from`` them."""
    assert text is not None
    return NewMemory(
        actor=actor,
        type=mtype,
        text=text.strip(),
        scope=scope,
        source=Source.CONSOLIDATION,
        confidence=max(m.confidence for m in originals),
        importance=max(m.importance for m in originals),
        strength=max(m.strength for m in originals),
        created_at=max(m.created_at for m in originals),  # the latest restatement's time
        tags=tuple(sorted({t for m in originals for t in m.tags})),
        metadata={"derived_from": [m.uri for m in originals]},
    )


def _actions(proposal: MergeProposal, by_id: dict[str, Memory]) -> list[_Action]:
    """The proposal checked against the listing: known ids, each used once, or ``LLMReplyInvalid``."""
    used: set[str] = set()

    def take(ids: Sequence[str]) -> tuple[Memory, ...]:
        for i in ids:
            if i not in by_id:
                raise LLMReplyInvalid(f"the merge proposal names id {i!r}, which was not in the listing")
            if i in used:
                raise LLMReplyInvalid(f"the merge proposal uses id {i!r} more than once")
            used.add(i)
        return tuple(by_id[i] for i in ids)

    out = [_Action("merge", take(m.ids), None, m.text, m.reason) for m in proposal.merges]
    for d in proposal.duplicates:
        keep = take([d.keep])[0]
        out.append(_Action("duplicate", take(d.drop), keep, None, "duplicate"))
    for s in proposal.superseded:
        keep = take([s.by])[0]
        out.append(_Action("superseded", take([s.id]), keep, None, s.reason))
    return out


def _payload(mtype: MemoryType, scope: Scope, action: _Action) -> dict[str, Any]:
    return {
        "action": action.kind,
        "type": mtype.value,
        "scope": scope.value,
        "source": Source.CONSOLIDATION.value,
        "text": action.text,
        "reason": action.reason,
        "supersedes": [m.uri for m in action.originals],
        "by": action.keep.uri if action.keep is not None else None,
    }


def _mergeable(value: str | MemoryType) -> MemoryType:
    try:
        mtype = MemoryType(value)
    except ValueError:
        raise InvalidInput(f"unknown memory type {value!r}") from None
    if mtype not in MERGEABLE:
        raise InvalidInput(
            f"{mtype.value} memories are never merged by an LLM (the user's own words, or their own lifecycle); "
            f"mergeable: {', '.join(t.value for t in MERGEABLE)}"
        )
    return mtype


def _scope(value: str) -> str:
    if value not in {s.value for s in Scope}:
        raise InvalidInput(f"scope must be one of {', '.join(s.value for s in Scope)}, got {value!r}")
    return value


def accept_merge(
    store: Store,
    actor: str,
    review_id: str,
    payload: Mapping[str, Any],
    after_write: Callable[[Sequence[PutResult]], None],
) -> str:
    """A human accepted a queued merge (``ReviewQueue.decide``): apply it; the uri now in force.

    Originals forgotten or superseded since the proposal are left as they are; with none left the
    item cannot be applied (reject it instead).
    """
    originals = [m for m in (_get(store, actor, u) for u in payload.get("supersedes", ())) if m is not None]
    if not originals:
        raise InvalidInput(
            f"review item {review_id!r}: the memories it would replace are gone or superseded; reject it"
        )
    ids = [m.id for m in originals]
    if payload.get("text"):
        item = merged(actor, MemoryType(payload["type"]), Scope(payload["scope"]), originals, str(payload["text"]))
        # the item closes, the merged memory is written and every original superseded in one transaction
        by, result = store.consolidation.apply_merge(actor, ids, item=item, review_id=review_id)
        if result is not None:
            after_write([result])
        return by
    keep = _get(store, actor, str(payload.get("by")))
    if keep is None:
        raise InvalidInput(f"review item {review_id!r}: the memory to keep is gone; reject it")
    return store.consolidation.apply_merge(actor, ids, by=keep.uri, review_id=review_id)[0]


def _get(store: Store, actor: str, uri: str) -> Memory | None:
    """The live memory at ``uri`` (None when forgotten or already superseded)."""
    memory = store.get(actor, uri.rsplit("/", 1)[-1])
    return memory if memory is not None and memory.superseded_by is None else None
