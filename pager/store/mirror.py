"""A columnar in-process mirror of one actor's memories, for the hot read path.

DuckDB answers point look-ups in milliseconds; a page fault needs them in microseconds. The
embedded store has exactly one writing process, and every write goes through the store object
that owns this table, so a write-through mirror is coherent: the store applies each committed
change here, and on any doubt it drops the table and reloads it from the file.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timezone
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt

from mempager.errors import StoreError
from mempager.index.labelmap import LabelRows
from mempager.protocols import SalienceParams
from mempager.store.hexcolumn import HexColumn
from mempager.store.mirror_load import HASH_CHARS, ID_CHARS, TYPES, decode
from mempager.store.time_order import TimeOrder
from mempager.types import Memory, MemoryType, Source
from mempager.validate import DIGEST_BITS, content_digest, make_uri

TYPE_CODE = {t: i for i, t in enumerate(TYPES)}
_NUMERIC = {
    "created": np.float64,
    "updated": np.float64,
    "accessed": np.float64,
    "valid_until": np.float64,
    "importance": np.float64,
    "strength": np.float64,
    "confidence": np.float64,
    "access_count": np.int64,
    "type": np.int8,
    "alive": np.bool_,
    "superseded": np.bool_,
}
_OBJECT = ("text", "source", "scope", "tags", "metadata", "superseded_by")
T = TypeVar("T")


def epoch(value: datetime | None) -> float:
    if value is None:
        return float("nan")
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.timestamp()


def _epochs(values: list[datetime | None]) -> list[float]:
    """``epoch`` of each; a batch written at one moment shares its datetime objects, converted once."""
    memo: dict[int, float] = {}
    out = []
    for value in values:
        key = id(value)
        got = memo.get(key)
        if got is None:
            got = memo[key] = epoch(value)
        out.append(got)
    return out


def _meta_json(metadata: Any) -> str:
    return json.dumps(dict(metadata), sort_keys=True) if metadata else "{}"


def _dt(value: float) -> datetime:
    return datetime.fromtimestamp(value, tz=timezone.utc)


class ActorTable:
    def __init__(self, actor: str, capacity: int = 1024) -> None:
        self.actor = actor
        self.lock = threading.RLock()
        self.rows = LabelRows()  # label -> row (4 bytes a label, not a dict's ~100)
        # memory id -> label; after a bulk load, built on the first look-up by id (a million ids cost
        # ~1 s and ~100 MB to index, and serving pages never looks one up)
        self._ids: dict[str, int] | None = {}
        self.labels = np.full(capacity, -1, dtype=np.int64)
        self.num: dict[str, np.ndarray] = {name: np.zeros(capacity, dtype=dtype) for name, dtype in _NUMERIC.items()}
        # numpy object arrays, not lists: an ndarray is invisible to Python's cyclic garbage collector,
        # whereas every full collection in the process would walk each element of a list column
        # (8 columns x rows: ~60 ms per collection at 300k memories, several per large batch).
        self.obj: dict[str, np.ndarray] = {name: np.full(capacity, None, dtype=object) for name in _OBJECT}
        # ids and content hashes packed, not one string each (store.hexcolumn)
        self.id_col, self.hash_col = HexColumn(ID_CHARS, capacity), HexColumn(HASH_CHARS, capacity)
        self.size = 0
        # Built Memory objects (immutable) by label; dropped whenever the row changes.
        self._built: dict[int, Memory] = {}
        # Live rows of each type code, for ``of_types`` (the pinned block asks for five small types
        # every page; scanning a million type codes five times was most of a page's cost). Dropped
        # for a type whenever a row of it is written or removed.
        self._of_type: dict[int, np.ndarray] = {}
        # Live rows by creation time, for the time lane's windows (a scan of every row's time cost
        # ~1.5 ms a dated question at a million memories); told of every write that moves a time.
        self._time = TimeOrder()

    def __len__(self) -> int:
        return len(self.rows)

    def _grow(self, need: int) -> None:
        cap = len(self.labels)
        if self.size + need <= cap:
            return
        new = max(cap * 2, self.size + need)
        self.labels = np.concatenate([self.labels, np.full(new - cap, -1, dtype=np.int64)])
        for name, arr in self.num.items():
            self.num[name] = np.concatenate([arr, np.zeros(new - cap, dtype=arr.dtype)])
        for name, column in self.obj.items():
            self.obj[name] = np.concatenate([column, np.full(new - cap, None, dtype=object)])
        self.id_col.grow(new)
        self.hash_col.grow(new)

    def upsert(self, memories: Iterable[Memory]) -> None:
        """Insert new memories or overwrite the row of an existing label."""
        batch = list(memories)
        with self.lock:
            self._grow(len(batch))
            if len(batch) < 64:
                for m in batch:
                    self._write_row(self._row_of(m), m)
                return
            rows = self._rows_of(batch)
            for m in batch:
                self._built.pop(m.label, None)
            self._types_changed(self.num["type"][rows].tolist() + [TYPE_CODE[m.type] for m in batch])
            # a batch is written column by column: one numpy assignment per column, not per cell
            n = self.num
            before = n["created"][rows].copy()
            for name, attr in (
                ("created", "created_at"),
                ("updated", "updated_at"),
                ("accessed", "last_accessed_at"),
                ("valid_until", "valid_until"),
            ):
                n[name][rows] = _epochs([getattr(m, attr) for m in batch])
            for name in ("importance", "strength", "confidence", "access_count"):
                n[name][rows] = [getattr(m, name) for m in batch]
            self._time.moved(rows, before, n["created"][rows])
            n["type"][rows] = [TYPE_CODE[m.type] for m in batch]
            n["alive"][rows] = True
            n["superseded"][rows] = [m.superseded_by is not None for m in batch]
            for row, m in zip(rows.tolist(), batch, strict=True):
                self._write_objects(row, m)
            self.id_col.set_many(rows, [m.id for m in batch])
            self.hash_col.set_many(rows, [m.content_hash for m in batch])

    def _rows_of(self, batch: list[Memory]) -> np.ndarray:
        """The rows of a batch's labels, new labels appended in order (lock held, room grown)."""
        labels = np.fromiter((m.label for m in batch), np.int64, len(batch))
        rows = self.rows.rows_of(labels)
        fresh = np.flatnonzero(rows < 0)
        if len(np.unique(labels[fresh])) != len(fresh):  # a new label twice in one batch: one row
            return np.fromiter((self._row_of(m) for m in batch), np.int64, len(batch))
        rows[fresh] = np.arange(self.size, self.size + len(fresh))
        self.labels[rows[fresh]] = labels[fresh]
        self.rows.set_many(labels[fresh], rows[fresh])
        self.size += len(fresh)
        if self._ids is not None:
            self._ids.update(zip([m.id for m in batch], labels.tolist(), strict=True))
        return rows

    def _row_of(self, m: Memory) -> int:
        """The row of ``m``'s label, appended if new (lock held, room already grown)."""
        row = self.rows.get(m.label)
        if row is None:
            row = self.size
            self.size += 1
            self.rows[m.label] = row
            self.labels[row] = m.label
        if self._ids is not None:
            self._ids[m.id] = m.label
        return row

    def load(self, cols: dict[str, Any]) -> None:
        """Bulk fill from DuckDB's ``fetchnumpy()`` of ``mirror_load.MIRROR_QUERY`` (decoded there)."""
        got = decode(cols)
        count = len(got.labels)
        with self.lock:
            self._grow(count)
            lo, hi = self.size, self.size + count
            self.labels[lo:hi] = got.labels
            for name, values in got.num.items():
                self.num[name][lo:hi] = values
            self.num["alive"][lo:hi] = True
            for name, values in got.obj.items():
                self.obj[name][lo:hi] = values
            self.id_col.load(lo, cols, "id")
            self.hash_col.load(lo, cols, "content_hash")
            self.rows.set_many(got.labels, np.arange(lo, hi))
            self._ids = None  # rebuilt when first needed
            self.size = hi
            self._of_type.clear()

    def _write_row(self, row: int, m: Memory) -> None:
        self._built.pop(m.label, None)
        self._types_changed((int(self.num["type"][row]), TYPE_CODE[m.type]))  # a new row reads code 0: harmless
        n = self.num
        if self._time.covers(row):  # an existing row: its place in the time order may move
            before, after = n["created"][row : row + 1].copy(), np.array([epoch(m.created_at)])
            self._time.moved(np.array([row], np.int64), before, after)
        n["created"][row], n["updated"][row] = epoch(m.created_at), epoch(m.updated_at)
        n["accessed"][row], n["valid_until"][row] = epoch(m.last_accessed_at), epoch(m.valid_until)
        n["importance"][row], n["strength"][row], n["confidence"][row] = m.importance, m.strength, m.confidence
        n["access_count"][row], n["type"][row] = m.access_count, TYPE_CODE[m.type]
        n["alive"][row], n["superseded"][row] = True, m.superseded_by is not None
        self._write_objects(row, m)
        self.id_col.set(row, m.id)
        self.hash_col.set(row, m.content_hash)

    def _write_objects(self, row: int, m: Memory) -> None:
        o = self.obj
        o["text"][row], o["source"][row], o["scope"][row] = m.text, m.source, m.scope
        o["tags"][row] = tuple(m.tags)
        o["metadata"][row] = _meta_json(m.metadata)
        o["superseded_by"][row] = m.superseded_by

    def remove(self, labels: Iterable[int]) -> None:
        with self.lock:
            for label in labels:
                row = self.rows.pop(int(label), None)
                self._built.pop(int(label), None)
                if row is None:
                    continue
                if self._ids is not None:
                    self._ids.pop(self.id_col.get(row), None)  # type: ignore[arg-type]
                self._types_changed((int(self.num["type"][row]),))
                self.labels[row] = -1
                self.num["alive"][row] = False
                for column in self.obj.values():
                    column[row] = None  # forgotten text does not linger in this process
                self.id_col.clear(row)
                self.hash_col.clear(row)

    def get(self, label: int) -> Memory | None:
        with self.lock:
            row = self.rows.get(int(label))
            return None if row is None else self._memory(row)

    def uris(self, labels: Iterable[int]) -> dict[int, str]:
        with self.lock:
            where = self.rows
            found = [(int(label), row) for label in labels if (row := where.get(int(label))) is not None]
            if not found:
                return {}
            idx = np.fromiter((row for _, row in found), np.int64, len(found))
            types, ids = self.num["type"][idx].tolist(), self._ids_of(idx)
        actor = self.actor
        return {
            label: make_uri(actor, TYPES[code], memory_id)
            for (label, _), code, memory_id in zip(found, types, ids, strict=True)
        }

    @property
    def ids(self) -> dict[str, int]:
        """memory id -> label of every live row."""
        found = self._ids
        if found is None:
            with self.lock:
                found = self._ids
                if found is None:
                    live = np.flatnonzero(self.num["alive"][: self.size])
                    found = dict(zip(self._ids_of(live), self.labels[live].tolist(), strict=True))
                    self._ids = found
        return found

    def _ids_of(self, rows: npt.NDArray[np.int64]) -> list[str]:
        """The memory id of each live row (lock held)."""
        ids = self.id_col.take(rows)
        if None in ids:  # a live row always has one
            raise StoreError(f"the mirror of {self.actor!r} lost a memory id; reopen the store")
        return cast(list[str], ids)

    def label_of(self, memory_id: str) -> int | None:
        return self.ids.get(memory_id)

    def get_many(self, labels: Sequence[int]) -> dict[int, Memory]:
        with self.lock:
            out = {}
            for label in labels:
                row = self.rows.get(int(label))
                if row is not None:
                    out[int(label)] = self._memory(row)
            return out

    def rows_for(
        self, labels: Sequence[int], make: Callable[[int, str, MemoryType, str, Source, float, str | None, float], T]
    ) -> dict[int, T]:
        """What packing reads of each label found, as ``make(label, uri, type, text, source, created
        seconds, superseded_by, valid_until seconds or NaN)``: a page fault's candidates without a
        ``Memory`` built for each (``lanes.rows``). Columns are gathered once for the whole batch."""
        with self.lock:
            where = self.rows
            found = [(int(label), row) for label in labels if (row := where.get(int(label))) is not None]
            if not found:
                return {}
            idx = np.fromiter((row for _, row in found), np.int64, len(found))
            n, o = self.num, self.obj
            types, created, until = n["type"][idx].tolist(), n["created"][idx].tolist(), n["valid_until"][idx].tolist()
            ids, texts, sources = self._ids_of(idx), o["text"][idx].tolist(), o["source"][idx].tolist()
            superseded = o["superseded_by"][idx].tolist()
        actor, out = self.actor, {}
        for (label, _), code, memory_id, text, source, at, by, end in zip(
            found, types, ids, texts, sources, created, superseded, until, strict=True
        ):
            mtype = TYPES[code]
            out[label] = make(label, make_uri(actor, mtype, memory_id), mtype, text, source, at, by, end)
        return out

    def _memory(self, row: int) -> Memory:
        label = int(self.labels[row])
        built = self._built.get(label)
        if built is None:
            if len(self._built) >= 50_000:  # bounded: a cache, not a second copy of the table
                self._built.clear()
            built = self._built[label] = self._build(row)
        return built

    def _build(self, row: int) -> Memory:
        n, o = self.num, self.obj
        mtype = TYPES[int(n["type"][row])]
        until = float(n["valid_until"][row])
        memory_id, chash = self.id_col.get(row), self.hash_col.get(row)
        if memory_id is None or chash is None:  # a live row always has both
            raise StoreError(f"the mirror of {self.actor!r} lost row {row}; reopen the store")
        return Memory(
            label=int(self.labels[row]),
            id=memory_id,
            uri=make_uri(self.actor, mtype, memory_id),
            actor=self.actor,
            scope=o["scope"][row],
            type=mtype,
            text=o["text"][row],
            source=o["source"][row],
            confidence=float(n["confidence"][row]),
            importance=float(n["importance"][row]),
            strength=float(n["strength"][row]),
            created_at=_dt(float(n["created"][row])),
            updated_at=_dt(float(n["updated"][row])),
            last_accessed_at=_dt(float(n["accessed"][row])),
            access_count=int(n["access_count"][row]),
            tags=o["tags"][row],
            metadata=json.loads(o["metadata"][row]),
            content_hash=chash,
            superseded_by=o["superseded_by"][row],
            valid_until=None if until != until else _dt(until),
        )

    def salience(
        self,
        types: Sequence[MemoryType],
        params: SalienceParams,
        limit: int,
        only: Iterable[int] | None = None,
    ) -> list[tuple[int, float]]:
        """The salience score of ``pager.salience`` over current memories, best first."""
        now = params.now.timestamp()
        with self.lock:
            if only is not None:
                rows = self.rows.rows_of(np.fromiter(only, np.int64))
                rows = rows[rows >= 0]
            else:
                rows = np.flatnonzero(self.num["alive"][: self.size])
            if rows.size == 0:
                return []
            num = self.num
            code = num["type"][rows]
            wanted = np.zeros(len(TYPES), bool)  # a lookup by type code: np.isin costs more on every page
            wanted[[TYPE_CODE[t] for t in types]] = True
            keep = wanted[code] & ~num["superseded"][rows]
            keep &= ~(num["valid_until"][rows] <= now)  # NaN (no expiry) compares False
            rows, code = rows[keep], code[keep]  # only what can rank is read further (a page asks ~100 rows)
            if rows.size == 0:
                return []
            labels = self.labels[rows]
            created, importance = num["created"][rows], num["importance"][rows]
            # a term whose weight is 0 (the prior's access and strength) is not read: adding 0.0 changes no score
            strength = (num["strength"][rows], num["confidence"][rows]) if params.w_strength else None
            accesses = num["access_count"][rows] if params.w_access else None
        half = np.array([params.half_life_days.get(t, params.default_half_life_days) for t in TYPES])
        age_days = np.maximum(0.0, now - created) / 86400.0
        score = params.w_recency * np.power(0.5, age_days / half[code]) + params.w_importance * importance
        if strength is not None:
            score = score + params.w_strength * strength[0] * strength[1]  # the order of the products kept
        if accesses is not None:
            score = score + params.w_access * accesses / (accesses + 5.0)
        idx = np.arange(rows.size)
        if idx.size > limit:
            idx = idx[np.argpartition(-score, limit - 1)[:limit]]
        order = idx[np.lexsort((-labels[idx], -score[idx]))]  # ties: newer label first, as in SQL
        return list(zip(labels[order].tolist(), score[order].tolist(), strict=True))

    def _types_changed(self, codes: Iterable[int]) -> None:
        for code in set(codes):
            self._of_type.pop(code, None)

    def _rows_of_type(self, code: int) -> np.ndarray:
        """Live rows of one type code, ascending (lock held)."""
        rows = self._of_type.get(code)
        if rows is None:
            n = self.size
            rows = self._of_type[code] = np.flatnonzero(self.num["alive"][:n] & (self.num["type"][:n] == code))
        return rows

    def of_types(self, types: Sequence[MemoryType], newest_first: bool, limit: int) -> list[Memory]:
        """Memories of these types by creation time (ties by label), without touching SQL."""
        with self.lock:
            codes = sorted({TYPE_CODE[t] for t in types})
            if not codes:
                return []
            rows = np.concatenate([self._rows_of_type(code) for code in codes])
            created, labels = self.num["created"][rows], self.labels[rows]
            order = np.lexsort((-labels, -created)) if newest_first else np.lexsort((labels, created))
            return [self._memory(int(row)) for row in rows[order[:limit]]]

    def created_of_types(self, types: Sequence[MemoryType]) -> tuple[np.ndarray, np.ndarray]:
        """(labels, created_at epoch seconds) of the live memories of these types, as arrays."""
        with self.lock:
            codes = sorted({TYPE_CODE[t] for t in types})
            if not codes:
                return np.zeros(0, np.int64), np.zeros(0)
            rows = np.concatenate([self._rows_of_type(code) for code in codes])
            return self.labels[rows].astype(np.int64), self.num["created"][rows].astype(np.float64)

    def created_between(self, since: float, until: float, limit: int) -> np.ndarray:
        """Labels of the live memories created in [since, until) (epoch seconds), newest first."""
        with self.lock:
            rows = self._time.between(
                since, until, limit, self.size, self.num["created"], self.num["alive"], self.labels
            )
            return self.labels[rows].astype(np.int64)

    def created_of(self, labels: Sequence[int]) -> np.ndarray:
        """The creation time (epoch seconds) of each label; NaN where the store holds none."""
        with self.lock:
            rows = self.rows.rows_of(np.asarray(labels, np.int64))
            out = np.full(len(rows), np.nan)
            held = rows >= 0
            out[held] = self.num["created"][rows[held]]
            return out

    def created_span(self) -> tuple[float, float] | None:
        """The oldest and newest creation time (epoch seconds) of the live memories; None if none."""
        with self.lock:
            return self._time.span(self.size, self.num["created"], self.num["alive"], self.labels)

    def content_hashes(self) -> dict[int, str]:
        with self.lock:
            hashes = self.hash_col.take(self.rows.rows())
            return dict(zip(self.rows.labels().tolist(), hashes, strict=True))

    def digests_of(self, labels: np.ndarray) -> npt.NDArray[np.int64]:
        """``validate.content_digest`` of each label's content hash (-1: no live row), without a
        string per label: the packed hash's leading bits, for all but the hashes that do not pack."""
        with self.lock:
            rows = self.rows.rows_of(np.asarray(labels, dtype=np.int64))
            held = np.maximum(rows, 0)
            out, odd = self.hash_col.head(held, DIGEST_BITS)
            odd_values = self.hash_col.take(held[odd])
        for i, value in zip(odd.tolist(), odd_values, strict=True):
            out[i] = content_digest(value)
        out[rows < 0] = -1
        return out

    def live_labels(self) -> np.ndarray:
        with self.lock:
            live: np.ndarray = self.labels[: self.size][self.num["alive"][: self.size]].copy()
            return live
