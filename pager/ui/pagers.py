"""The pagers the inspector reads through: the one it was started with, others on demand (admin).

A session looks at one actor (memory is partitioned by actor). Without ``--admin`` that is the
actor the inspector was started for and nothing else; with it, a session may switch, and the
pager of another actor is opened through ``opener`` on the same store and kept until ``close``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from mempager.core import Pager
from mempager.errors import InvalidActor
from mempager.validate import check_actor

Opener = Callable[[str], Pager]
log = logging.getLogger("mempager.ui")


class Pagers:
    def __init__(self, default: Pager, opener: Opener | None = None) -> None:
        self.default = default
        self._opener = opener
        self._opened: dict[str, Pager] = {}
        self._lock = threading.Lock()

    @property
    def default_actor(self) -> str:
        return self.default.actor

    @property
    def can_switch(self) -> bool:
        return self._opener is not None

    def get(self, actor: str) -> Pager:
        if actor == self.default.actor:
            return self.default
        if self._opener is None:
            raise InvalidActor(f"this inspector shows actor {self.default.actor!r} only; start it with --admin")
        actor = check_actor(actor)
        with self._lock:  # one pager per actor, even when two requests ask at once
            found = self._opened.get(actor)
            if found is None:
                found = self._opened[actor] = self._opener(actor)
            return found

    def actors(self) -> list[str]:
        """Every actor with memories in the store (the store's own list: the Pager API has none)."""
        listing = getattr(self.default.store, "actors", None)  # both backends have it; the protocol does not
        found = [str(a) for a in listing()] if callable(listing) else []
        return sorted({self.default.actor, *found, *self._opened})

    def close(self) -> None:
        """Close the pagers this object opened (the default one belongs to whoever passed it)."""
        with self._lock:
            opened, self._opened = list(self._opened.values()), {}
        failures: list[BaseException] = []
        for pager in opened:
            try:
                pager.close()
            except Exception as exc:  # noqa: BLE001 - every pager gets its close; the first failure is raised
                failures.append(exc)
        for extra in failures[1:]:
            log.error("could not close a pager of the inspector: %s", extra)
        if failures:
            raise failures[0]
