"""Building a store's arrays without asking the kernel for transparent huge pages.

numpy asks for huge pages (``madvise(MADV_HUGEPAGE)``) on every array of 4 MiB or more. On a
kernel whose THP policy is ``madvise`` with ``defrag = madvise`` (Debian's and Ubuntu's default),
each first touch of such a region may then stall in direct compaction until a free 2 MiB block
exists. An open builds gigabytes of fresh arrays at a million memories (mirror columns, lexical
postings, episode links), and the stalls dominated it: on this machine (2 cores, 24 GiB, page
cache full) a 1M store opened cold in 5.7-6.5 s, 4-6.5 s of them system time; with the advice off
during the open, 4.4-4.5 s, 3.1-3.2 s of system time (three alternating runs each). First touching
a fresh 1 GB array took 7.8 s with the advice and 0.4 s without, when memory was fragmented. A
batch write grows the same arrays (each doubling a fresh copy): 300k memories through
``remember_many`` went in at 15,960/s with the advice and 17,614/s without (medians of three).

Huge pages do pay off for arrays searched often, so the advice is off only while ``mempager.open``
or a batch write builds; arrays made outside (a search's scratch among them) get numpy's default.
Retrieve p50 at 1M measured side by side: 4.23-4.70 ms with the open-time switch, 4.32-4.70 ms
without it (noise); with the advice off for the whole process, 4.40-5.78 ms.

The switch is numpy's own (``NUMPY_MADVISE_HUGEPAGE`` sets it at import): process-wide, so the
sections of several threads share one reference count, and the last to leave restores what was
there; another thread's arrays made meanwhile get small pages too. It changes only where pages
come from, never an array's contents. A process started with ``NUMPY_MADVISE_HUGEPAGE`` set has
chosen for itself: it is left alone.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

log = logging.getLogger("mempager")
ENV = "NUMPY_MADVISE_HUGEPAGE"


def _numpy_switch() -> Callable[[bool], bool] | None:
    """numpy's setter (returns the previous setting), or None where this numpy has none."""
    for name in ("numpy._core.multiarray", "numpy.core.multiarray"):  # numpy 2, numpy 1
        try:
            found = getattr(importlib.import_module(name), "_set_madvise_hugepage", None)
        except ImportError:
            continue
        if callable(found):
            return found  # type: ignore[no-any-return]
    log.debug("numpy has no huge-page switch here; stores open with its default")
    return None


class HugePageAdvice:
    """A counted "no huge-page advice" section over numpy's process-wide switch."""

    def __init__(self, switch: Callable[[bool], bool] | None, environ: Mapping[str, str] | None = None) -> None:
        chosen = (os.environ if environ is None else environ).get(ENV)
        self._switch = None if chosen is not None else switch  # the process chose: leave it alone
        self._lock = threading.Lock()
        self._depth = 0
        self._saved = False

    @property
    def active(self) -> bool:
        """Whether ``off`` switches anything (numpy has the switch, the process did not choose)."""
        return self._switch is not None

    @contextmanager
    def off(self) -> Iterator[None]:
        """Within: numpy gives large arrays without huge-page advice (restored when the last leaves)."""
        if self._switch is None:
            yield
            return
        with self._lock:
            if self._depth == 0:
                self._saved = bool(self._switch(False))
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0:
                    self._switch(self._saved)


ADVICE = HugePageAdvice(_numpy_switch())
