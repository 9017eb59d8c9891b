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


@dataclass(frozen=True)
class Width:
    """The search width (hnswlib's ef) for a graph of some live rows.

    A graph of fixed M recalls less as it grows: on 384-d MiniLM-like vectors recall@10 at ef 128
    is 0.99 at 100k but 0.84 at 1M, where ef 512 gives 0.95 (benchmarks/results/scale.md). So ef
    grows in proportion to the live rows, ``per_million`` per million, and a small graph keeps
    ``floor``.
    """

    floor: int
    per_million: int = 0

    def for_rows(self, live: int) -> int:
        return max(self.floor, -(-self.per_million * live // 1_000_000))


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
    def deleted(self) -> int:
        return self.size - len(self.rows)

    def tune(self, width: Width) -> None:
        """Set hnswlib's search width for the live rows. The caller holds the index's write lock
        (hnswlib reads ef during every search), or owns a state no search sees yet."""
        target = width.for_rows(len(self.rows))
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
