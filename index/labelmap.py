"""label -> row for the store's int64 labels, in 4 bytes a label where the labels allow it.

The mirror, the HNSW index and the BM25 index each map every label they hold to a row. As dicts,
a million labels cost ~100 MB each (the table, and an int object per key and per value). Labels
come from one store-wide sequence, so an actor's labels are dense: a table of int32 rows indexed by
``label - base`` holds them in ~4 MB. Where they are not dense (an actor whose labels are a few
among many others', or labels a caller invents), the map turns itself into a dict: the table never
takes more than ``_SPARSE`` times 4 bytes per label held (plus a floor of 4 MB).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

Int64s = npt.NDArray[np.int64]
_SPARSE = 8  # table slots per label held, above which a dict is smaller
_FLOOR = 1 << 20  # slots always allowed (4 MB)


class LabelRows:
    """A ``dict[int, int]`` of label -> row (rows >= 0), with array operations for batches."""

    __slots__ = ("_table", "_base", "_count", "_dict")

    def __init__(self, dtype: type[np.signedinteger[Any]] = np.int32) -> None:
        """``dtype``: of the values (rows) held; int64 holds any value >= 0, 8 bytes a label."""
        self._table = np.empty(0, dtype)  # row of label base + i, or -1
        self._base = 0
        self._count = 0
        self._dict: dict[int, int] | None = None  # set when the labels are too sparse for a table

    def __len__(self) -> int:
        return len(self._dict) if self._dict is not None else self._count

    def __bool__(self) -> bool:
        return len(self) > 0

    def get(self, label: int, default: int | None = None) -> int | None:
        if self._dict is not None:
            return self._dict.get(label, default)
        i = label - self._base
        if 0 <= i < len(self._table):
            row: int = self._table.item(i)
            if row >= 0:
                return row
        return default

    def __contains__(self, label: object) -> bool:
        if not isinstance(label, int | np.integer):
            return False
        return self.get(int(label)) is not None

    def __getitem__(self, label: int) -> int:
        row = self.get(label)
        if row is None:
            raise KeyError(label)
        return row

    def __setitem__(self, label: int, row: int) -> None:
        self.set_many(np.array([label], np.int64), np.array([row], np.int64))

    def pop(self, label: int, default: int | None = None) -> int | None:
        if self._dict is not None:
            return self._dict.pop(label, default)
        row = self.get(label)
        if row is None:
            return default
        self._table[label - self._base] = -1
        self._count -= 1
        return row

    def set_many(self, labels: Int64s, rows: Int64s) -> None:
        """``self[labels[i]] = rows[i]`` for each i (labels distinct)."""
        labels = np.asarray(labels, dtype=np.int64)
        if not len(labels):
            return
        if self._dict is None:
            self._cover(int(labels.min()), int(labels.max()), len(labels))
        if self._dict is not None:
            self._dict.update(zip(labels.tolist(), np.asarray(rows).tolist(), strict=True))
            return
        at = labels - self._base
        self._count += int(np.count_nonzero(self._table[at] < 0))
        self._table[at] = rows

    def rows_of(self, labels: Int64s) -> Int64s:
        """The row of each label, -1 where it has none."""
        labels = np.asarray(labels, dtype=np.int64)
        if self._dict is not None:
            found = self._dict
            return np.fromiter((found.get(x, -1) for x in labels.tolist()), np.int64, len(labels))
        at = labels - self._base
        if len(at) and int(at.min()) >= 0 and int(at.max()) < len(self._table):
            gathered: Int64s = self._table[at]  # the common case (every label in range): one gather, no mask
            return gathered
        inside = (at >= 0) & (at < len(self._table))
        out = np.full(len(labels), -1, np.int64)
        out[inside] = self._table[at[inside]]
        return out

    def labels(self) -> Int64s:
        """Every label held, ascending."""
        if self._dict is not None:
            return np.sort(np.fromiter(self._dict, np.int64, len(self._dict)))
        return (np.flatnonzero(self._table >= 0) + self._base).astype(np.int64)

    def rows(self) -> Int64s:
        """Every row held, in label order."""
        if self._dict is not None:
            return np.fromiter((self._dict[x] for x in self.labels().tolist()), np.int64, len(self._dict))
        return self._table[self._table >= 0].astype(np.int64)

    def __iter__(self) -> Iterator[int]:
        return iter(self.labels().tolist())

    def keys(self) -> list[int]:
        out: list[int] = self.labels().tolist()
        return out

    def items(self) -> Iterable[tuple[int, int]]:
        return zip(self.labels().tolist(), self.rows().tolist(), strict=True)

    def _cover(self, low: int, high: int, adding: int) -> None:
        """Grow the table to hold labels in [low, high], or turn into a dict when too sparse."""
        start = min(low, self._base) if len(self._table) else low
        end = max(high + 1, self._base + len(self._table))
        if start == self._base and end <= self._base + len(self._table):
            return
        span = end - start
        if span > max(_SPARSE * (self._count + adding), _FLOOR):
            self._dict = dict(self.items())
            self._table, self._count = np.empty(0, self._table.dtype), 0
            return
        size = span if start < self._base or not len(self._table) else max(span, 2 * len(self._table))
        table = np.full(size, -1, self._table.dtype)
        if len(self._table):
            table[self._base - start : self._base - start + len(self._table)] = self._table
        self._table, self._base = table, start
