"""Work a retrieval runs beside its own: the semantic lane's search, in a helper thread, while the
calling thread searches the lexical lane.

hnswlib's search releases the GIL, so it overlaps the lexical lane's numpy work. Measured on 600
LoCoMo questions (both lanes, depth 50): at 1M memories 3.23 -> 2.05 ms p50, at 100k 0.54 -> 0.44 ms
(benchmarks/results/scale.md has the whole ``retrieve``); a small index's search is too short to pay
for the hand-over (``lanes.semantic.ASIDE_FROM``). The query is embedded before, in the
calling thread: the lexical lane waits for the search under its lock, which must never mean waiting
for a slow or failing embedding service. A lane whose search must run in the caller's thread says so
with ``searches_aside = False`` (PostgreSQL's: its search tells this thread's lexical lane whether it
is current), and runs there as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
WORKERS = 4  # concurrent retrievals (the async API, a server's threads) each get a helper


class Aside:
    """A few helper threads, started on first use and stopped by ``close``; after it, work runs inline."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._closed = False

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        with self._lock:
            if not self._closed:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="mempager-aside")
                return self._pool.submit(fn)
        return inline(fn)

    def close(self) -> None:
        """Stop the helpers once their work is done (a search under way finishes first)."""
        with self._lock:
            self._closed, pool, self._pool = True, self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)


def inline(fn: Callable[[], T]) -> Future[T]:
    """``fn`` run now, in this thread, as a done future (an exception it raises is raised here)."""
    done: Future[T] = Future()
    done.set_result(fn())
    return done
