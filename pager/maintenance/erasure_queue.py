"""When forgotten bytes get erased: one background pass for many forgets, within a bounded delay.

Rewriting the store file costs about the same for one forgotten memory as for two thousand, so
a hard forget only deletes (the memory leaves every lane, page and result at once) and asks for
a pass; the pass starts ``delay`` seconds after the oldest forget it has not erased yet, and every
forget until then shares it. ``run_now`` erases synchronously (``forget(wait=True)``,
``erase_now()``, ``close()``).

A forget and the start of a pass exclude each other (``forgetting``), so a pass knows exactly
which forgets it covers: those begun before it started. A forget during a pass leaves the queue
due again, and the store's mark (store/erasure_marks.py) is cleared only if no forget came after
the token the pass read when it began.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator

log = logging.getLogger("mempager.erasure")

_RETRY_SECONDS = 5.0  # after a failed pass (disk full, store busy): retried, never dropped


class ErasureQueue:
    def __init__(self, erase: Callable[[], None], *, delay: float, name: str) -> None:
        self._erase = erase  # one whole pass: indexes re-saved scrubbed, store file rewritten
        self._delay = delay
        self._name = name
        self._state = threading.Condition(threading.Lock())
        self._forgets = 0  # forgets begun, ever
        self._due_since: float | None = None  # monotonic start of the oldest forget not yet erased
        self._running = threading.Lock()  # one pass at a time (background or synchronous)
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.passes = 0
        self.last_pass_seconds: float | None = None
        self.last_error: str | None = None

    @property
    def due(self) -> bool:
        """Forgotten bytes may still be in a file (a pass is pending or running)."""
        with self._state:
            return self._due_since is not None

    def status(self) -> dict[str, object]:
        """For ``stats()``: whether bytes await erasure, passes run, the last one's time and error."""
        return {
            "pending": self.due,
            "passes": self.passes,
            "last_pass_seconds": self.last_pass_seconds,
            "last_error": self.last_error,
        }

    @contextlib.contextmanager
    def forgetting(self) -> Iterator[None]:
        """Hold while deleting: a pass cannot begin halfway through a forget."""
        with self._state:
            self._forgets += 1
            if self._due_since is None:
                self._due_since = time.monotonic()
            try:
                yield
            finally:
                self._state.notify_all()
        self._start_thread()

    def run_now(self) -> None:
        """Erase everything forgotten so far before returning (raises what the pass raised)."""
        with self._running:
            with self._state:
                covered, began = self._forgets, time.monotonic()
            started = time.perf_counter()
            try:
                self._erase()
            except BaseException as exc:
                self.last_error = f"{type(exc).__name__}: {exc}"
                raise
            self.last_pass_seconds = time.perf_counter() - started
            self.passes += 1
            self.last_error = None
            with self._state:
                # forgets that began during the pass may have missed it: due again, from when it began
                self._due_since = None if self._forgets == covered else began
                self._state.notify_all()

    def stop(self) -> None:
        """Stop the background thread (a pass under way finishes first)."""
        with self._state:
            self._stopping = True
            self._state.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()

    def _start_thread(self) -> None:
        with self._state:
            if self._thread is not None or self._stopping:
                return
            self._thread = threading.Thread(target=self._loop, name=f"mempager-erase-{self._name}", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while True:
            with self._state:
                while not self._stopping and (
                    self._due_since is None or time.monotonic() < self._due_since + self._delay
                ):
                    wait = None if self._due_since is None else self._due_since + self._delay - time.monotonic()
                    self._state.wait(wait)
                if self._stopping:
                    return
            try:
                self.run_now()
            except Exception:  # noqa: BLE001 - logged and retried: the mark keeps it safe across crashes
                log.exception("erasing forgotten memories of %s failed; retrying in %.0f s", self._name, _RETRY_SECONDS)
                with self._state:
                    self._state.wait_for(lambda: self._stopping, timeout=_RETRY_SECONDS)
