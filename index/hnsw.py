"""Approximate cosine index over hnswlib (the only module that imports hnswlib).

* Labels are the store's int64 labels. Each insert gets a fresh *row* (also its hnswlib id); ``add`` of
  an existing label tombstones the old row (``mark_deleted``) rather than updating the node in place,
  since in-place updates degrade the graph under churn.
* ``remove`` never rebuilds by itself: ``needs_rebuild()`` says when tombstones exceed
  ``max_deleted_share`` and the owner calls ``rebuild()``, which builds a fresh graph while searches
  keep using the old one (adds and removes wait), then swaps.
* Our float32 copy (``hnsw_rows``): an array for a small index; a large one, once loaded or saved,
  reads its rows from the saved graph file (page cache, not process memory), newer rows in memory.
  hnswlib runs in inner-product space on our unit vectors, so it holds the same float32 bytes as
  our copy, and each save writes our copy into the graph file's records (``hnsw_file.stamp``).
* Forget: ``remove`` zeroes our float32 copy at once; hnswlib keeps a tombstoned vector in memory (it
  still routes searches) until ``rebuild()``, but ``save()`` overwrites it in the file it writes
  (``hnsw_file``), so no saved file holds a removed vector (replaced files are unlinked, not shredded).
* Search scans our float32 copy exactly when few candidates remain (small index, selective ``allow``),
  when hnswlib finds fewer than k, or when the k-th place is tied. Scores are cosine similarities from
  our copy; equal scores rank the lower label first.
* Concurrent searches; add/remove/resize/swap exclude them (hnswlib crashes on a search during an insert).
* ``save``/``load`` keep a manifest with owner ``meta``; ``load`` checks format, shape, meta and
  checksums before hnswlib reads a byte (``hnsw_load``), and raises IndexStale naming every difference.
* M and ef_construction are the graph's: ``M``/``ef_construction`` given here build every new graph
  (a fresh index, ``rebuild()``), while a loaded graph keeps the ones it was built with, so a changed
  default never forces a rebuild at open (8 minutes at 1M, M=32); its search width follows its own M.
"""

from __future__ import annotations

import errno
import logging
import shutil
import threading
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import hnswlib
import numpy as np

from mempager.errors import ConfigError, DimensionMismatch, IndexStale, InvalidInput, NonFiniteVector
from mempager.index import hnsw_file, hnsw_load
from mempager.index import manifest as persist
from mempager.index.hnsw_graph import GraphState, ShortResult, Width, check_int, normalised, padded, top, translated
from mempager.index.hnsw_rows import RESIDENT_MAX_ROWS, MemoryRows
from mempager.index.labelmap import LabelRows
from mempager.index.manifest import Manifest
from mempager.index.rwlock import RWLock
from mempager.types import FloatMatrix, LabelArray, as_labels, as_vectors

log = logging.getLogger("mempager.hnsw")
KIND = "hnsw"
_PREFIXES = ("hnsw", "rows", "vectors")  # vectors: the files of older saves (``hnsw_load``)
_CHUNK = 4096  # rows added per write-lock hold, so searches interleave with a big load
_SELECTIVE_SHARE = 0.05  # below this share of live rows, a filtered graph walk is slower than a scan


class HnswIndex:
    """VectorIndex over hnswlib in cosine space. See the module docstring for behaviours."""

    def __init__(
        self,
        dim: int,
        *,
        M: int = 16,
        ef_construction: int = 200,
        ef: int | None = 128,  # the least search width (None: as measured for the graph's M)
        ef_per_million: int | None = 0,  # ef grows with the live rows (None: as measured for the graph's M)
        max_deleted_share: float = 0.2,
        initial_capacity: int = 1024,
        exact_below: int = 1024,
        meta: Mapping[str, Any] | None = None,
        resident_max_rows: int = RESIDENT_MAX_ROWS,
    ) -> None:
        for name, value, low in (("dim", dim, 1), ("M", M, 2), ("ef_construction", ef_construction, 1)):
            check_int(name, value, low)
        if ef_per_million is not None:
            check_int("ef_per_million", ef_per_million, 0)
        if ef is not None:
            check_int("ef", ef, 1)
        for name, value, low in (
            ("initial_capacity", initial_capacity, 1),
            ("exact_below", exact_below, 0),
        ):
            check_int(name, value, low)
        if not 0.0 < max_deleted_share < 1.0:
            raise ConfigError(f"HnswIndex max_deleted_share must be in (0, 1), got {max_deleted_share!r}")
        self._dim, self._M, self._ef_construction = dim, M, ef_construction
        self._width = Width(ef, ef_per_million)
        self._max_deleted_share = max_deleted_share
        self._initial_capacity = initial_capacity
        self._exact_below = exact_below
        self._resident_max_rows = resident_max_rows  # above it, saved rows are read from the file
        self.meta: dict[str, Any] = persist.normalise_meta(meta or {})  # saved by save(), checked by load()
        self._rw = RWLock()
        self._mutate = threading.Lock()  # one mutation (add/remove/rebuild/load/save) at a time
        self._state = self._new_state(initial_capacity)

    # -- properties -----------------------------------------------------------------------------
    @property
    def dim(self) -> int:
        return self._dim

    @property
    def M(self) -> int:
        """The graph's M (a loaded graph's own; ``rebuild()`` builds with the M given at construction)."""
        return self._state.m

    @property
    def ef_construction(self) -> int:
        return self._state.ef_construction

    @property
    def ef(self) -> int:
        """The least search width in use (for the graph's M, unless one was set); a large graph
        searches wider (``ef_per_million``)."""
        return self._width.floor_for(self._state.m)

    @ef.setter
    def ef(self, value: int | None) -> None:
        if value is not None:
            check_int("ef", value, 1)
        self._set_width(replace(self._width, floor=value))

    @property
    def ef_per_million(self) -> int:
        """The search width per million live vectors in use (for the graph's M, unless one was set)."""
        return self._width.per_million_for(self._state.m)

    @ef_per_million.setter
    def ef_per_million(self, value: int | None) -> None:
        if value is not None:
            check_int("ef_per_million", value, 0)
        self._set_width(replace(self._width, per_million=value))

    @property
    def search_ef(self) -> int:
        """The search width in use (``hnsw_graph.Width``)."""
        return self._state.ef

    def _set_width(self, width: Width) -> None:
        with self._rw.write():  # hnswlib reads ef during every search
            self._width = width
            self._state.tune(width)

    def __len__(self) -> int:
        return len(self._state.rows)

    def __contains__(self, label: object) -> bool:
        if type(label) is int:  # the common case, without the conversions below
            return label in self._state.rows
        return isinstance(label, (int, np.integer)) and int(label) in self._state.rows

    def labels(self) -> LabelArray:
        """Live labels, ascending."""
        with self._rw.read():
            state = self._state
            return np.sort(state.row_labels[: state.size][state.live[: state.size]])

    def get_vectors(self, labels: Iterable[int]) -> FloatMatrix:
        """The stored (unit-normalised) vectors; KeyError names the first label not in the index."""
        with self._rw.read():
            state = self._state
            wanted = np.fromiter((int(label) for label in labels), np.int64)
            rows = state.rows.rows_of(wanted)
            missing = np.flatnonzero(rows < 0)
            if len(missing):
                raise KeyError(f"label {int(wanted[missing[0]])} is not in the index")
            return state.vectors.take(rows)

    def deleted_share(self) -> float:
        state = self._state
        return state.deleted / state.size if state.size else 0.0

    def needs_rebuild(self) -> bool:
        return self.deleted_share() > self._max_deleted_share

    # -- writes ---------------------------------------------------------------------------------
    def add(self, labels: LabelArray, vectors: FloatMatrix) -> None:
        """Insert or replace. Re-adding an identical vector is a no-op; a batch's last duplicate wins."""
        labels_arr, unit = self._prepare(labels, vectors)
        with self._mutate:
            state = self._state
            old = state.rows.rows_of(labels_arr)
            present = old >= 0
            same = np.zeros(len(old), dtype=bool)
            same[present] = (state.vectors.take(old[present]) == unit[present]).all(axis=1)
            labels_arr, unit, old = labels_arr[~same], unit[~same], old[~same]
            for start in range(0, len(labels_arr), _CHUNK):
                part = slice(start, start + _CHUNK)
                with self._rw.write():
                    self._insert(state, labels_arr[part], unit[part], old[part])

    def _prepare(self, labels: LabelArray, vectors: FloatMatrix) -> tuple[LabelArray, FloatMatrix]:
        labels_arr = as_labels(labels)
        matrix = as_vectors(vectors)
        if matrix.ndim != 2 or matrix.shape[1] != self._dim:
            raise DimensionMismatch(
                f"hnsw index holds {self._dim}-d vectors, got shape {matrix.shape}; "
                "vectors of another model belong in that model's index"
            )
        if matrix.shape[0] != labels_arr.size:
            raise InvalidInput(f"{labels_arr.size} labels for {matrix.shape[0]} vectors")
        if not np.isfinite(matrix).all():
            raise NonFiniteVector("a vector holds NaN or infinity; it was not indexed")
        _, last_seen = np.unique(labels_arr[::-1], return_index=True)
        keep = np.sort(labels_arr.size - 1 - last_seen)
        return labels_arr[keep], normalised(matrix[keep])

    def _insert(self, state: GraphState, labels: LabelArray, unit: FloatMatrix, old: LabelArray) -> None:
        """Append rows for ``labels`` and tombstone the rows they replace. Caller holds the write lock."""
        n = len(labels)
        self._reserve(state, state.size + n)
        rows = np.arange(state.size, state.size + n, dtype=np.int64)
        with translated("add vectors"):
            # hnswlib's thread pool costs more than it saves on small batches.
            state.graph.add_items(unit, rows, num_threads=-1 if n >= 256 else 1)
        state.vectors.put(rows, unit)
        state.row_labels[rows], state.live[rows] = labels, True
        state.size += n
        for row in old[old >= 0].tolist():
            self._tombstone(state, row)
        state.rows.set_many(labels, rows)
        state.tune(self._width)

    def _tombstone(self, state: GraphState, row: int) -> None:
        with translated("delete a vector"):
            state.graph.mark_deleted(row)
        state.vectors.zero(row)  # forget must really erase our copy
        state.live[row] = False

    def _reserve(self, state: GraphState, needed: int) -> None:
        capacity = len(state.live)
        if needed <= capacity:
            return
        capacity = max(needed, 2 * capacity)
        with translated("grow the index"):
            state.graph.resize_index(capacity)
        grown = len(state.live)
        state.vectors.reserve(capacity)
        state.row_labels = np.concatenate([state.row_labels, np.zeros(capacity - grown, np.int64)])
        state.live = np.concatenate([state.live, np.zeros(capacity - grown, bool)])

    def remove(self, labels: Iterable[int]) -> None:
        """Tombstone ``labels``; unknown labels are ignored. Never rebuilds (see ``needs_rebuild``)."""
        wanted = [int(x) for x in labels]
        with self._mutate, self._rw.write():
            state = self._state
            for label in wanted:
                row = state.rows.pop(label, None)
                if row is not None:
                    self._tombstone(state, row)
            state.tune(self._width)

    def rebuild(self) -> None:
        """Compact into a fresh graph from the live vectors, purging tombstones and their bytes."""
        with self._mutate:
            old = self._state
            live_rows = np.sort(old.rows.rows())
            fresh = self._new_state(max(len(live_rows), self._initial_capacity))
            # Searches keep using the old graph meanwhile: nothing mutates it while we hold _mutate.
            for start in range(0, len(live_rows), _CHUNK):
                part = live_rows[start : start + _CHUNK]
                self._insert(fresh, old.row_labels[part], old.vectors.take(part), np.full(len(part), -1))
            with self._rw.write():
                self._state = fresh
            old.vectors.close()

    def _new_state(self, capacity: int) -> GraphState:
        graph = hnswlib.Index(space="ip", dim=self._dim)  # on unit vectors (``normalised``): cosine
        with translated("create the index"):
            graph.init_index(max_elements=capacity, M=self._M, ef_construction=self._ef_construction)
        state = GraphState(
            graph=graph,
            vectors=MemoryRows(np.zeros((capacity, self._dim), np.float32)),
            row_labels=np.zeros(capacity, np.int64),
            live=np.zeros(capacity, bool),
            rows=LabelRows(),
        )
        state.tune(self._width)
        return state

    # -- search ---------------------------------------------------------------------------------
    def search(self, vector: FloatMatrix, k: int, allow: frozenset[int] | None = None) -> list[tuple[int, float]]:
        """Best first by cosine similarity, at most ``k`` (clamped), only labels in ``allow`` if given."""
        query = self._query(vector)
        if k <= 0:
            return []
        with self._rw.read():
            state = self._state
            live = len(state.rows)
            # len(allow) bounds the allowed live labels without an O(|allow|) pass per query;
            # dead labels in ``allow`` at worst send us to the exact scan.
            n = live if allow is None else min(len(allow), live)
            if n == 0:
                return []
            k = min(k, n)
            if n <= self._exact_below or n < _SELECTIVE_SHARE * live:
                rows, scores = self._scan(state, query, k, allow), None
            else:
                rows, scores = self._walk(state, query, k, n, allow)
            if scores is None:  # the exact scan's rows: scored again on their own, as always
                scores = state.vectors.take(rows) @ query
            labels = state.row_labels[rows]
            best = top(scores, labels, k)
            return list(zip(labels[best].tolist(), scores[best].tolist(), strict=True))

    def _query(self, vector: FloatMatrix) -> FloatMatrix:
        query = as_vectors(vector, "the query vector").reshape(-1)
        if query.shape[0] != self._dim:
            raise DimensionMismatch(f"query has {query.shape[0]} dims, index has {self._dim}")
        if not np.isfinite(query).all():
            raise NonFiniteVector("the query vector holds NaN or infinity")
        unit: FloatMatrix = normalised(query.reshape(1, -1))[0]
        return unit

    def _scan(self, state: GraphState, query: FloatMatrix, k: int, allow: frozenset[int] | None) -> LabelArray:
        if allow is None:
            rows = np.flatnonzero(state.live[: state.size]).astype(np.int64)
        else:
            rows = state.rows.rows_of(np.fromiter(allow, np.int64, len(allow)))
            rows = rows[rows >= 0]
        return rows[top(state.vectors.take(rows) @ query, state.row_labels[rows], k)]

    def _walk(
        self, state: GraphState, query: FloatMatrix, k: int, n: int, allow: frozenset[int] | None
    ) -> tuple[LabelArray, FloatMatrix | None]:
        """The graph's candidate rows and their scores (None: an exact scan's rows, not scored)."""
        # One extra neighbour shows whether the k-th place is tied; the graph cannot say which tied
        # label is lowest, so a tie at the cut (duplicate vectors) is settled by a scan.
        row_labels = state.row_labels

        def accept(row: int) -> bool:  # hnswlib skips tombstones before it asks
            return allow is not None and row_labels[row] in allow

        try:
            with translated("search"):
                # hnswlib searches with max(ef, k) itself, so a k above ef needs no set_ef dance.
                found, _ = state.graph.knn_query(
                    query, k=min(k + 1, n), num_threads=1, filter=None if allow is None else accept
                )
        except ShortResult:
            # Tombstones or a filter left hnswlib short of k; the exact answer is still cheap to get.
            return self._scan(state, query, k, allow), None
        rows = np.asarray(found[0], dtype=np.int64)
        rows = rows[state.live[rows]]  # hnswlib never returns tombstones; belt and braces
        scores = state.vectors.take(rows) @ query
        ranked = np.sort(scores)[::-1]
        if len(ranked) > k and ranked[k] == ranked[k - 1]:
            return self._scan(state, query, k, allow), None
        return rows, scores

    # -- persistence ----------------------------------------------------------------------------
    def save(self, directory: Path, meta: Mapping[str, Any] | None = None) -> None:
        """Write the graph (holding our vectors), the rows file and (last) the manifest, each atomically and durably.

        ``meta`` (default: ``self.meta``) goes into the manifest and becomes ``self.meta``.
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        meta_out = persist.normalise_meta(self.meta if meta is None else meta)
        with self._mutate:  # a consistent snapshot; searches are read-only and may continue
            state = self._state
            stamped: list[hnsw_file.Stamped] = []
            graph_file = persist.write_content_file(
                directory, "hnsw", ".bin", lambda path: stamped.append(self._write_graph(state, path))
            )
            rows_file = persist.write_content_file(
                directory,
                "rows",
                ".bin",
                lambda path: hnsw_load.write_rows_file(
                    path, state.row_labels[: state.size], stamped[0], state.live[: state.size]
                ),
            )
            persist.fsync_dir(directory)
            manifest = Manifest(
                kind=KIND,
                dim=self._dim,
                M=state.m,
                ef_construction=state.ef_construction,
                count=len(state.rows),
                rows=state.size,
                deleted=state.deleted,
                max_label=int(state.rows.labels()[-1]) if state.rows else None,
                files={"index": graph_file, "rows": rows_file},
                meta=meta_out,
            )
            persist.write_manifest(directory, manifest)
            persist.remove_unreferenced(directory, manifest, _PREFIXES)
            self.meta = meta_out
            if state.size > self._resident_max_rows:  # from now on, read saved rows from the graph just written
                graph_path = directory / graph_file.name
                with self._rw.write():
                    old = state.vectors
                    state.vectors = hnsw_load.file_rows(
                        graph_path, stamped[0].layout, stamped[0].record_of, self._dim, len(state.live), state.live
                    )
                old.close()

    def _write_graph(self, state: GraphState, path: Path) -> hnsw_file.Stamped:
        """hnswlib's file with our copy of every row in its records and every tombstone's vector
        overwritten, before the file is hashed and renamed into place: a forgotten memory's vector
        never reaches a saved index, and the file's vectors are the ones we score with (an index
        loaded from an older save holds hnswlib's cosine-normalised copies, a few ulps off ours)."""
        with translated("save the graph"):
            state.graph.save_index(str(path))
        if path.stat().st_size == 0:  # hnswlib does not check its writes: on a full disk it leaves 0 bytes
            free = shutil.disk_usage(path.parent).free
            code = errno.ENOSPC if free < 1 << 20 else errno.EIO
            raise OSError(code, f"hnswlib wrote nothing to {path} ({free} bytes free on its disk)")
        _, blocks, live = state.snapshot()
        return hnsw_file.stamp(path, self._dim, blocks, live)

    def load(self, directory: Path, expect_meta: Mapping[str, Any] | None = None) -> None:
        """Replace the contents with a saved index, or raise IndexStale saying what differs.

        ``expect_meta`` (default: ``self.meta``) must match the saved meta key by key; afterwards
        ``self.meta`` is the saved meta.
        """
        directory = Path(directory)
        manifest = persist.read_manifest(directory)
        if manifest is None:
            raise IndexStale(
                f"no manifest in {directory}: the index was never saved there or its save "
                "did not finish; rebuild it from the store"
            )
        ours = {"kind": KIND, "dim": self._dim}  # M and ef_construction: the saved graph's own
        hnsw_load.check_manifest(manifest, ours, self.meta if expect_meta is None else expect_meta, directory)
        if (manifest.M, manifest.ef_construction) != (self._M, self._ef_construction):
            log.info(
                "the saved graph in %s keeps M=%d, ef_construction=%d until it is rebuilt (then M=%d, "
                "ef_construction=%d; removing the directory rebuilds it at the next open)",
                directory, manifest.M, manifest.ef_construction, self._M, self._ef_construction,
            )
        with self._mutate:
            fresh = self._read(directory, manifest)
            with self._rw.write():
                old, self._state = self._state, fresh
            old.vectors.close()
            self.meta = dict(manifest.meta)

    def _read(self, directory: Path, manifest: Manifest) -> GraphState:
        # Checksums first: a truncated or bit-flipped file must never reach hnswlib (it can crash).
        n = manifest.rows
        capacity = max(n + 1024, n * 5 // 4, 1)  # headroom: the first add after opening does not resize
        checked = hnsw_load.check(directory, manifest, self._dim, resident=n <= self._resident_max_rows)
        graph = self._graph_of(checked, capacity)
        if graph.element_count != n:
            raise IndexStale(f"{checked.graph} holds {graph.element_count} rows, the manifest says {n}; rebuild it")
        if (graph.M, graph.ef_construction) != (manifest.M, manifest.ef_construction):
            raise IndexStale(
                f"{checked.graph} was built with M={graph.M}, ef_construction={graph.ef_construction}, the "
                f"manifest says M={manifest.M}, ef_construction={manifest.ef_construction}; rebuild it"
            )
        labels, live = checked.labels, checked.live
        rows = LabelRows()
        rows.set_many(labels[live], np.flatnonzero(live))
        state = GraphState(graph, checked.rows(capacity), padded(labels, capacity), padded(live, capacity), rows, n)
        state.tune(self._width)  # hnswlib does not save ef
        return state

    def _graph_of(self, checked: hnsw_load.Checked, capacity: int) -> Any:
        """hnswlib's graph of a checked save: restored from its state (``hnsw_state``), or read with
        ``load_index`` (an older save, or a state this hnswlib refuses)."""
        if checked.state is not None:
            try:
                with checked.state(capacity) as state:
                    graph = hnswlib.Index.__new__(hnswlib.Index)
                    graph.__setstate__((state,))
                    return graph
            except (RuntimeError, ValueError, TypeError) as exc:
                log.warning("hnswlib refused the saved graph's state (%s); reading %s instead", exc, checked.graph)
        graph = hnswlib.Index(space="ip", dim=self._dim)
        with translated(f"load {checked.graph}"):
            graph.load_index(str(checked.graph), max_elements=capacity)
        return graph
