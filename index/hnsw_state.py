"""A checked hnswlib graph file as the state hnswlib's own pickling restores (``Index.__setstate__``).

hnswlib's ``load_index`` reads its file through a C++ stream: two ``lseek`` calls per element (2 million
system calls at a million rows), every byte copied out of the page cache once more, and the GIL held
throughout (1.3 s at a million rows, during which the store's mirror and the lexical index, loading
beside it, cannot run). The same graph handed over as arrays viewing a mapping of the file, which the
open has just checked, is one ``memcpy`` of the records and a pass over the labels (0.8 s).

What ``__setstate__`` needs besides the file's bytes is each record's label (our row: the save's
``record_of`` inverted) and number of upper levels, which a save records (``hnsw_file.link_levels``)
and ``hnsw_file.link_lists`` checks against the file byte for byte. The state's format is hnswlib's
(its ``ser_version`` 1, hnswlib 0.8); tests hold it equal to ``load_index``'s, and a graph hnswlib
refuses is loaded with ``load_index`` instead.

The mapping's pages count in this process's RSS while the records are copied (they are the page
cache's pages, which ``load_index`` reads too; the mapping is closed at once after).
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from mempager.errors import IndexStale
from mempager.index.hnsw_file import HEADER_SIZE, Layout, link_lists
from mempager.types import LabelArray

SER_VERSION = 1  # hnswlib 0.8's pickled state


@contextlib.contextmanager
def graph_state(
    path: Path,
    where: Layout,
    record_of: LabelArray,
    levels: npt.NDArray[np.uint8],
    live: npt.NDArray[np.bool_],
    capacity: int,
    dim: int,
) -> Iterator[dict[str, Any]]:
    """The state of the checked graph file at ``path`` for ``Index.__setstate__``, valid inside the block."""
    n = where.count
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            mapped = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
        finally:
            os.close(fd)
    except OSError as exc:
        raise IndexStale(f"cannot read {path} ({exc}); rebuild the index from the store") from exc
    state: dict[str, Any] = {}
    try:
        if len(mapped) != where.size:
            raise IndexStale(f"{path} changed size since it was checked; rebuild the index")
        links = link_lists(mapped, where, levels, path)  # before any view of the mapping exists
        labels = np.empty(n, np.uint64)  # record -> its hnswlib label, our row
        labels[record_of] = np.arange(n, dtype=np.uint64)
        element_levels = np.zeros(capacity, np.int32)
        element_levels[:n] = levels
        state.update(
            ser_version=SER_VERSION,
            space="ip",
            dim=dim,
            index_inited=True,
            ep_added=n > 0,
            normalize=False,
            num_threads=-1,
            seed=100,  # what load_index leaves (the file does not keep the seed)
            offset_level0=0,
            max_elements=capacity,
            cur_element_count=n,
            size_data_per_element=where.per_element,
            label_offset=where.label_at,
            offset_data=where.data_at,
            max_level=where.max_level,
            enterpoint_node=where.entry,
            max_M=where.max_m,
            max_M0=where.max_m0,
            M=where.m,
            mult=where.mult,
            ef_construction=where.ef_construction,
            ef=10,
            has_deletions=not bool(live[:n].all()),
            size_links_per_element=where.link_bytes,
            allow_replace_deleted=False,
            label_lookup_external=labels,
            label_lookup_internal=np.arange(n, dtype=np.uint32),
            element_levels=element_levels,
            data_level0=np.frombuffer(mapped, np.int8, n * where.per_element, HEADER_SIZE),
            link_lists=links,
        )
        yield state
    finally:
        state.clear()  # drops the views of the mapping, so it can close
        mapped.close()
