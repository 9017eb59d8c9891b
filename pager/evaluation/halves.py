"""Two-fold tuning on LoCoMo: every constant chosen on one half, reported on the other.

Half A is conversations 1-5, half B conversations 6-10 (in the data file's order). A lever's
grid is evaluated once on every question; the point reported for half A is the one that scored
best on half B (the mean of the ten recall columns), and the reverse. The two reported halves
pooled are a cross-validated estimate over all the questions: no question's figure comes from
constants that saw it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from mempager.evaluation.levers import BASELINE, Knobs, Outcome, objective

Bools = npt.NDArray[np.bool_]
HALVES = {"A": range(0, 5), "B": range(5, 10)}  # conversation indices
OTHER = {"A": "B", "B": "A"}
SCORED = (1, 2, 3, 4)  # categories recall is reported over (5, adversarial, has no evidence to find)

Override = Mapping[str, Any]
Run = Callable[[Knobs], Outcome]


def mask(outcome: Outcome, half: str | None, categories: Sequence[int] = SCORED) -> Bools:
    """The questions of ``half`` (None: both) in ``categories``."""
    keep = np.isin(outcome.category, categories)
    if half is not None:
        keep &= np.isin(outcome.conv, list(HALVES[half]))
    return keep


@dataclass(frozen=True, slots=True)
class Choice:
    """The grid point tuned on ``OTHER[half]``, to be reported on ``half``."""

    half: str
    knobs: Knobs
    tuning_score: float  # the objective on the tuning half
    candidates: int


def cross_tune(grid: Sequence[Knobs], run: Run) -> dict[str, Choice]:
    """For each half, the grid point that maximises the objective on the other half.

    Ties go to the earlier point (grids list the simpler settings first).
    """
    outcomes = [run(k) for k in grid]
    out = {}
    for half in HALVES:
        tune = OTHER[half]
        scores = [objective(o, mask(o, tune)) for o in outcomes]
        best = int(np.argmax(np.round(scores, 6)))
        out[half] = Choice(half, grid[best], scores[best], len(grid))
    return out


def grid_of(base: Knobs, overrides: Sequence[Override]) -> list[Knobs]:
    return [replace(base, **o) for o in overrides]


@dataclass(frozen=True, slots=True)
class Step:
    lever: str
    knobs: Knobs
    tuning_score: float


def forward(
    levers: Mapping[str, Sequence[Override]],
    run: Run,
    tune_half: str,
    start: Knobs = BASELINE,
    min_gain: float = 0.001,
    rounds: int = 8,
    log: Callable[[str], None] | None = None,
) -> list[Step]:
    """Greedy forward selection of levers on ``tune_half`` only: each round adds the lever (at its
    best grid point, the others held) that raises the tuning objective most, until none adds
    ``min_gain``; then one pass re-tunes each chosen lever's grid with the others fixed."""
    current = start
    base = run(current)
    score = objective(base, mask(base, tune_half))
    steps = [Step("baseline", current, score)]
    chosen: list[str] = []
    for _ in range(rounds):
        best: tuple[float, str, Knobs] | None = None
        for name, overrides in levers.items():
            if name in chosen:
                continue
            for k in grid_of(current, overrides):
                o = run(k)
                s = objective(o, mask(o, tune_half))
                if best is None or s > best[0] + 1e-9:
                    best = (s, name, k)
        if best is None or best[0] < score + min_gain:
            break
        score, name, current = best
        chosen.append(name)
        steps.append(Step(name, current, score))
        if log is not None:
            log(f"tuned on {tune_half}: + {name} -> {score:.4f}")
    for name in chosen:  # re-tune each chosen lever with the others in place
        for k in grid_of(current, levers[name]):
            o = run(k)
            s = objective(o, mask(o, tune_half))
            if s > score + 1e-9:
                score, current = s, k
        steps.append(Step(f"re-tune {name}", current, score))
    return steps
