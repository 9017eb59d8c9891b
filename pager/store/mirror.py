"""A columnar in-process mirror of one actor's memories, for the hot read path.

DuckDB answers point look-ups in milliseconds; a page fault needs them in microseconds. The
embedded store has exactly one writing process, and every write goes through the store object
that owns this table, so a write-through mirror is coherent: the store applies each committed
change here, and on any doubt it drops the table and reloads it from the file.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np

from mempager.protocols import SalienceParams
from mempager.types import Memory, MemoryType, Scope, Source
from mempager.validate import make_uri

TYPES = list(MemoryType)
TYPE_CODE = {t: i for i, t in enumerate(TYPES)}
TYPE_CODE_BY_VALUE = {t.value: i for i, t in enumerate(TYPES)}
SOURCE_BY_VALUE = {s.value: s for s in Source}
SCOPE_BY_VALUE = {s.value: s for s in Scope}
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
_OBJECT = ("id", "text", "source", "scope", "tags", "metadata", "content_hash", "superseded_by")


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


def _nullable(column: Any) -> list[Any]:
    """DuckDB hands nullable columns over as masked arrays; masked means NULL."""
    mask = np.ma.getmaskarray(column)
    data = np.ma.getdata(column)
    return [None if m else v for v, m in zip(data.tolist(), mask.tolist(), strict=True)]


def _dt(value: float) -> datetime:
    return datetime.fromtimestamp(value, tz=timezone.utc)


class ActorTable:
    def __init__(self, actor: str, capacity: int = 1024) -> None:
        self.actor = actor
        self.lock = threading.RLock()
        self.rows: dict[int, int] = {}
        self.ids: dict[str, int] = {}  # memory id -> label
        self.labels = np.full(capacity, -1, dtype=np.int64)
        self.num: dict[str, np.ndarray] = {name: np.zeros(capacity, dtype=dtype) for name, dtype in _NUMERIC.items()}
        # numpy object arrays, not lists: an ndarray is invisible to Python's cyclic garbage collector,
        # whereas every full collection in the process would walk each element of a list column
        # (8 columns x rows: ~60 ms per collection at 300k memories, several per large batch).
        self.obj: dict[str, np.ndarray] = {name: np.full(capacity, None, dtype=object) for name in _OBJECT}
        self.size = 0
        # Built Memory objects (immutable) by label; dropped whenever the row changes.
        self._built: dict[int, Memory] = {}

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

    def upsert(self, memories: Iterable[Memory]) -> None:
        """Insert new memories or overwrite the row of an existing label."""
        batch = list(memories)
        with self.lock:
            self._grow(len(batch))
            if len(batch) < 64:
                for m in batch:
                    self._write_row(self._row_of(m), m)
                return
            rows = np.fromiter((self._row_of(m) for m in batch), np.int64, len(batch))
            for m in batch:
                self._built.pop(m.label, None)
            # a batch is written column by column: one numpy assignment per column, not per cell
            n = self.num
            for name, attr in (
                ("created", "created_at"),
                ("updated", "updated_at"),
                ("accessed", "last_accessed_at"),
                ("valid_until", "valid_until"),
            ):
                n[name][rows] = _epochs([getattr(m, attr) for m in batch])
            for name in ("importance", "strength", "confidence", "access_count"):
                n[name][rows] = [getattr(m, name) for m in batch]
            n["type"][rows] = [TYPE_CODE[m.type] for m in batch]
            n["alive"][rows] = True
            n["superseded"][rows] = [m.superseded_by is not None for m in batch]
            for row, m in zip(rows.tolist(), batch, strict=True):
                self._write_objects(row, m)

    def _row_of(self, m: Memory) -> int:
        """The row of ``m``'s label, appended if new (lock held, room already grown)."""
        row = self.rows.get(m.label)
        if row is None:
            row = self.size
            self.size += 1
            self.rows[m.label] = row
            self.labels[row] = m.label
        self.ids[m.id] = m.label
        return row

    def load(self, cols: dict[str, Any]) -> None:
        """Bulk fill from DuckDB's ``fetchnumpy()`` of MEMORY_COLUMNS (much faster than per row)."""
        count = len(cols["label"])
        with self.lock:
            self._grow(count)
            lo, hi = self.size, self.size + count
            labels = np.asarray(cols["label"], dtype=np.int64)
            self.labels[lo:hi] = labels

            def secs(name: str) -> np.ndarray:
                raw = np.ma.filled(np.ma.asarray(cols[name]).astype("datetime64[us]"), np.datetime64("NaT"))
                out = raw.astype(np.int64).astype(np.float64) / 1e6
                out[np.isnat(raw)] = np.nan
                return out

            n = self.num
            n["created"][lo:hi], n["updated"][lo:hi] = secs("created_at"), secs("updated_at")
            n["accessed"][lo:hi], n["valid_until"][lo:hi] = secs("last_accessed_at"), secs("valid_until")
            for name in ("importance", "strength", "confidence", "access_count"):
                n[name][lo:hi] = np.asarray(cols[name])
            n["type"][lo:hi] = [TYPE_CODE_BY_VALUE[t] for t in cols["type"]]  # dict look-ups: 100k rows
            n["alive"][lo:hi] = True
            superseded = _nullable(cols["superseded_by"])
            n["superseded"][lo:hi] = [x is not None for x in superseded]
            o = self.obj

            def put(name: str, values: Iterable[Any]) -> None:  # element by element: a tuple stays one value
                o[name][lo:hi] = np.fromiter(values, dtype=object, count=count)

            put("id", cols["id"])
            put("text", cols["text"])
            put("source", (SOURCE_BY_VALUE[x] for x in cols["source"]))
            put("scope", (SCOPE_BY_VALUE[x] for x in cols["scope"]))
            put("tags", (tuple(x) if x is not None else () for x in cols["tags"]))
            put("metadata", cols["metadata"])
            put("content_hash", cols["content_hash"])
            put("superseded_by", superseded)
            for i, label in enumerate(labels.tolist()):
                self.rows[label] = lo + i
                self.ids[o["id"][lo + i]] = label
            self.size = hi

    def _write_row(self, row: int, m: Memory) -> None:
        self._built.pop(m.label, None)
        n = self.num
        n["created"][row], n["updated"][row] = epoch(m.created_at), epoch(m.updated_at)
        n["accessed"][row], n["valid_until"][row] = epoch(m.last_accessed_at), epoch(m.valid_until)
        n["importance"][row], n["strength"][row], n["confidence"][row] = m.importance, m.strength, m.confidence
        n["access_count"][row], n["type"][row] = m.access_count, TYPE_CODE[m.type]
        n["alive"][row], n["superseded"][row] = True, m.superseded_by is not None
        self._write_objects(row, m)

    def _write_objects(self, row: int, m: Memory) -> None:
        o = self.obj
        o["id"][row], o["text"][row], o["source"][row], o["scope"][row] = m.id, m.text, m.source, m.scope
        o["tags"][row], o["content_hash"][row] = tuple(m.tags), m.content_hash
        o["metadata"][row] = _meta_json(m.metadata)
        o["superseded_by"][row] = m.superseded_by

    def remove(self, labels: Iterable[int]) -> None:
        with self.lock:
            for label in labels:
                row = self.rows.pop(int(label), None)
                self._built.pop(int(label), None)
                if row is None:
                    continue
                self.ids.pop(self.obj["id"][row], None)
                self.labels[row] = -1
                self.num["alive"][row] = False
                for column in self.obj.values():
                    column[row] = None  # forgotten text does not linger in this process

    def get(self, label: int) -> Memory | None:
        with self.lock:
            row = self.rows.get(int(label))
            return None if row is None else self._memory(row)

    def uris(self, labels: Iterable[int]) -> dict[int, str]:
        with self.lock:
            out = {}
            for label in labels:
                row = self.rows.get(int(label))
                if row is not None:
                    mtype = TYPES[int(self.num["type"][row])]
                    out[int(label)] = make_uri(self.actor, mtype, self.obj["id"][row])
            return out

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
        return Memory(
            label=int(self.labels[row]),
            id=o["id"][row],
            uri=make_uri(self.actor, mtype, o["id"][row]),
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
            content_hash=o["content_hash"][row],
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
        with self.lock:
            if only is not None:
                rows = np.fromiter((self.rows[x] for x in only if x in self.rows), dtype=np.int64)
            else:
                rows = np.flatnonzero(self.num["alive"][: self.size])
            if rows.size == 0:
                return []
            n = {name: arr[rows] for name, arr in self.num.items()}
            labels = self.labels[rows]
        now = params.now.timestamp()
        keep = np.isin(n["type"], [TYPE_CODE[t] for t in types]) & ~n["superseded"]
        keep &= ~(n["valid_until"] <= now)  # NaN (no expiry) compares False
        half = np.array([params.half_life_days.get(t, params.default_half_life_days) for t in TYPES])
        age_days = np.maximum(0.0, now - n["created"]) / 86400.0
        score = (
            params.w_recency * np.power(0.5, age_days / half[n["type"]])
            + params.w_importance * n["importance"]
            + params.w_strength * n["strength"] * n["confidence"]
            + params.w_access * n["access_count"] / (n["access_count"] + 5.0)
        )
        idx = np.flatnonzero(keep)
        if idx.size == 0:
            return []
        if idx.size > limit:
            idx = idx[np.argpartition(-score[idx], limit - 1)[:limit]]
        order = idx[np.lexsort((-labels[idx], -score[idx]))]  # ties: newer label first, as in SQL
        return [(int(labels[i]), float(score[i])) for i in order]

    def of_types(self, types: Sequence[MemoryType], newest_first: bool, limit: int) -> list[Memory]:
        """Memories of these types by creation time (ties by label), without touching SQL."""
        with self.lock:
            n = self.size
            codes = [TYPE_CODE[t] for t in types]
            rows = np.flatnonzero(self.num["alive"][:n] & np.isin(self.num["type"][:n], codes))
            created, labels = self.num["created"][rows], self.labels[rows]
            order = np.lexsort((-labels, -created)) if newest_first else np.lexsort((labels, created))
            return [self._memory(int(row)) for row in rows[order[:limit]]]

    def content_hashes(self) -> dict[int, str]:
        with self.lock:
            hashes = self.obj["content_hash"]
            return {label: hashes[row] for label, row in self.rows.items()}

    def live_labels(self) -> np.ndarray:
        with self.lock:
            live: np.ndarray = self.labels[: self.size][self.num["alive"][: self.size]].copy()
            return live
