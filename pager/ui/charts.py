"""Geometry for the inline SVG charts: numbers in, coordinates out; the templates draw them.

No JS chart library: the server knows every value, and an SVG made of numbers cannot carry text
that runs (the labels are escaped by the template like any other text).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from mempager.config import PagerConfig
from mempager.patterns import Pattern
from mempager.procedural.lifecycle import decay, last_applied

WIDTH, HEIGHT = 1100, 300  # about the panel's width: the SVG's text stays near its CSS size
LEFT, RIGHT, TOP, BOTTOM = 44, 16, 14, 30  # margins around the plot
SAMPLES = 48


@dataclass(frozen=True, slots=True)
class Series:
    name: str
    past: str  # "x,y x,y ..." for a polyline: the decay that happened
    future: str  # the decay still to come if the pattern is not applied again
    colour: int  # index into the palette (CSS classes c0..c7)


@dataclass(frozen=True, slots=True)
class Tick:
    at: float
    text: str


@dataclass(frozen=True, slots=True)
class Marker:
    x: float
    y: float
    text: str


@dataclass(frozen=True, slots=True)
class DecayChart:
    width: int
    height: int
    series: tuple[Series, ...]
    x_ticks: tuple[Tick, ...]
    y_ticks: tuple[Tick, ...]
    now_x: float
    threshold_y: float
    threshold: float
    markers: tuple[Marker, ...]
    plot: tuple[float, float, float, float]  # left, top, right, bottom


def decay_chart(
    patterns: Sequence[Pattern],
    now: datetime,
    config: PagerConfig,
    events: Sequence[tuple[datetime, str]] = (),
    width: int = WIDTH,
    height: int = HEIGHT,
) -> DecayChart:
    """Each pattern's decayed confidence (the kernel's own ``lifecycle.decay``) from its last
    application to one half-life past now; ``events`` (audit time, op) are marked on the x axis."""
    half = timedelta(days=config.confidence_half_life_days)
    starts = [last_applied(p) for p in patterns] + [at for at, _ in events]
    start = min([now - half, *starts])
    end = now + half
    span = (end - start).total_seconds() or 1.0
    left, top, right, bottom = LEFT, TOP, width - RIGHT, height - BOTTOM

    def x_of(t: datetime) -> float:
        return round(left + (right - left) * (t - start).total_seconds() / span, 1)

    def y_of(v: float) -> float:
        return round(bottom - (bottom - top) * v, 1)

    series = []
    for i, p in enumerate(patterns):
        since = last_applied(p)
        past = [since + (now - since) * k / SAMPLES for k in range(SAMPLES + 1)] if since < now else [now]
        future = [now + half * k / SAMPLES for k in range(SAMPLES + 1)]

        def line(times: list[datetime], base: float = p.confidence, since: datetime = since) -> str:
            return " ".join(f"{x_of(t)},{y_of(decay(base, since, t, config.confidence_half_life_days))}" for t in times)

        series.append(Series(p.label, line(past), line(future), i % 8))
    days = (end - start).days or 1
    step = max(1, days // 6)
    x_ticks = tuple(
        Tick(x_of(start + timedelta(days=d)), (start + timedelta(days=d)).strftime("%Y-%m-%d"))
        for d in range(0, days + 1, step)
    )
    y_ticks = tuple(Tick(y_of(v / 4), f"{v / 4:.2f}") for v in range(5))
    markers = tuple(Marker(x_of(at), bottom, f"{op} {at:%Y-%m-%d %H:%M}") for at, op in events)
    threshold = config.demote_established_below
    return DecayChart(
        width,
        height,
        tuple(series),
        x_ticks,
        y_ticks,
        x_of(now),
        y_of(threshold),
        threshold,
        markers,
        (left, top, right, bottom),
    )
