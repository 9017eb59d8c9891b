"""The time lane: absolute dates in the query ("13 October 2023", "May 2023", "in June") resolved
against memory timestamps.

"What did Maya do on 8 May 2023?" names its evidence by date, and neither the words nor the
meaning of a turn say when it was written. When the query holds a date expression, every memory
created inside the named day, month or year (widened by ``after_days``, since an event is often
told a few days after it happened) scores 1 in this lane; fusion adds ``lane_weights["time"]``
to it, so among memories that match the content the ones from that time come first. A query
without a date costs one regex scan.

Measured on LoCoMo halves (benchmarks/results/locomo_levers.md): +0.02 mean recall on each half,
weight 0.4 and 3 days of slack chosen on each half alike. Relative expressions ("last May", "two
weeks before the trip") are not resolved: they need the time the question is asked about.

Month names are matched case-sensitively so the verb "may" is not a month; a day or month without
a year is read in every year the actor's memories span.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date, datetime, time, timedelta, timezone
from typing import Any

import numpy as np

_MONTHS = {
    m: i + 1
    for i, m in enumerate(
        "January February March April May June July August September October November December".split()
    )
}
_M = "(" + "|".join(_MONTHS) + ")"
_ORD = r"(?:st|nd|rd|th)?"
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("dmy", re.compile(rf"\b(\d{{1,2}}){_ORD}\s+(?:of\s+)?{_M},?\s+(\d{{4}})\b")),
    ("mdy", re.compile(rf"\b{_M}\s+(\d{{1,2}}){_ORD},?\s+(\d{{4}})\b")),
    ("my", re.compile(rf"\b{_M},?\s+(\d{{4}})\b")),
    ("md", re.compile(rf"\b{_M}\s+(\d{{1,2}}){_ORD}\b")),
    ("dm", re.compile(rf"\b(\d{{1,2}}){_ORD}\s+(?:of\s+)?{_M}\b")),
    ("m", re.compile(rf"\b{_M}\b")),
    ("y", re.compile(r"\b((?:19|20)\d{2})\b")),
)
_ANY = re.compile(rf"{_M}|\b(?:19|20)\d{{2}}\b")


def _month_end(year: int, month: int) -> date:
    return date(year + month // 12, month % 12 + 1, 1) - timedelta(days=1)


def date_ranges(text: str, years: Sequence[int]) -> list[tuple[date, date]]:
    """The absolute date expressions of ``text`` as inclusive day ranges, the most specific reading
    of each span of text first (so "8 May 2023" is one day, not also May and 2023)."""
    if not _ANY.search(text):
        return []
    out: list[tuple[date, date]] = []
    taken: list[tuple[int, int]] = []
    for kind, pattern in _PATTERNS:
        for m in pattern.finditer(text):
            if any(a < m.end() and m.start() < b for a, b in taken):
                continue
            taken.append((m.start(), m.end()))
            g = m.groups()
            try:
                if kind == "dmy":
                    day = date(int(g[2]), _MONTHS[g[1]], int(g[0]))
                    out.append((day, day))
                elif kind == "mdy":
                    day = date(int(g[2]), _MONTHS[g[0]], int(g[1]))
                    out.append((day, day))
                elif kind == "my":
                    y, mo = int(g[1]), _MONTHS[g[0]]
                    out.append((date(y, mo, 1), _month_end(y, mo)))
                elif kind in ("md", "dm"):
                    mo, d = (_MONTHS[g[0]], int(g[1])) if kind == "md" else (_MONTHS[g[1]], int(g[0]))
                    out += [(date(y, mo, d), date(y, mo, d)) for y in years]
                elif kind == "m":
                    mo = _MONTHS[g[0]]
                    out += [(date(y, mo, 1), _month_end(y, mo)) for y in years]
                else:
                    y = int(g[0])
                    out.append((date(y, 1, 1), date(y, 12, 31)))
            except ValueError:  # "31 February": not a date
                continue
    return out


def _start(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=timezone.utc)


class TimeLane:
    """Memories created inside the query's dates. Reads the store only for queries that name one."""

    def __init__(self, store: Any, actor: str, after_days: int = 3, before_days: int = 0) -> None:
        self.store = store
        self.actor = actor
        self.after = timedelta(days=after_days)
        self.before = timedelta(days=before_days)

    def windows(self, query: str) -> list[tuple[datetime, datetime]]:
        """[start, end) instants of the query's dates, widened by the slack; [] for most queries."""
        if not _ANY.search(query):
            return []
        span = getattr(self.store, "created_span", None)  # the embedded store answers from its mirror
        if span is not None:
            got = span(self.actor)
            if got is None:
                return []
            first, last = (datetime.fromtimestamp(t, timezone.utc).year for t in got)
        else:
            oldest = self.store.query(self.actor, limit=1, order="oldest")
            newest = self.store.query(self.actor, limit=1, order="newest")
            if not oldest or not newest:
                return []
            first, last = oldest[0].created_at.year, newest[0].created_at.year
        years = list(range(first, last + 1))
        return [
            (_start(lo) - self.before, _start(hi) + timedelta(days=1) + self.after)
            for lo, hi in date_ranges(query, years)
        ]

    def search(self, windows: Sequence[tuple[datetime, datetime]], limit: int) -> list[tuple[int, float]]:
        """Up to ``limit`` memories per window (newest first), each scoring 1."""
        seen: dict[int, float] = {}
        between = getattr(self.store, "created_between", None)  # the mirror: no SQL, no rows built
        for since, until in windows:
            if between is not None:
                labels = between(self.actor, since.timestamp(), until.timestamp(), limit).tolist()
            else:
                labels = [m.label for m in self.store.query(self.actor, since=since, until=until, limit=limit)]
            for label in labels:
                seen.setdefault(int(label), 1.0)
        return list(seen.items())

    def inside(self, windows: Sequence[tuple[datetime, datetime]], labels: Sequence[int]) -> dict[int, float]:
        """1.0 for each of ``labels`` created inside a window (fusion completes the lane with it)."""
        if not windows or not labels:
            return {}
        created_of = getattr(self.store, "created_of", None)  # the mirror: one vectorised read
        if created_of is not None:
            when = created_of(self.actor, list(labels))
            inside = np.zeros(len(when), bool)
            for since, until in windows:  # NaN (not held) compares False: never inside
                inside |= (when >= since.timestamp()) & (when < until.timestamp())
            return dict.fromkeys(np.asarray(labels, np.int64)[inside].tolist(), 1.0)
        held = self.store.get_many(self.actor, list(labels))
        return {
            label: 1.0 for label, m in held.items() if any(since <= m.created_at < until for since, until in windows)
        }
