"""The pager's clock: one shared, replaceable source of "now" for every collaborator.

Lifecycle decay, salience recency and pattern timestamps all read it, so a test (or a replay)
that sets ``pager.clock = lambda: frozen`` moves every collaborator's "now" at once.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


class Clock:
    """A callable holding the current time source; collaborators keep the holder, not the source."""

    def __init__(self, source: Callable[[], datetime] = utc_now) -> None:
        self.source = source

    def __call__(self) -> datetime:
        return self.source()
