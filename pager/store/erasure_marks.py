"""The durable note that an actor has forgotten memories whose bytes are still in files.

A hard forget deletes at once and erases the bytes later (maintenance/erasure.py), so a crash in
between must not lose the erasure: the note is written (``store_meta``) before the delete it
announces and cleared only by the pass that erased everything up to it. Each forget writes a fresh
token, and clearing is compare-and-delete on the token the pass read when it began, so a forget
during the pass (in this process or another one sharing a server store) keeps the note.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

PREFIX = "erasure_pending:"


def key(actor: str) -> str:
    return PREFIX + actor


def token() -> str:
    """When the latest forget was noted (for people reading the table), made unique."""
    return f"{datetime.now(timezone.utc).isoformat(timespec='milliseconds')} {uuid.uuid4().hex[:8]}"


def by_actor(rows: list[tuple[str, str]]) -> dict[str, str]:
    """``store_meta`` rows whose key starts with ``PREFIX``, as actor -> token."""
    return {k[len(PREFIX) :]: v for k, v in rows if k.startswith(PREFIX)}
