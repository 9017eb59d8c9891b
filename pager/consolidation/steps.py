"""What every LLM consolidation step shares: the store-wide lock, the LLM, and the skip.

A step first asks the LLM everything it needs (the plan), and writes only once every answer has
validated: an ``LLMError`` (no LLM, timeout, HTTP error, empty or invalid reply) therefore always
arrives before the first write, and the step returns skipped with the reason, logged, having
changed nothing. One step runs per store at a time (seed 000: "other sessions skip — only one
sleeps at a time"); a step that finds the lock held is skipped the same way.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any, TypeVar

from mempager.config import PagerConfig
from mempager.errors import LLMError, LLMUnavailable
from mempager.llm.base import LLM, as_llm
from mempager.llm.settings import LLMSettings
from mempager.protocols import ConsolidationStore

log = logging.getLogger("mempager.consolidation")
LOCK = "consolidation"  # one name for the whole store: merge, replay, reflect, distill, wrap auto
BUSY = "another consolidation step is running on this store"
OFF = "memory_mode is off: nothing written by an LLM is stored"
R = TypeVar("R")
LLMProvider = Callable[[], LLM]
# ``Writer.remember_many`` (writing/writeback.py): validates every item, then stores each through the
# encoding gate; typed here because consolidation must not import writing (writing -> lanes -> here)
RememberMany = Callable[[Sequence[Mapping[str, Any]]], list[str]]


def llm_provider(llm: object, config: PagerConfig) -> LLMProvider:
    """The LLM a step will use, resolved when the step runs (so "none configured" is a skip, too)."""

    def resolve() -> LLM:
        if llm is not None:
            return as_llm(llm)
        client = LLMSettings.from_env().client(config)
        if client is None:
            raise LLMUnavailable("no LLM configured: set MEMPAGER_LLM_URL and MEMPAGER_LLM_MODEL, or pass llm=")
        return client

    return resolve


class StepLock:
    """The store's consolidation lock; expires after ``config.consolidation_lock_seconds``."""

    def __init__(self, cstore: ConsolidationStore, config: PagerConfig) -> None:
        self.cstore = cstore
        self.ttl = config.consolidation_lock_seconds

    @contextmanager
    def hold(self) -> Iterator[bool]:
        """Yields whether this step holds the lock; releases it after."""
        holder = f"{os.getpid()}:{threading.get_ident()}:{secrets.token_hex(4)}"
        # wall-clock time, not the pager's (assignable) clock: expiry must hold across processes
        got = self.cstore.try_lock(LOCK, holder, datetime.now(timezone.utc), self.ttl)
        try:
            yield got
        finally:
            if got:
                self.cstore.unlock(LOCK, holder)


def run_step(step: str, lock: StepLock, body: Callable[[], R], skipped: Callable[[str], R]) -> R:
    """``body()`` under the lock; the lock held elsewhere or an ``LLMError`` gives ``skipped(reason)``."""
    with lock.hold() as got:
        if not got:
            log.info("%s skipped: %s", step, BUSY)
            return skipped(BUSY)
        try:
            return body()
        except LLMError as exc:  # raised before any write (see the module docstring): nothing to undo
            log.warning("%s skipped, nothing changed: %s", step, exc)
            return skipped(f"{type(exc).__name__}: {exc}")


def mode_off(config: PagerConfig, step: str) -> bool:
    if config.memory_mode == "off":
        log.info("%s skipped: %s", step, OFF)
        return True
    return False


def line(text: str, limit: int = 400) -> str:
    """``text`` on one line, cut at ``limit`` characters (prompts stay bounded)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
