"""The HNSW index's own float32 copy of each row's unit vector: in memory, or read from its saved file.

Scores and ``get_vectors`` come from this copy, not from hnswlib's (hnswlib hands a vector back at
~15 µs each). In memory it costs 4 x dim bytes a row, on top of hnswlib's own copy: at a million
384-d vectors that is 1.5 GB more. So a large index, once loaded or saved, reads the rows it needs
(a search reads ~50, a completion ~40) from its saved graph file's records (an older save: its vectors
file) with positional reads, through the page cache, and keeps in memory only the rows added since
(``FileRows``); a small one keeps an array (``MemoryRows``), as before. Either way a read returns
the same float32 bytes (``hnsw_file.stamp`` writes them into the graph file).

A removed row reads as zeros in both (the saved file may still hold it until the next save, which
writes a file without it, as it always did).
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import numpy as np
import numpy.typing as npt

from mempager.errors import IndexStale
from mempager.index._rows import pread_rows
from mempager.types import FloatMatrix, LabelArray

BoolArray = npt.NDArray[np.bool_]
RESIDENT_MAX_ROWS = 262_144  # above this many rows (400 MB at 384-d) the saved rows are read from the file
_PREAD_MAX = 2048  # rows read one by one; more go through a mapping of the file, a slice at a time
_SLICE = 65_536  # rows per mapped slice


class MemoryRows:
    """Every row in an array (``capacity`` rows, zero-filled)."""

    def __init__(self, vectors: FloatMatrix) -> None:
        self.vectors = vectors

    def __len__(self) -> int:
        return len(self.vectors)

    def take(self, rows: LabelArray) -> FloatMatrix:
        taken: FloatMatrix = self.vectors[rows]
        return taken

    def put(self, rows: LabelArray, unit: FloatMatrix) -> None:
        self.vectors[rows] = unit

    def zero(self, row: int) -> None:
        self.vectors[row] = 0.0

    def reserve(self, capacity: int) -> None:
        grown = len(self.vectors)
        if capacity > grown:
            self.vectors = np.concatenate(
                [self.vectors, np.zeros((capacity - grown, self.vectors.shape[1]), np.float32)]
            )

    def close(self) -> None:
        return None


class FileRows:
    """Rows below ``base`` read from a saved file; rows from ``base`` on in memory.

    Row i's float32 vector sits at byte ``at + record_of[i] * stride`` of the file: by default the
    layout of an older save's vectors file (``manifest.write_rows``: labels int64[n], vectors
    float32[n, dim], live uint8[n]; ``record_of[i] == i``); a newer save's rows are read from the
    records of its hnswlib graph file, which ``hnsw_file.stamp`` fills with the same float32 bytes
    (``hnsw_file.Layout``; ``record_of``: the record ``stamp`` found each row in).

    The file is opened once and read with ``pread(2)`` (index/_rows.c; thread-safe: no shared offset); it stays
    readable after a later save unlinks it, until ``close``.
    """

    def __init__(
        self,
        path: Path,
        rows_in_file: int,
        dim: int,
        base: int,
        capacity: int,
        live: BoolArray,
        *,
        at: int | None = None,
        stride: int | None = None,
        record_of: LabelArray | None = None,
    ) -> None:
        self._fd = os.open(path, os.O_RDONLY)
        self._dim, self._base, self._n = dim, base, rows_in_file
        self._at = 8 * rows_in_file if at is None else at  # in a vectors file, the vectors follow the labels
        self._width = 4 * dim
        self._stride = self._width if stride is None else stride
        self._record_of = record_of  # row -> its place in the file (None: the row's own number)
        end = self._at + self._stride * (rows_in_file - 1) + self._width if rows_in_file else 0
        if self._stride < self._width or os.fstat(self._fd).st_size < end:
            os.close(self._fd)
            raise IndexStale(f"{path} is shorter than its {rows_in_file} rows; rebuild the index from the store")
        self._erased = ~live[:base].astype(bool)  # rows removed before or since: they read as zeros
        self._tail = np.zeros((max(capacity - base, 0), dim), np.float32)  # calloc: untouched pages cost nothing

    def __len__(self) -> int:
        return self._base + len(self._tail)

    def take(self, rows: LabelArray) -> FloatMatrix:
        rows = np.asarray(rows, dtype=np.int64)
        out = np.empty((len(rows), self._dim), np.float32)
        saved = rows < self._base
        if saved.all():
            self._read(rows, out)
        else:
            where = np.flatnonzero(saved)
            part = np.empty((len(where), self._dim), np.float32)
            self._read(rows[where], part)
            out[where] = part
            later = np.flatnonzero(~saved)
            out[later] = self._tail[rows[later] - self._base]
        erased = np.flatnonzero(saved)
        erased = erased[self._erased[rows[erased]]]
        out[erased] = 0.0
        return out

    def _read(self, rows: LabelArray, out: FloatMatrix) -> None:
        if self._record_of is not None:
            rows = self._record_of[rows]
        if len(rows) <= _PREAD_MAX:  # one pread(2) a row, all in one call without the GIL (index/_rows.c)
            offsets = np.ascontiguousarray(self._at + rows * self._stride, dtype=np.int64)
            done = pread_rows(self._fd, out, offsets, self._width)
            if done != len(rows):
                raise IndexStale(f"short read of row {int(rows[done])} from the saved vectors; rebuild the index")
            return
        # Many rows (an exact scan): through a read-only mapping, a slice of the file at a time,
        # each slice's pages dropped from this process once read.
        order = np.argsort(rows, kind="stable")
        with mmap.mmap(self._fd, 0, prot=mmap.PROT_READ) as mapped:
            matrix: FloatMatrix = np.ndarray(
                (self._n, self._dim), np.float32, buffer=mapped, offset=self._at, strides=(self._stride, 4)
            )
            try:
                for lo in range(0, len(order), _SLICE):
                    pick = order[lo : lo + _SLICE]
                    out[pick] = matrix[rows[pick]]
                    mapped.madvise(mmap.MADV_DONTNEED)
            finally:
                del matrix  # the mapping cannot close while a view of it lives

    def put(self, rows: LabelArray, unit: FloatMatrix) -> None:
        rows = np.asarray(rows, dtype=np.int64)
        if len(rows) and int(rows.min()) < self._base:
            raise IndexStale("a saved row was written in place; rebuild the index from the store")
        self._tail[rows - self._base] = unit

    def zero(self, row: int) -> None:
        if row < self._base:
            self._erased[row] = True
        else:
            self._tail[row - self._base] = 0.0

    def reserve(self, capacity: int) -> None:
        need = capacity - self._base
        if need > len(self._tail):
            grown = np.zeros((need, self._dim), np.float32)
            grown[: len(self._tail)] = self._tail
            self._tail = grown

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:  # a state dropped without close (an error mid-load) frees its descriptor
        self.close()


Rows = MemoryRows | FileRows
