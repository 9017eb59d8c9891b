"""A mirror column of fixed-width lowercase hex strings (memory ids, content hashes), packed in words.

A million memories held their 16-character id and 64-character content hash as Python strings:
~200 MB, two million objects made at every open, and a pass over a million strings to derive the
semantic lane's hash digests. Packed, a value costs its 8 or 32 bytes, arrives from DuckDB as
numbers (``select``: no string is made), and its digest is one shift.

A value that does not pack (another width, upper case, not hex, None) is kept as it is, beside
the words, so any string round-trips exactly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

_NIBBLE = np.full(256, -1, np.int64)  # byte -> its value as a lowercase hex digit, -1 if it is not one
_NIBBLE[np.frombuffer(b"0123456789abcdef", np.uint8)] = np.arange(16)
_DIGIT = 16  # hex digits in a word
_SHIFTS = np.arange(60, -1, -4, dtype=np.uint64)  # a word's digits, most significant first


class HexColumn:
    """Values of one column by row: ``chars`` hex digits each (a multiple of 16), else kept as is."""

    def __init__(self, chars: int, capacity: int) -> None:
        if chars % _DIGIT or chars <= 0:
            raise ValueError(f"a packed hex column holds a multiple of {_DIGIT} digits, not {chars}")
        self.chars, self.words = chars, chars // _DIGIT
        self.packed = np.zeros((capacity, self.words), np.uint64)
        self.unpacked = np.zeros(capacity, np.bool_)  # this row's value is in ``odd``, not in ``packed``
        self.odd: dict[int, str | None] = {}

    def grow(self, capacity: int) -> None:
        more = capacity - len(self.unpacked)
        if more > 0:
            self.packed = np.concatenate([self.packed, np.zeros((more, self.words), np.uint64)])
            self.unpacked = np.concatenate([self.unpacked, np.zeros(more, np.bool_)])

    # -- writes -----------------------------------------------------------------------------
    def set_many(self, rows: npt.NDArray[np.int64], values: Sequence[str | None]) -> None:
        if len(rows) > 1 and len(np.unique(rows)) < len(rows):  # a row twice: the last value wins, in order
            for row, value in zip(rows.tolist(), values, strict=True):
                self.set_many(np.array([row], np.int64), [value])
            return
        words, packs = self._pack(values)
        was = self.unpacked[rows]
        self.packed[rows] = words
        self.unpacked[rows] = ~packs
        for row in rows[was & packs].tolist():  # held a value that did not pack; now one that does
            self.odd.pop(row, None)
        for i in np.flatnonzero(~packs).tolist():
            self.odd[int(rows[i])] = values[i]

    def set(self, row: int, value: str | None) -> None:
        self.set_many(np.array([row], np.int64), [value])

    def clear(self, row: int) -> None:
        """The row holds nothing any more (None); its digits are overwritten, not left behind."""
        self.packed[row] = 0
        self.unpacked[row] = True
        self.odd.pop(row, None)

    def load(self, lo: int, cols: Mapping[str, Any], name: str) -> None:
        """Rows ``lo``... from a DuckDB ``fetchnumpy()`` of ``select(name)``: a row packs where its value
        has the shape (``_ok``) and every word cast; the others come as they are (``_odd``)."""
        words = [np.ma.asarray(cols[f"{name}_w{i}"]) for i in range(self.words)]
        count = len(words[0])
        packs = np.asarray(cols[f"{name}_ok"], np.bool_).copy()
        for column in words:
            packs &= ~np.ma.getmaskarray(column)
        rows = slice(lo, lo + count)
        for i, column in enumerate(words):
            self.packed[rows, i] = np.where(packs, np.ma.filled(column.astype(np.uint64), 0), 0)
        self.unpacked[rows] = ~packs
        odd = np.flatnonzero(~packs)
        if len(odd):
            raw = np.ma.asarray(cols[f"{name}_odd"])
            values, mask = np.ma.getdata(raw), np.ma.getmaskarray(raw)
            for i in odd.tolist():
                self.odd[lo + i] = None if mask[i] else str(values[i])

    # -- reads ------------------------------------------------------------------------------
    def get(self, row: int) -> str | None:
        return self.take(np.array([row], np.int64))[0]

    def take(self, rows: npt.NDArray[np.int64]) -> list[str | None]:
        """The value of each row, in order."""
        if not len(rows):
            return []
        blob = self.packed[rows].astype(">u8").tobytes().hex()  # big-endian: the digits in order
        c = self.chars
        out: list[str | None] = [blob[i : i + c] for i in range(0, len(blob), c)]
        for i in np.flatnonzero(self.unpacked[rows]).tolist():
            out[i] = self.odd.get(int(rows[i]))
        return out

    def head(self, rows: npt.NDArray[np.int64], bits: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """The first ``bits`` (< 64) bits of each packed row's value as an int >= 0, and the
        positions (in ``rows``) whose value is not packed, for the caller to derive itself."""
        heads = (self.packed[rows, 0] >> np.uint64(64 - bits)).astype(np.int64)
        return heads, np.flatnonzero(self.unpacked[rows])

    # -- packing ----------------------------------------------------------------------------
    def _pack(self, values: Sequence[str | None]) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.bool_]]:
        """Each value's words, and whether it packs (exactly ``chars`` lowercase hex digits)."""
        n, c = len(values), self.chars
        # a value of another length, None, or non-ASCII becomes "", which does not pack
        raw = np.array([v if isinstance(v, str) and len(v) == c and v.isascii() else "" for v in values], f"S{c}")
        nibbles = _NIBBLE[raw.view(np.uint8).reshape(n, c)]
        packs = (nibbles >= 0).all(axis=1)
        digits = np.where(nibbles >= 0, nibbles, 0).astype(np.uint64).reshape(n, self.words, _DIGIT)
        words = np.bitwise_or.reduce(digits << _SHIFTS, axis=2) if n else np.zeros((0, self.words), np.uint64)
        words[~packs] = 0
        return np.asarray(words, np.uint64), np.asarray(packs, np.bool_)


def select(column: str, chars: int) -> tuple[str, str]:
    """The SQL that loads ``column`` for ``HexColumn.load``, as (inner, outer) select lists: the inner
    one over the table, the outer one over the inner's columns (so each cast runs once a row). It
    gives ``<column>_w0..`` (NULL where not hex), ``<column>_ok`` and ``<column>_odd`` (the value
    where it does not pack). No regular expression: one cost 0.2 s of CPU a million rows, a cast
    0.07 s. ``TRY_CAST('0x..')`` also takes underscores and upper case, ruled out by ``_ok``."""
    words = [f"{column}_w{i}" for i in range(chars // _DIGIT)]
    casts = [
        f"TRY_CAST('0x' || substr({column}, {1 + i * _DIGIT}, {_DIGIT}) AS UBIGINT) AS {word}"
        for i, word in enumerate(words)
    ]
    shape = f"length({column}) = {chars} AND lower({column}) = {column} AND NOT contains({column}, '_')"
    packs = " AND ".join([f"{column}_ok", *(f"{word} IS NOT NULL" for word in words)])
    inner = ", ".join([*casts, f"coalesce({shape}, false) AS {column}_ok"])
    outer = ", ".join([*words, f"{column}_ok", f"CASE WHEN NOT ({packs}) THEN {column} END AS {column}_odd"])
    return inner, outer
