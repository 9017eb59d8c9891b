"""Checking a saved HNSW index's files before hnswlib reads a byte, and placing its rows.

Two layouts of a save (``manifest.files``):

* ``index`` + ``rows`` (saves since the graph file holds the index's own vectors, ``hnsw_file.stamp``):
  the graph file and a small rows file, little-endian, no header: each row's label (int64[n]), its
  record in the graph (int64[n]) and live flag (uint8[n]), then each record's upper levels
  (uint8[n]). Opening reads the graph once to check its CRCs, then hands it to hnswlib from the
  page cache (``hnsw_state``); a large index reads its rows' vectors from the graph file's records,
  a small one copies them out of it.
* ``index`` + ``vectors`` (older saves): the vectors also sit in a file of their own, checked too,
  and read from there as before. The next save writes the newer layout.

A million 384-d rows make a 1.7 GB graph: the older layout read 3.2 GB to open, the newer 1.7 GB.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mempager.errors import IndexStale
from mempager.index import manifest as persist
from mempager.index.hnsw_file import Layout, Stamped, read_layout
from mempager.index.hnsw_rows import FileRows, MemoryRows, Rows
from mempager.index.hnsw_state import graph_state
from mempager.index.manifest import BoolArray, Manifest
from mempager.types import LabelArray

LAYOUTS = ({"index", "rows"}, {"index", "vectors"})  # newer first


State = Callable[[int], AbstractContextManager[dict[str, Any]]]


@dataclass(frozen=True)
class Checked:
    """A save whose files passed their checks: the graph file for hnswlib, and each row's label and flag."""

    graph: Path
    labels: LabelArray
    live: BoolArray
    rows: Callable[[int], Rows]  # the rows' vectors, with room for ``capacity`` rows
    state: State | None = None  # the graph as hnswlib's pickled state (``hnsw_state``), given its capacity


def check_manifest(
    manifest: Manifest, ours: Mapping[str, Any], expect_meta: Mapping[str, Any], directory: Path
) -> None:
    """IndexStale naming every way the save ``manifest`` describes is not one of ``ours`` (some of
    its kind, dim, M, ef_construction), for ``expect_meta``, in a layout this version reads."""
    saved = {"kind": manifest.kind, "dim": manifest.dim, "M": manifest.M, "ef_construction": manifest.ef_construction}
    problems = [f"{name} is {saved[name]!r}, expected {want!r}" for name, want in ours.items() if saved[name] != want]
    problems += persist.meta_differences(manifest.meta, expect_meta)
    if set(manifest.files) not in LAYOUTS:
        problems.append(f"files are {sorted(manifest.files)}, expected ['index', 'rows']")
    if problems:
        raise IndexStale(f"saved index in {directory} does not match: {'; '.join(problems)}; rebuild it from the store")


def write_rows_file(path: Path, labels: LabelArray, stamped: Stamped, live: BoolArray) -> None:
    """The rows file of a save whose graph file ``stamp`` just filled (layout above)."""
    persist.write_rows(path, labels, (stamped.record_of, live.astype(np.uint8)), stamped.levels)


def file_rows(path: Path, where: Layout, record_of: LabelArray, dim: int, capacity: int, live: BoolArray) -> FileRows:
    """Rows read from the records of the stamped graph file at ``path`` (row i from ``record_of[i]``)."""
    n = len(record_of)
    return FileRows(path, n, dim, n, capacity, live, at=where.vectors_at, stride=where.per_element, record_of=record_of)


def check(directory: Path, manifest: Manifest, dim: int, resident: bool) -> Checked:
    """Verify the files of the save ``manifest`` describes; IndexStale names the first problem."""
    if "rows" in manifest.files:
        return _check_stamped(directory, manifest, dim, resident)
    return _check_older(directory, manifest, dim, resident)


def _check_stamped(directory: Path, manifest: Manifest, dim: int, resident: bool) -> Checked:
    n = manifest.rows
    with ThreadPoolExecutor(max_workers=1) as pool:  # the small file beside the large one
        rows_file = pool.submit(persist.read_verified, directory, manifest.files["rows"])
        graph = persist.verify_file(directory, manifest.files["index"])
        data = rows_file.result()
    if len(data) != 18 * n:
        raise IndexStale(f"rows file holds {len(data)} bytes, expected {18 * n} for {n} rows; rebuild the index")
    labels = data[: 8 * n].view("<i8").astype(np.int64, copy=False)
    record_of = data[8 * n : 16 * n].view("<i8").astype(np.int64, copy=False)
    live = persist.checked_live(labels, data[16 * n : 17 * n], manifest)
    levels = data[17 * n :]
    if n and (int(record_of.min()) < 0 or int(record_of.max()) >= n or np.bincount(record_of, minlength=n).max() > 1):
        raise IndexStale(f"the rows file of {directory} places two rows in one record; rebuild the index")
    where = read_layout(graph, dim)
    if where.count != n:
        raise IndexStale(f"{graph} holds {where.count} rows, the manifest says {n}; rebuild the index")

    def state(capacity: int) -> AbstractContextManager[dict[str, Any]]:
        return graph_state(graph, where, record_of, levels, live, capacity, dim)

    def rows(capacity: int) -> Rows:
        if not resident:
            return file_rows(graph, where, record_of, dim, capacity, live)
        vectors = np.zeros((capacity, dim), np.float32)
        _copy_out(graph, where, record_of, dim, vectors)
        vectors[:n][~live] = 0.0  # a tombstone's record holds a live neighbour's vector; our copy, zeros
        return MemoryRows(vectors)

    return Checked(graph, labels, live, rows, state)


def _copy_out(path: Path, where: Layout, record_of: LabelArray, dim: int, out: np.ndarray) -> None:
    """The records' vectors into ``out`` by row (the file was just checked: its pages are cached)."""
    n = len(record_of)
    if n == 0:
        return
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            with mmap.mmap(fd, 0, prot=mmap.PROT_READ) as mapped:
                saved = np.ndarray(
                    (n, dim), np.float32, buffer=mapped, offset=where.vectors_at, strides=(where.per_element, 4)
                )
                try:
                    out[:n] = saved[record_of]
                finally:
                    del saved  # the mapping cannot close while a view of it lives
        finally:
            os.close(fd)
    except OSError as exc:
        raise IndexStale(f"cannot read {path} ({exc}); rebuild the index from the store") from exc


def _check_older(directory: Path, manifest: Manifest, dim: int, resident: bool) -> Checked:
    # Both files are checked side by side (CRCs and reads release the GIL), before hnswlib loads
    # the graph: it holds the GIL throughout, which would stall a check running meanwhile.
    path, n = directory / manifest.files["vectors"].name, manifest.rows
    with ThreadPoolExecutor(max_workers=1) as pool:
        check_vectors = persist.read_verified if resident else persist.verify_file
        checked = pool.submit(check_vectors, directory, manifest.files["vectors"])
        graph = persist.verify_file(directory, manifest.files["index"])
        done = checked.result()
    if isinstance(done, np.ndarray):
        labels, saved, live = persist.read_rows(done, manifest)

        def resident_rows(capacity: int) -> Rows:
            vectors = MemoryRows(np.zeros((capacity, dim), np.float32))
            vectors.vectors[:n] = saved
            return vectors

        return Checked(graph, labels, live, resident_rows)
    labels, live = persist.read_labels(path, manifest)  # a large index: its rows are read from the file
    return Checked(graph, labels, live, lambda capacity: FileRows(path, n, dim, n, capacity, live))
