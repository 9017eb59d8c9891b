"""One actor's mirror rows in creation-time order, for the time lane's window queries.

The time lane asks, for a query that names a date, which memories were created inside each of a
few windows (newest first, at most ``limit``) and what span of years the memories cover. Scanning
every row's creation time costs ~1.5 ms a question at a million memories (a compare and a mask
over 8 MB, then a sort of the matches). Kept sorted, a window is two binary searches and a walk
back from its end.

The order is a snapshot: the rows that existed at its last build, sorted by (created, label).
Since then rows were appended (the *delta*: every row at or past ``built``) or had their creation
time changed (*stale*: marked, their place in the snapshot is wrong, so they are read as delta
too); removed rows stay in the snapshot and are skipped where not alive. Answers combine the
snapshot's valid entries with the delta, so they equal a scan's exactly. The snapshot is rebuilt
once the delta outgrows a share of the table (a sort of the live rows: ~0.2 s at a million,
amortised over as many writes).

Not thread safe: the mirror's lock serialises every call.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
REBUILD_SHARE = 1 / 32  # the delta may hold this share of the rows (and at least REBUILD_MIN) ...
REBUILD_MIN = 4096  # ... before the snapshot is sorted again
_WALK = 256  # snapshot entries read at a time, walking back from a window's end


class TimeOrder:
    def __init__(self) -> None:
        self._clear()

    def _clear(self) -> None:
        self._created: Floats = np.zeros(0)  # the snapshot: creation times ascending (ties by label) ...
        self._rows: Ints = np.zeros(0, np.int64)  # ... and their rows
        self._built = 0  # rows below this existed at the build (the rest are the delta)
        self._stale: Bools = np.zeros(0, bool)  # rows whose creation time changed since the build
        self._stale_rows: list[int] = []
        self._fresh = True  # nothing built yet: the first question builds

    def moved(self, rows: Ints, old: Floats, new: Floats) -> None:
        """``rows`` (written now) had creation times ``old`` and get ``new``: those already in the
        snapshot whose time changed lose their place in it."""
        inside = rows < self._built
        if not inside.any():
            return
        changed = np.unique(rows[inside & ~((old == new) | (np.isnan(old) & np.isnan(new)))])
        if not len(changed):
            return
        if len(self._stale) < self._built:
            grown = np.zeros(self._built, bool)
            grown[: len(self._stale)] = self._stale
            self._stale = grown
        fresh = changed[~self._stale[changed]]
        self._stale[fresh] = True
        self._stale_rows.extend(fresh.tolist())

    def covers(self, row: int) -> bool:
        """Whether ``row`` has a place in the snapshot (a write to it must say if its time moved)."""
        return row < self._built

    def _delta(self, size: int) -> Ints:
        tail = np.arange(self._built, size, dtype=np.int64)
        if not self._stale_rows:
            return tail
        return np.concatenate((np.asarray(self._stale_rows, np.int64), tail))

    def _ready(self, size: int, created: Floats, alive: Bools, labels: Ints) -> None:
        delta = size - self._built + len(self._stale_rows)
        if not self._fresh and delta <= max(REBUILD_MIN, REBUILD_SHARE * size):
            return
        live = np.flatnonzero(alive[:size]).astype(np.int64)
        order = np.lexsort((labels[live], created[live]))
        self._rows = live[order]
        self._created = created[self._rows].copy()
        self._built, self._fresh = size, False
        self._stale, self._stale_rows = np.zeros(0, bool), []

    def _valid(self, rows: Ints, alive: Bools) -> Bools:
        """Which snapshot entries still stand: alive, and not moved since the build."""
        ok: Bools = alive[rows]
        if self._stale_rows:
            ok &= ~self._stale[rows]
        return ok

    def between(
        self, since: float, until: float, limit: int, size: int, created: Floats, alive: Bools, labels: Ints
    ) -> Ints:
        """Rows created in [since, until) and alive, newest first (ties: higher label first), at most ``limit``."""
        self._ready(size, created, alive, labels)
        if limit <= 0:
            return np.zeros(0, np.int64)
        lo, hi = np.searchsorted(self._created, [since, until], side="left").tolist()
        picked: list[Ints] = []
        need, end = limit, hi
        while need > 0 and end > lo:  # the snapshot's newest valid entries of the window
            chunk = self._rows[max(lo, end - _WALK) : end][::-1]
            chunk = chunk[self._valid(chunk, alive)][:need]
            picked.append(chunk)
            need -= len(chunk)
            end -= _WALK
        delta = self._delta(size)
        when = created[delta]
        delta = delta[alive[delta] & (when >= since) & (when < until)]
        rows = np.concatenate([*picked, delta]) if picked else delta
        order = np.lexsort((-labels[rows], -created[rows]))[:limit]
        out: Ints = rows[order]
        return out

    def span(self, size: int, created: Floats, alive: Bools, labels: Ints) -> tuple[float, float] | None:
        """The oldest and newest creation time of the live rows; None when there is none."""
        self._ready(size, created, alive, labels)
        ends = [t for t in (self._end(alive, True), self._end(alive, False)) if t is not None]
        delta = self._delta(size)
        delta = delta[alive[delta]]
        if len(delta):
            ends += [float(created[delta].min()), float(created[delta].max())]
        return (min(ends), max(ends)) if ends else None

    def _end(self, alive: Bools, oldest: bool) -> float | None:
        """The creation time of the snapshot's first valid entry from its oldest or newest end."""
        n = len(self._rows)
        for bound in range(0, n, _WALK) if oldest else range(n, 0, -_WALK):
            at = (
                np.arange(bound, min(bound + _WALK, n))
                if oldest
                else np.arange(bound - 1, max(bound - _WALK, 0) - 1, -1)
            )
            hit = np.flatnonzero(self._valid(self._rows[at], alive))
            if len(hit):
                return float(self._created[at[hit[0]]])
        return None
