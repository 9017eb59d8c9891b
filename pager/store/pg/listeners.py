"""This process's listeners: told about each change it commits (other processes follow the audit)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from mempager.types import AuditEntry, Memory

log = logging.getLogger("mempager.pgstore")
ChangeListener = Callable[[Sequence[Memory], Sequence[int]], None]
AuditListener = Callable[[AuditEntry], None]


class PgListeners:
    """Change listeners per actor and audit listeners, called after commit, in registration order."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._change: dict[str, list[ChangeListener]] = {}
        self._audit: list[AuditListener] = []

    def after(
        self,
        entries: Sequence[AuditEntry],
        changed: Sequence[Memory],
        removed: Sequence[int] = (),
        actor: str = "",
    ) -> None:
        """Tell this process's listeners about a committed change (other processes poll the audit)."""
        with self._lock:
            by_actor: dict[str, list[Memory]] = {}
            for memory in changed:
                by_actor.setdefault(memory.actor, []).append(memory)
            if removed:
                by_actor.setdefault(actor, [])
            for who, memories in by_actor.items():
                for listener in list(self._change.get(who, ())):
                    listener(memories, removed if who == actor else ())
        self.publish(entries)

    def publish(self, entries: Sequence[AuditEntry]) -> None:
        """Hand each committed audit entry to the audit listeners; a failing listener is logged."""
        for listener in list(self._audit):
            for entry in entries:
                try:
                    listener(entry)
                except Exception:  # noqa: BLE001 - the write is durable; a broken listener must not undo it
                    log.exception("on_audit_event listener failed for audit entry %d", entry.seq)

    def add_change_listener(self, actor: str, listener: ChangeListener) -> None:
        """``listener(upserted, removed_labels)`` after every change this process commits for ``actor``."""
        with self._lock:
            self._change.setdefault(actor, []).append(listener)

    def remove_change_listener(self, actor: str, listener: ChangeListener) -> None:
        with self._lock:
            listeners = self._change.get(actor, [])
            if listener in listeners:
                listeners.remove(listener)

    def add_audit_listener(self, listener: AuditListener) -> None:
        """``listener(entry)`` after each audit entry this process commits."""
        self._audit.append(listener)

    def remove_audit_listener(self, listener: AuditListener) -> None:
        if listener in self._audit:
            self._audit.remove(listener)
