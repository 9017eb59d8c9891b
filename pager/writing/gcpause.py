"""Python's cyclic garbage collector paused for the length of one bulk write.

A ``remember_many`` of 10k memories makes some 80k short-lived container objects (the validated
items, the stored ``Memory`` objects and their results, audit entries, index tuples). None of them
form reference cycles — reference counting frees them all — but their number alone makes CPython
run full collections in the middle of the batch, each walking every tracked object in the
process: measured, a quarter of the batch's time (benchmarks/results/store.md).

So a large batch pauses the collector and restores it on the way out, errors included. The pause
is process-wide and counted: overlapping batches in several threads keep it paused until the last
one leaves, and a collector the application had disabled stays disabled. (An application that
disables the collector itself *during* a batch finds it enabled again when the batch ends.)
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def collector_paused(active: bool = True) -> Iterator[None]:
    """Pause the cyclic collector inside the block (a no-op when ``active`` is false)."""
    global _depth, _was_enabled
    if not active:
        yield
        return
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
