"""hnswlib's saved-file layout, read only to erase what tombstones still hold.

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
header is checked against the index's own dim before a byte is changed, and the caller checks
live vectors against its own copy, so a different layout fails loudly instead of corrupting.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from mempager.errors import IndexStale

# offsetLevel0, max_elements, cur_element_count, size_data_per_element, label_offset, offsetData,
# maxlevel (int), enterpoint_node (u32), maxM, maxM0, M, mult (double), ef_construction
_HEADER = struct.Struct("<QQQQQQiIQQQdQ")
_DELETED = 0x01


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
        if len(mm) < _HEADER.size:
            raise IndexStale(f"{path} is too short to be an hnswlib index")
        (level0_at, _, count, per_element, label_at, data_at, _, _, _, max_m0, _, _, _) = _HEADER.unpack_from(mm, 0)
        links_at = 4  # the u16 count, the flag byte and one spare byte
        expected = (
            level0_at == 0
            and data_at == links_at + 4 * max_m0
            and label_at == data_at + 4 * dim
            and per_element == label_at + 8
            and _HEADER.size + count * per_element <= len(mm)
        )
        if not expected:
            raise IndexStale(
                f"{path} does not have hnswlib 0.8's layout for {dim}-d vectors (offsets {data_at}/"
                f"{label_at}/{per_element}, maxM0 {max_m0}); its tombstones cannot be erased in place"
            )
        records = np.frombuffer(mm, np.uint8, count * per_element, _HEADER.size).reshape(count, per_element)
        try:
            out = _scrub(records, links_at, data_at, label_at, max_m0, sample)
        finally:
            del records  # the mmap cannot close while a numpy view of it lives
        mm.flush()
    return out


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
