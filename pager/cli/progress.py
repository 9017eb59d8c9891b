"""A dependency-free progress bar for long CLI work (writes to stderr, redraws in place on a TTY)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, total: int, label: str, stream: TextIO | None = None, width: int = 30) -> None:
        self.total = max(total, 1)
        self.label = label
        self.stream = stream or sys.stderr
        self.width = width
        self.done = 0
        self._start = time.monotonic()
        self._last = 0.0
        self._tty = self.stream.isatty()

    def advance(self, n: int = 1, note: str = "") -> None:
        self.done = min(self.total, self.done + n)
        now = time.monotonic()
        # redraw at most ~10x/s on a terminal, every 10% when piped (logs stay short)
        step = self.total // 10 or 1
        if (self._tty and now - self._last >= 0.1) or (not self._tty and self.done % step == 0) \
                or self.done == self.total:
            self._last = now
            self._draw(note)

    def _draw(self, note: str) -> None:
        filled = int(self.width * self.done / self.total)
        elapsed = time.monotonic() - self._start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else 0.0
        line = (f"{self.label} [{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total} "
                f"{rate:,.1f}/s eta {eta:,.0f}s {note}")
        end = "\r" if self._tty and self.done < self.total else "\n"
        self.stream.write(line + end)
        self.stream.flush()
