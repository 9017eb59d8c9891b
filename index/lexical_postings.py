"""Each term's postings for the lexical index, and their compact saved form.

A term's postings are a (2, n) int32 array: rows in [0], term frequencies in [1], rows ascending.
A loaded index keeps every term's postings in one block (CSR: ``ptr[t]:ptr[t + 1]`` are term t's
columns), saved beside the tokens, so opening one needs no pass over every token (sorting twenty
million tokens by term took 1.6 s at a million memories) and no array object per term (a million
of them, ~110 MB). A term gets an array of its own once it is written to; until then reading it
returns a view of the block, made on the spot.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from mempager.errors import IndexStale

Int64s = npt.NDArray[np.int64]
Int32s = npt.NDArray[np.int32]
NO_POSTINGS = np.empty((2, 0), np.int32)  # shared and never written: an append replaces it


class PostingLists:
    """``lists[t]``: term t's postings; ``lists[t] = array`` gives it its own; ``extend(n)`` adds terms."""

    __slots__ = ("_own", "_ptr", "_block", "_base")

    def __init__(self, count: int = 0, ptr: Int64s | None = None, block: Int32s | None = None) -> None:
        self._own: list[Int32s | None] = [None] * count
        self._ptr = np.zeros(1, np.int64) if ptr is None else ptr
        self._block = NO_POSTINGS if block is None else _rows_contiguous(block)
        self._base = len(self._ptr) - 1  # terms whose postings start in the block

    def __len__(self) -> int:
        return len(self._own)

    def __getitem__(self, term: int) -> Int32s:
        own = self._own[term]
        if own is not None:
            return own
        if term < self._base:
            return self._block[:, int(self._ptr[term]) : int(self._ptr[term + 1])]
        return NO_POSTINGS

    def __setitem__(self, term: int, postings: Int32s) -> None:
        self._own[term] = _rows_contiguous(postings)

    def extend(self, count: int) -> None:
        self._own.extend([None] * count)


def _rows_contiguous(postings: Int32s) -> Int32s:
    """``postings`` with each of its two rows contiguous (copied only when they are not). Readers take
    a term's rows and tfs as plain buffers (the compiled search, ``index/_bm25.c``); a boolean index
    along the second axis, as a shrinking term's, gives Fortran order, where they would be strided.
    A slice of a block along that axis keeps its rows contiguous, and is kept as it is (no copy)."""
    if postings.strides[1] == postings.itemsize or postings.shape[1] <= 1:
        return postings
    return np.ascontiguousarray(postings)


def to_csr(lists: PostingLists, npost: Int64s, terms: Int64s, row_map: npt.NDArray[np.int32]) -> tuple[Int64s, Int32s]:
    """The postings of ``terms`` (in that order) as (ptr, block), rows renumbered by ``row_map``
    (-1: a dead row, dropped)."""
    parts = [lists[t][:, :n] for t, n in zip(terms.tolist(), npost[terms].tolist(), strict=True)]
    if not parts:
        return np.zeros(1, np.int64), NO_POSTINGS
    block = np.concatenate(parts, axis=1)
    owner = np.repeat(np.arange(len(parts), dtype=np.int64), npost[terms])
    rows = row_map[block[0]]
    keep = rows >= 0
    ptr = np.concatenate(([0], np.cumsum(np.bincount(owner[keep], minlength=len(parts))))).astype(np.int64)
    out = np.empty((2, int(keep.sum())), np.int32)
    out[0], out[1] = rows[keep], block[1][keep]
    return ptr, out


def checked_csr(ptr: Int64s, block: Int32s, terms: int, rows: int, tokens: int) -> tuple[Int64s, Int32s]:
    """Saved postings, after the checks that keep a bad file from indexing out of bounds."""
    ok = (
        ptr.ndim == 1
        and len(ptr) == terms + 1
        and block.ndim == 2
        and block.shape[0] == 2
        and (len(ptr) == 0 or int(ptr[0]) == 0)
        and int(ptr[-1]) == block.shape[1] <= tokens
        and bool((np.diff(ptr) > 0).all())  # every saved term is held by a live document
        and (block.shape[1] == 0 or (int(block[0].min()) >= 0 and int(block[0].max()) < rows))
        and (block.shape[1] == 0 or int(block[1].min()) >= 1)
    )
    if not ok:
        raise IndexStale("saved postings disagree with the saved documents; rebuild the lexical index")
    return ptr, block
