"""Loading an actor's mirror (``store.mirror``) from the file: the columns it reads and their decoding.

Type, scope and source come as codes, empty tags and metadata as NULL, ids and content hashes
packed in numbers (``store.hexcolumn``): a million rows would otherwise bring millions of short
strings and empty arrays, freed right after the load but leaving memory too fragmented to return.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from mempager.errors import StoreError
from mempager.store.hexcolumn import select
from mempager.types import MemoryType, Scope, Source

TYPES = list(MemoryType)
SOURCES = np.array(list(Source), dtype=object)  # a code -> its enum member, for whole columns at once
SCOPES = np.array(list(Scope), dtype=object)
ID_CHARS, HASH_CHARS = 16, 64  # the ids the store makes (token_hex(8)) and sha256 content hashes

_ID_IN, _ID_OUT = select("id", ID_CHARS)
_HASH_IN, _HASH_OUT = select("content_hash", HASH_CHARS)
# The query of one label range, parameters: *CODES, actor, from label, to label (exclusive).
MIRROR_QUERY = (
    f"SELECT label, {_ID_OUT}, text, {_HASH_OUT}, "
    "list_position(?, type) AS type_code, list_position(?, scope) AS scope_code, "
    "list_position(?, source) AS source_code, confidence, importance, strength, created_at, updated_at, "
    "last_accessed_at, access_count, CASE WHEN len(tags) = 0 THEN NULL ELSE tags END AS tags, "
    "CASE WHEN metadata = '{}' THEN NULL ELSE metadata END AS metadata, superseded_by, valid_until "
    f"FROM (SELECT *, {_ID_IN}, {_HASH_IN} FROM memories WHERE actor = ? AND label >= ? AND label < ?) "
    "ORDER BY label"
)
CODES = ([t.value for t in TYPES], [s.value for s in SCOPES], [s.value for s in SOURCES])  # its parameters


@dataclass(frozen=True)
class Decoded:
    """One slice of rows as the mirror's columns hold them (ids and hashes: read by ``HexColumn.load``)."""

    labels: np.ndarray
    num: dict[str, np.ndarray]
    obj: dict[str, np.ndarray]


def decode(cols: dict[str, Any]) -> Decoded:
    """DuckDB's ``fetchnumpy()`` of ``MIRROR_QUERY`` as the mirror's numeric and object columns."""

    def secs(name: str) -> np.ndarray:
        raw = np.ma.filled(np.ma.asarray(cols[name]).astype("datetime64[us]"), np.datetime64("NaT"))
        out = raw.astype(np.int64).astype(np.float64) / 1e6
        out[np.isnat(raw)] = np.nan
        return out

    superseded = np.ma.asarray(cols["superseded_by"])
    num = {
        "created": secs("created_at"),
        "updated": secs("updated_at"),
        "accessed": secs("last_accessed_at"),
        "valid_until": secs("valid_until"),
        **{name: np.asarray(cols[name]) for name in ("importance", "strength", "confidence", "access_count")},
        "type": _codes(cols["type_code"], len(TYPES), "type"),
        "superseded": ~np.ma.getmaskarray(superseded),
    }
    tags = _objects(cols["tags"], ())
    for i in np.flatnonzero(np.ma.getmaskarray(np.ma.asarray(cols["tags"])) == 0).tolist():
        tags[i] = tuple(tags[i])  # element by element: a tuple stays one value
    obj = {
        "source": SOURCES[_codes(cols["source_code"], len(SOURCES), "source")],
        "scope": SCOPES[_codes(cols["scope_code"], len(SCOPES), "scope")],
        "text": np.asarray(cols["text"], dtype=object),
        "superseded_by": _objects(superseded, None),
        "metadata": _objects(cols["metadata"], "{}", dedupe=True),
        "tags": tags,
    }
    return Decoded(np.asarray(cols["label"], dtype=np.int64), num, obj)


def _codes(column: Any, known: int, what: str) -> np.ndarray:
    """0-based codes from SQL's 1-based ``list_position`` (NULL: a value this version does not know)."""
    column = np.ma.asarray(column)
    codes = np.ma.getdata(column).astype(np.int64) - 1
    if np.ma.getmaskarray(column).any() or (codes < 0).any() or (codes >= known).any():
        raise StoreError(f"the store holds a {what} this version of mempager does not know; upgrade mempager")
    return codes


def _objects(column: Any, null: Any, dedupe: bool = False) -> np.ndarray:
    """A nullable column (DuckDB hands it over as a masked array) as objects, NULL as ``null``.

    ``dedupe``: equal values become one object (metadata repeats: one copy, not one per row)."""
    column = np.ma.asarray(column)
    mask = np.ma.getmaskarray(column)
    out = np.fromiter(itertools.repeat(null, len(column)), dtype=object, count=len(column))  # () stays one value
    keep = np.flatnonzero(~mask)
    if len(keep):
        values = np.ma.getdata(column)[keep]
        if dedupe:
            seen: dict[Any, Any] = {}
            values = np.fromiter((seen.setdefault(v, v) for v in values.tolist()), dtype=object, count=len(keep))
        out[keep] = values
    return out
