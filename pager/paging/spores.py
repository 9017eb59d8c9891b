"""Spores: prospective memory (seed 003). What the agent intends to do, not what happened.

    s = p.spore("Rotate the deploy key", cue="deploy key", due="2026-12-01T09:00")
    p.spores()                 # open ones; p.spores("done"), p.spores("all")
    p.complete_spore(s.id)     # out of pages; deleted spore_retention_days later
    p.drop_spore(s.id)         # deleted now; its bytes erased like a hard forget's

A memory accretes; a spore must complete, or it is noise. So spores live beside the memories
(never in a retrieval lane) and a page shows an open spore only when the turn cues it: its due
time has come, or its cue (its own text when it has none) matches the turn's query or goal
(``cued``). Completed spores leave the page at once and are deleted once older than
``spore_retention_days`` (at the next spore write). Deleting one (drop, clean, forget) takes
the store's erasure mark and queues the erasure pass, so the bytes leave the files as a hard
forget's do.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta

from mempager.config import PagerConfig
from mempager.consolidation.cues import cued, terms
from mempager.errors import InvalidInput, MemoryNotFound
from mempager.protocols import Store
from mempager.store.tier_types import SPORE_STATUSES, Spore, tiers_of
from mempager.validate import check_text, parse_time

MAX_SPORE_BYTES = 4_000  # an intention is a sentence or two, not a document
MAX_CUE_BYTES = 1_000
_IN = re.compile(r"^\s*(?:in\s+|\+)?(\d+)\s*([mhdw])\s*$", re.IGNORECASE)
_SECONDS = {"m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_due(value: object, now: datetime) -> datetime:
    """A time (ISO-8601, a datetime, ...), or a span from now: "30m", "in 2h", "+3d", "1w"."""
    if isinstance(value, str) and (m := _IN.match(value)):
        return now + timedelta(seconds=int(m.group(1)) * _SECONDS[m.group(2).lower()])
    return parse_time(value, "due")


class Spores:
    def __init__(
        self,
        store: Store,
        actor: str,
        config: PagerConfig,
        *,
        clock: Callable[[], datetime],
        erasing: Callable[[], AbstractContextManager[None]],
    ) -> None:
        self.tiers = tiers_of(store)
        self.actor = actor
        self.config = config
        self.clock = clock
        self.erasing = erasing  # the Eraser's mark + pass around a delete (maintenance/erasure.py)

    def add(self, text: str, cue: str | None = None, due: object = None) -> Spore:
        now = self.clock()
        spore = Spore(
            actor=self.actor,
            id=secrets.token_hex(6),
            text=check_text(text, MAX_SPORE_BYTES, "spore"),
            cue=None if cue is None else check_text(cue, MAX_CUE_BYTES, "cue"),
            due_at=None if due is None else parse_due(due, now),
            status="open",
            created_at=now,
            done_at=None,
        )
        self.clean()
        return self.tiers.add_spore(spore)

    def find(self, status: str | None = "open") -> list[Spore]:
        """Open spores (default), ``"done"`` ones, or ``"all"`` / None; oldest first."""
        if status == "all":
            status = None
        if status is not None and status not in SPORE_STATUSES:
            raise InvalidInput(f"spore status must be one of open, done, all; got {status!r}")
        return self.tiers.spores(self.actor, status)

    def complete(self, spore_id: str) -> Spore:
        done = self.tiers.complete_spore(self.actor, _id(spore_id), self.clock())
        self.clean()
        return done

    def drop(self, spore_id: str) -> Spore:
        """Delete a spore (open or done) now; its bytes are erased by the erasure pass."""
        wanted = _id(spore_id)
        if not any(s.id == wanted for s in self.tiers.spores(self.actor)):
            raise MemoryNotFound(
                f"no spore {wanted!r} for actor {self.actor!r}; `mempager spore list --all` shows them"
            )
        return self.delete([wanted])[0]

    def delete(self, ids: Sequence[str] | None, op: str = "forget") -> list[Spore]:
        """Delete these spores (all of the actor's when None), under the erasure mark."""
        with self.erasing():
            return self.tiers.delete_spores(self.actor, ids, op)

    def clean(self) -> int:
        """Delete the spores completed more than ``spore_retention_days`` ago; how many."""
        cutoff = self.clock() - timedelta(days=self.config.spore_retention_days)
        old = [s.id for s in self.tiers.spores(self.actor, "done") if s.done_at is not None and s.done_at <= cutoff]
        return len(self.delete(old, "spore.clean")) if old else 0

    def for_turn(self, texts: Iterable[str | None]) -> list[tuple[Spore, str]]:
        """Open spores this turn cues, each with why ("due" or "cue"): due ones first, then by age."""
        now = self.clock()
        turn: frozenset[str] = frozenset()
        for text in texts:
            if text:
                turn |= terms(text)
        found: list[tuple[Spore, str]] = []
        for spore in self.tiers.spores(self.actor, "open"):
            if spore.due_at is not None and spore.due_at <= now:
                found.append((spore, "due"))
            elif cued(terms(spore.cue or spore.text), turn):
                found.append((spore, "cue"))
        return sorted(found, key=lambda f: (f[1] != "due", f[0].created_at, f[0].id))


def _id(value: str) -> str:
    """A spore id, or its ``spore://<actor>/<id>`` uri."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"a spore id is the short hex id `mempager spore list` shows, got {value!r}")
    return value.strip().rsplit("/", 1)[-1]
