"""The graph a search reads (``GraphState``, swapped whole on rebuild and load), its search width,
and the small helpers around hnswlib calls that ``index.hnsw`` uses. No hnswlib import here:
``index.hnsw`` stays the only module that imports it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from mempager.errors import ConfigError, IndexStale
from mempager.index.hnsw_rows import Rows
from mempager.index.labelmap import LabelRows
from mempager.index.manifest import BoolArray
from mempager.types import FloatMatrix, LabelArray


class ShortResult(Exception):
    """hnswlib found fewer than k neighbours (not an error: we scan instead)."""


@contextlib.contextmanager
def translated(action: str) -> Iterator[None]:
    """The one place hnswlib's RuntimeError is translated."""
    try:
        yield
    except RuntimeError as exc:
        if "contiguous 2D array" in str(exc) or "contigious 2D array" in str(exc):
            raise ShortResult(str(exc)) from exc
        raise IndexStale(f"hnswlib failed to {action} ({exc}); rebuild the index from the store") from exc


# The search width measured for a graph's M (the row of the largest M at or below it), on 384-d
# MiniLM-like vectors (benchmarks/results/hnsw_m_before_after.md): (M, floor, per million live vectors).
# * floor: recall@10 at 100k 0.994 at M=16 with ef 128, 0.995 at M=32 with ef 96, in about the same search time;
# * per million: recall@10 >= 0.95 at 1M: 0.958 at M=16 with ef 600, 0.964 at M=32 with ef 240,
#   where M=32 searches in half the time.
# A graph keeps the M it was built with, so the width follows the graph, not the config.
MEASURED_WIDTH = ((32, 96, 240), (0, 128, 600))


def measured_floor(m: int) -> int:
    return next(floor for least, floor, _ in MEASURED_WIDTH if m >= least)


def measured_per_million(m: int) -> int:
    return next(width for least, _, width in MEASURED_WIDTH if m >= least)


@dataclass(frozen=True)
class Width:
    """The search width (hnswlib's ef) for a graph of some live rows.

    A graph of fixed M recalls less as it grows: on 384-d MiniLM-like vectors recall@10 at ef 128
    is 0.99 at 100k but 0.84 at 1M with M=16, where ef 512 gives 0.95 (benchmarks/results/scale.md).
    So ef grows in proportion to the live rows, ``per_million`` per million, and a small graph
    keeps ``floor``; either None: the width measured for the graph's M (``MEASURED_WIDTH``).
    """

    floor: int | None
    per_million: int | None = 0

    def floor_for(self, m: int) -> int:
        return measured_floor(m) if self.floor is None else self.floor

    def per_million_for(self, m: int) -> int:
        return measured_per_million(m) if self.per_million is None else self.per_million

    def for_rows(self, live: int, m: int) -> int:
        return max(self.floor_for(m), -(-self.per_million_for(m) * live // 1_000_000))


@dataclass(eq=False)
class GraphState:
    """Everything a search reads; rebuild and load swap a whole new one in."""

    graph: Any  # hnswlib.Index, whose ids are our rows
    vectors: Rows  # row -> unit vector; rows of removed or replaced labels are zero
    row_labels: LabelArray  # row -> label (meaningful only where live)
    live: BoolArray  # row -> label currently served from this row
    rows: LabelRows  # live label -> row
    size: int = 0  # rows used so far (live + tombstones) == hnswlib's element count
    ef: int = 0  # the search width set on ``graph`` (``tune``)

    @property
    def m(self) -> int:
        """The M this graph was built with (a loaded graph keeps its own, whatever the config says)."""
        return int(self.graph.M)

    @property
    def ef_construction(self) -> int:
        return int(self.graph.ef_construction)

    @property
    def deleted(self) -> int:
        return self.size - len(self.rows)

    def tune(self, width: Width) -> None:
        """Set hnswlib's search width for the live rows. The caller holds the index's write lock
        (hnswlib reads ef during every search), or owns a state no search sees yet."""
        target = width.for_rows(len(self.rows), self.m)
        if target != self.ef:
            with translated("set the search width"):
                self.graph.set_ef(target)
            self.ef = target

    def snapshot(self) -> tuple[LabelArray, Iterator[FloatMatrix], BoolArray]:
        blocks = (self.vectors.take(np.arange(lo, min(lo + 65_536, self.size))) for lo in range(0, self.size, 65_536))
        return self.row_labels[: self.size], blocks, self.live[: self.size]


def check_int(name: str, value: object, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"HnswIndex {name} must be an integer >= {low}, got {value!r}")


def normalised(matrix: FloatMatrix) -> FloatMatrix:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    out: FloatMatrix = np.zeros(matrix.shape, dtype=np.float32)
    np.divide(matrix, norms, out=out, where=norms > 0)
    return out


def padded(values: npt.NDArray[Any], capacity: int) -> npt.NDArray[Any]:
    return np.concatenate([values, np.zeros(capacity - len(values), values.dtype)])


def top(scores: FloatMatrix, labels: LabelArray, k: int) -> npt.NDArray[np.intp]:
    """Positions of the k best, score descending then label ascending, ties at the cut included fairly."""
    if k < scores.size:
        cut = np.partition(scores, scores.size - k)[scores.size - k]
        pool = np.flatnonzero(scores >= cut)
    else:
        pool = np.arange(scores.size)
    return pool[np.lexsort((labels[pool], -scores[pool]))[:k]]
