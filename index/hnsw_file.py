"""hnswlib's saved-file layout: erasing what tombstones still hold, and where each row's vector sits.

hnswlib's ``mark_deleted`` keeps a deleted element's vector in the graph (it still routes
searches) and ``save_index`` writes it out. A forgotten memory's vector must not reach a file, so
every save overwrites, in the file just written and before it is hashed and renamed into place,
the vector of each element marked deleted. The replacement is a copy of the vector of one of its
live level-0 neighbours (the bytes of a memory still stored, so nothing forgotten is kept), which
keeps the tombstone a useful routing node once the file is loaded again; an element with no live
neighbour gets zeros.

The layout (hnswlib 0.8, ``HierarchicalNSW::saveIndex``): a 96-byte header, then
``cur_element_count`` level-0 records of ``size_data_per_element`` bytes each:
``[link count: u16][flags: u8][pad: u8][maxM0 x u32 neighbour ids][dim x f32 vector][u64 label]``
(the flag byte's bit 0 is the deleted mark), then the upper levels' link lists (ids only). The
header is checked against the index's own dim before a byte is changed, and ``stamp`` checks every
record's label and deleted mark against the index's own rows, so a different layout fails loudly
instead of corrupting.

``stamp`` also writes the index's own float32 copy of every live row into its record: the saved graph
then holds exactly the vectors the index scores with, and a large index reads its rows from it
(``Layout``: where each record's vector sits; ``stamp`` says which record holds which row) instead
of from a second file of the same vectors.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from mempager.errors import IndexStale

# offsetLevel0, max_elements, cur_element_count, size_data_per_element, label_offset, offsetData,
# maxlevel (int), enterpoint_node (u32), maxM, maxM0, M, mult (double), ef_construction
_HEADER = struct.Struct("<QQQQQQiIQQQdQ")
HEADER_SIZE = _HEADER.size
_DELETED = 0x01
_LINKS_AT = 4  # the u16 count, the flag byte and one spare byte


@dataclass(frozen=True)
class Layout:
    """Where the level-0 records of an hnswlib file sit, the vector inside each, and the header's graph
    parameters (what hnswlib needs besides the records and link lists to take the graph as it is)."""

    count: int  # records (hnswlib's cur_element_count)
    per_element: int  # bytes a record
    data_at: int  # the vector's offset inside a record
    label_at: int  # the u64 label's offset inside a record
    max_m0: int
    size: int  # bytes in the file
    max_level: int
    entry: int  # the entry point's record
    max_m: int
    m: int
    mult: float
    ef_construction: int

    @property
    def vectors_at(self) -> int:
        """The file offset of record 0's vector (record i's is ``i * per_element`` further)."""
        return HEADER_SIZE + self.data_at

    @property
    def links_at(self) -> int:
        """The file offset of the upper levels' link lists (after the last record)."""
        return HEADER_SIZE + self.count * self.per_element

    @property
    def link_bytes(self) -> int:
        """Bytes of one upper level's links: a u32 count and ``max_m`` u32 neighbour ids."""
        return 4 + 4 * self.max_m


def layout(header: bytes | memoryview | Any, size: int, dim: int, path: Path) -> Layout:
    """The layout a file of ``size`` bytes starting with ``header`` has, for ``dim``-d vectors;
    IndexStale when it is not hnswlib 0.8's."""
    if size < _HEADER.size or len(header) < _HEADER.size:
        raise IndexStale(f"{path} is too short to be an hnswlib index")
    (level0_at, _, count, per_element, label_at, data_at, max_level, entry, max_m, max_m0, m, mult, efc) = (
        _HEADER.unpack_from(header, 0)
    )
    expected = (
        level0_at == 0
        and data_at == _LINKS_AT + 4 * max_m0
        and label_at == data_at + 4 * dim
        and per_element == label_at + 8
        and _HEADER.size + count * per_element <= size
    )
    if not expected:
        raise IndexStale(
            f"{path} does not have hnswlib 0.8's layout for {dim}-d vectors (offsets {data_at}/"
            f"{label_at}/{per_element}, maxM0 {max_m0}); its tombstones cannot be erased in place"
        )
    return Layout(count, per_element, data_at, label_at, max_m0, size, max_level, entry, max_m, m, mult, efc)


def link_levels(mapped: Any, where: Layout, path: Path) -> npt.NDArray[np.uint8]:
    """Each record's number of upper levels, read off the link lists of a file hnswlib wrote
    (``[size: u32][size bytes of links]`` per record, back to back; size 0 for most). Runs once
    per save; ``link_lists`` checks the result against the file on every load."""
    words = _link_words(mapped, where, path)
    try:
        levels = _walk(words, where, path)
    finally:
        del words  # a traceback keeps this frame: a view would pin the mapping open
    link_lists(mapped, where, levels, path)  # the walk must account for every byte
    return levels


def _walk(words: npt.NDArray[np.uint32], where: Layout, path: Path) -> npt.NDArray[np.uint8]:
    levels = np.zeros(where.count, np.uint8)
    sizes_at = np.flatnonzero(words)  # a record's size word, or a link inside a list (skipped below)
    record = at = 0
    while record < where.count:
        k = int(np.searchsorted(sizes_at, at))
        if k == len(sizes_at):
            break  # the remaining records have no upper levels
        q = int(sizes_at[k])
        record += q - at  # the records in between have size 0
        if record >= where.count:
            break
        size = int(words[q])
        level, rest = divmod(size, where.link_bytes)
        if rest or not 0 < level <= min(max(where.max_level, 0), 255):
            raise IndexStale(f"{path} has a link list of {size} bytes at record {record}; rebuild the index")
        levels[record] = level
        at, record = q + 1 + size // 4, record + 1
    return levels


def link_lists(mapped: Any, where: Layout, levels: npt.NDArray[np.uint8], path: Path) -> npt.NDArray[np.int8]:
    """The upper levels' links of every record back to back, without their size words (what hnswlib's
    own state holds), after checking that ``levels`` describe the file's link lists byte for byte."""
    if len(levels) != where.count:
        raise IndexStale(f"{len(levels)} levels for the {where.count} records of {path}; rebuild the index")
    words = _link_words(mapped, where, path)
    try:
        per = levels.astype(np.int64) * (where.link_bytes // 4)  # words of links a record has
        size_at = np.cumsum(per + 1) - per - 1
        fits = int(per.sum()) + where.count == len(words)
        if fits and np.array_equal(words[size_at], per.astype(np.uint32) * 4):
            links = np.ones(len(words), bool)
            links[size_at] = False
            return words[links].view(np.int8)  # a copy: nothing here views the mapping
    finally:
        del words  # a traceback keeps this frame: a view would pin the mapping open
    raise IndexStale(f"the link lists of {path} are not the ones its save recorded; rebuild the index")


def _link_words(mapped: Any, where: Layout, path: Path) -> npt.NDArray[np.uint32]:
    tail = where.size - where.links_at
    if tail < 4 * where.count or tail % 4:
        raise IndexStale(f"{path} has {tail} bytes of link lists for {where.count} records; rebuild the index")
    return np.frombuffer(mapped, "<u4", tail // 4, where.links_at)


def read_layout(path: Path, dim: int) -> Layout:
    """``layout`` of the file at ``path`` (its header read from disk)."""
    with open(path, "rb") as fh:
        head = fh.read(_HEADER.size)
        return layout(head, fh.seek(0, 2), dim, path)


@dataclass(frozen=True)
class Scrubbed:
    """What a scrub did, and the live records it leaves for the caller to check against its copy."""

    deleted: int  # elements whose vector was overwritten
    sample_labels: npt.NDArray[np.uint64]  # labels of a few live elements ...
    sample_vectors: npt.NDArray[np.float32]  # ... and their vectors as the file holds them


def scrub_deleted(path: Path, dim: int, sample: int = 8) -> Scrubbed:
    """Overwrite the vector of every deleted element of the hnswlib file at ``path``, in place.

    Raises ``IndexStale`` when the file does not have the layout described above.
    """
    with open(path, "r+b") as fh, mmap.mmap(fh.fileno(), 0) as mm:
        where = layout(mm, len(mm), dim, path)
        records = _records(mm, where)
        try:
            out = _scrub(records, _LINKS_AT, where.data_at, where.label_at, where.max_m0, sample)
        finally:
            del records  # the mmap cannot close while a numpy view of it lives
        mm.flush()
    return out


@dataclass(frozen=True)
class Stamped:
    layout: Layout
    record_of: npt.NDArray[np.int64]  # row -> its record
    levels: npt.NDArray[np.uint8]  # record -> its upper levels (``link_levels``)


def stamp(path: Path, dim: int, blocks: Iterable[npt.NDArray[np.float32]], live: npt.NDArray[np.bool_]) -> Stamped:
    """Write ``blocks`` (every row's vector, in row order) into the records of the hnswlib file at
    ``path``, then erase the deleted elements' vectors (``scrub_deleted``), in place. Returns the
    layout, the record of each row (hnswlib numbers its elements in the order its threads
    inserted them, so row i, which the index gives the hnswlib label i, may sit in any record)
    and each record's upper levels.

    The records' labels must be the rows 0..n-1, each once, and a record must be marked deleted
    exactly where its row is not ``live``, or IndexStale is raised before a vector is written.
    """
    with open(path, "r+b") as fh, mmap.mmap(fh.fileno(), 0) as mm:
        where = layout(mm, len(mm), dim, path)
        records = _records(mm, where)
        try:
            record_of = _stamp(records, where, blocks, live, path)
        finally:
            del records  # the mmap cannot close while a numpy view of it lives
        levels = link_levels(mm, where, path)
        mm.flush()
    return Stamped(where, record_of, levels)


def _stamp(
    records: npt.NDArray[np.uint8],
    where: Layout,
    blocks: Iterable[npt.NDArray[np.float32]],
    live: npt.NDArray[np.bool_],
    path: Path,
) -> npt.NDArray[np.int64]:
    n = where.count
    labels = records[:, where.label_at : where.label_at + 8].copy().view("<u8")[:, 0]
    deleted = (records[:, 2] & _DELETED).astype(bool)
    vectors = records[:, where.data_at : where.label_at]
    record_of = np.full(n, -1, np.int64)
    at, problem = 0, ""
    try:
        if len(live) != n or (n and int(labels.max()) >= n):
            problem = f"does not hold the index's {len(live)} rows"
        else:
            record_of[labels.astype(np.int64)] = np.arange(n)
            if (record_of < 0).any():
                problem = "holds a row twice"
            elif not np.array_equal(deleted, ~live[labels.astype(np.int64)]):
                problem = "marks other rows deleted than the index does"
        if not problem:
            for block in blocks:
                vectors[record_of[at : at + len(block)]] = np.ascontiguousarray(block, "<f4").view(np.uint8)
                at += len(block)
            if at == n:
                _scrub(records, _LINKS_AT, where.data_at, where.label_at, where.max_m0, 0)
            else:
                problem = f"has {n} records for {at} vectors"
    finally:
        del vectors, records  # a traceback keeps this frame: its views would pin the mapping open
    if problem:
        raise IndexStale(f"{path} {problem}; rebuild the index from the store")
    return record_of


def _records(mm: mmap.mmap, where: Layout) -> npt.NDArray[np.uint8]:
    return np.frombuffer(mm, np.uint8, where.count * where.per_element, _HEADER.size).reshape(
        where.count, where.per_element
    )


def _scrub(
    records: npt.NDArray[np.uint8], links_at: int, data_at: int, label_at: int, max_m0: int, sample: int
) -> Scrubbed:
    deleted = (records[:, 2] & _DELETED).astype(bool)
    vectors = records[:, data_at:label_at].view(np.float32)
    dead = np.flatnonzero(deleted)
    if len(dead):
        counts = records[dead, 0:2].copy().view(np.uint16)[:, 0].astype(np.int64)
        links = records[dead, links_at : links_at + 4 * max_m0].copy().view(np.uint32).astype(np.int64)
        slot = np.arange(max_m0)[None, :]
        usable = (slot < counts[:, None]) & (links < len(records))
        usable[usable] &= ~deleted[links[usable]]
        has = usable.any(axis=1)
        first = np.argmax(usable, axis=1)  # the first live neighbour, where there is one
        donors = links[np.arange(len(dead)), first]
        vectors[dead[has]] = vectors[donors[has]]
        vectors[dead[~has]] = 0.0
    live = np.flatnonzero(~deleted)[:sample]
    labels = records[live, label_at : label_at + 8].copy().view(np.uint64)[:, 0]
    return Scrubbed(deleted=len(dead), sample_labels=labels, sample_vectors=vectors[live].copy())
