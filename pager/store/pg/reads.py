"""Reads: point look-ups, filtered listings, and the salience score computed in SQL.

Every query names the actor in its WHERE clause; nothing here can return another actor's row.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np
import numpy.typing as npt
from psycopg import sql

from mempager.errors import InvalidInput
from mempager.protocols import SalienceParams
from mempager.store.pg.db import Db, Inline, int_array
from mempager.store.pg.rows import MEMORY_COLUMNS, SHOWN_COLUMNS, ShownRow, row_to_memory, utc
from mempager.types import LabelArray, Memory, MemoryType, Source
from mempager.validate import make_uri

_ORDERS = {
    "newest": "created_at DESC, label DESC",
    "oldest": "created_at ASC, label ASC",
    "strongest": "strength DESC, confidence DESC, created_at DESC, label DESC",
}
# pager.salience in SQL; every operand is float8 so the arithmetic matches Python's bit for bit.
# ``{m}`` qualifies the memories columns ("" or "m."); the candidates statement computes the same score.
SALIENCE_SCORE = """%(w_recency)s::float8 * power(0.5::float8,
        greatest(0::float8, extract(epoch FROM (%(now)s::timestamptz - {m}created_at))::float8)
        / 86400.0::float8 / (CASE {m}type {half} ELSE %(default_half)s::float8 END))
    + %(w_importance)s::float8 * {m}importance + %(w_strength)s::float8 * {m}strength * {m}confidence
    + %(w_access)s::float8 * {m}access_count::float8 / ({m}access_count::float8 + 5.0::float8)"""
# which memories salience ranks: current ones of the asked types
SALIENT = """{m}type = ANY(%(types)s) AND {m}superseded_by IS NULL
    AND ({m}valid_until IS NULL OR {m}valid_until > %(now)s::timestamptz)"""
HALF_CASES = " ".join(f"WHEN '{t.value}' THEN %(half_{t.value})s::float8" for t in MemoryType)
_SALIENCE = f"""
SELECT label, {SALIENCE_SCORE.format(m="", half=HALF_CASES)} AS score
FROM memories
WHERE actor = %(actor)s AND {SALIENT.format(m="")} {{only}}
ORDER BY score DESC, label DESC LIMIT %(limit)s
"""


def salience_values(params: SalienceParams, types: Sequence[MemoryType]) -> dict[str, Any]:
    """The named parameters of ``SALIENCE_SCORE`` and ``SALIENT``."""
    values: dict[str, Any] = {
        "w_recency": params.w_recency,
        "w_importance": params.w_importance,
        "w_strength": params.w_strength,
        "w_access": params.w_access,
        "now": utc(params.now),
        "types": [t.value for t in types],
        "default_half": params.default_half_life_days,
    }
    for t in MemoryType:
        values[f"half_{t.value}"] = float(params.half_life_days.get(t, params.default_half_life_days))
    return values


# Text-changing audit entries carry the memory's label; reinforcements do not change the text.
# Actor and position are written in (Db.rows_with_literals): as parameters, ``seq > $2`` looks like a
# third of the audit trail to a generic plan (a parallel hash join, milliseconds), so PostgreSQL
# planned the statement anew at every search; written in, the steady state (nothing new since the
# last search, the same position every time) is one prepared statement, planned once.
_TEXT_CHANGES = """
SELECT a.seq, a.label, m.text, m.type, date_part('epoch', m.created_at)::float8 FROM audit a
LEFT JOIN memories m ON m.label = a.label AND m.actor = a.actor
WHERE a.actor = {actor} AND a.seq > {seq} AND a.label IS NOT NULL AND a.op <> 'reinforce' ORDER BY a.seq
"""


def _instant(seconds: float) -> datetime:
    """Epoch seconds as the aware UTC datetime they stand for (to the microsecond, as stored)."""
    try:
        return datetime.fromtimestamp(seconds, tz=timezone.utc)
    except (OverflowError, OSError, ValueError) as exc:
        raise InvalidInput(f"{seconds!r} is not a time PostgreSQL can store: {exc}") from exc


class PgReads:
    """Read-only queries over the memories table and the audit trail."""

    def __init__(self, db: Db) -> None:
        self._db = db

    def get(self, actor: str, memory_id: str) -> Memory | None:
        rows = self._db.rows(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE actor = %s AND id = %s", [actor, memory_id])
        return row_to_memory(rows[0]) if rows else None

    def _by_labels(self, columns: str, actor: str, labels: Sequence[int]) -> list[tuple[Any, ...]]:
        """``columns`` of ``actor``'s memories with these labels, in one round trip (none for no labels);
        the labels travel as one array literal (psycopg adapts a list element by element). Rows come
        in binary: the same values, but a timestamptz parsed from text cost more than the rest of a
        retrieve's packing read (0.15 instead of 0.07 ms of client time for 16 rows)."""
        if not len(labels):
            return []
        return self._db.rows(
            f"SELECT {columns} FROM memories WHERE actor = %s AND label = ANY(%s::text::bigint[])",
            [actor, int_array(labels)],
            binary=True,
        )

    def get_many(self, actor: str, labels: Sequence[int]) -> dict[int, Memory]:
        return {int(r[0]): row_to_memory(r) for r in self._by_labels(MEMORY_COLUMNS, actor, labels)}

    def shown_rows(self, actor: str, labels: Sequence[int]) -> dict[int, ShownRow]:
        """What packing reads of these memories (``get_many``'s rows, lighter; unknown labels left out)."""
        return {int(r[0]): ShownRow(actor, r) for r in self._by_labels(SHOWN_COLUMNS, actor, labels)}

    def uris(self, actor: str, labels: Sequence[int]) -> dict[int, str]:
        rows = self._by_labels("label, type, id", actor, labels)
        return {int(label): make_uri(actor, MemoryType(t), mid) for label, t, mid in rows}

    def find(self, actor: str, type_: MemoryType, dedup_key: str) -> Memory | None:
        rows = self._db.rows(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE actor = %s AND type = %s AND dedup_key = %s",
            [actor, type_.value, dedup_key],
        )
        return row_to_memory(rows[0]) if rows else None

    def query(
        self,
        actor: str,
        *,
        types: Sequence[MemoryType] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        sources: Sequence[Source] | None = None,
        tags: Sequence[str] | None = None,
        labels: Sequence[int] | None = None,
        limit: int = 20,
        offset: int = 0,
        order: str = "newest",
    ) -> list[Memory]:
        if order not in _ORDERS:
            raise InvalidInput(f"order must be one of {sorted(_ORDERS)}, got {order!r}")
        where: list[str] = ["actor = %s"]
        params: list[Any] = [actor]
        filters: list[tuple[bool, str, Any]] = [
            (bool(types), "type = ANY(%s)", [t.value for t in types or ()]),
            (since is not None, "created_at >= %s", since and utc(since)),
            (until is not None, "created_at < %s", until and utc(until)),
            (bool(sources), "source = ANY(%s)", [s.value for s in sources or ()]),
            (bool(tags), "tags @> %s::text[]", list(tags or ())),
            (labels is not None, "label = ANY(%s)", [int(x) for x in labels or ()]),
        ]
        for wanted, clause, value in filters:
            if wanted:
                where.append(clause)
                params.append(value)
        rows = self._db.rows(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE {' AND '.join(where)} "
            f"ORDER BY {_ORDERS[order]} LIMIT %s OFFSET %s",
            [*params, int(limit), int(offset)],
        )
        return [row_to_memory(r) for r in rows]

    def salience(
        self,
        actor: str,
        types: Sequence[MemoryType],
        params: SalienceParams,
        limit: int,
        only: Sequence[int] | None = None,
    ) -> list[tuple[int, float]]:
        """The salience score of ``pager.salience`` over current memories (or just ``only``), best first."""
        if only is not None and not len(only):
            return []
        values = {
            **salience_values(params, types),
            "actor": actor,
            "limit": int(limit),
            "only": int_array(only or ()),
        }
        query = _SALIENCE.format(only="AND label = ANY(%(only)s::text::bigint[])" if only is not None else "")
        return [(int(label), float(score)) for label, score in self._db.rows(query, values)]

    # -- the time lane's reads (lanes.when): labels and epoch seconds, no memories built -------
    # Epoch seconds as ``extract(...)::float8``: the exact microseconds rounded once, the float
    # Python's ``datetime.timestamp()`` gives, so the lane's comparisons are those of the datetimes.
    def created_span(self, actor: str) -> tuple[float, float] | None:
        """The oldest and newest creation time (epoch seconds) of the actor's memories; None when it has none."""
        first, last = self._db.rows(
            "SELECT extract(epoch FROM min(created_at))::float8, extract(epoch FROM max(created_at))::float8"
            " FROM memories WHERE actor = %s",
            [actor],
            binary=True,
        )[0]
        return None if first is None or last is None else (float(first), float(last))

    def created_between(self, actor: str, since: float, until: float, limit: int) -> LabelArray:
        """Labels of the actor's memories created in [since, until) (epoch seconds), newest first:
        ``query(actor, since=, until=, limit=)``'s memories, their labels alone."""
        rows = self._db.rows(
            "SELECT label FROM memories WHERE actor = %s AND created_at >= %s AND created_at < %s"
            f" ORDER BY {_ORDERS['newest']} LIMIT %s",
            [actor, _instant(since), _instant(until), int(limit)],
            binary=True,
        )
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def created_of(self, actor: str, labels: Sequence[int]) -> npt.NDArray[np.float64]:
        """The creation time (epoch seconds) of each of ``labels``; NaN where the actor has no such memory."""
        out = np.full(len(labels), np.nan)
        if not len(labels):
            return out
        rows = self._db.rows(
            "SELECT label, extract(epoch FROM created_at)::float8 FROM memories"
            " WHERE actor = %s AND label = ANY(%s::text::bigint[])",
            [actor, int_array(labels)],
            binary=True,
        )
        when = {int(label): float(at) for label, at in rows}
        for i, label in enumerate(labels):
            out[i] = when.get(int(label), np.nan)
        return out

    def of_types(
        self, actor: str, types: Sequence[MemoryType], order: str = "newest", limit: int = 1_000_000
    ) -> list[Memory]:
        """The actor's memories of ``types``, newest (or oldest) first."""
        if order not in ("newest", "oldest"):
            raise InvalidInput(f"order must be 'newest' or 'oldest', got {order!r}")
        if not types:
            return []
        return self.query(actor, types=list(types), limit=limit, order=order)

    def live_labels(self, actor: str) -> LabelArray:
        rows = self._db.rows("SELECT label FROM memories WHERE actor = %s ORDER BY label", [actor])
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def content_hashes(self, actor: str) -> dict[int, str]:
        rows = self._db.rows("SELECT label, content_hash FROM memories WHERE actor = %s", [actor])
        return {int(label): chash for label, chash in rows}

    def texts_since(self, actor: str, rev: int) -> tuple[list[int], list[str]]:
        """(labels, texts) of the actor's memories written or re-worded after revision ``rev``."""
        rows = self._db.rows(
            "SELECT label, text FROM memories WHERE actor = %s AND rev > %s ORDER BY label", [actor, int(rev)]
        )
        return [int(r[0]) for r in rows], [r[1] for r in rows]

    def max_rev(self, actor: str) -> int:
        return int(self._db.rows("SELECT coalesce(max(rev), 0) FROM memories WHERE actor = %s", [actor])[0][0])

    def counts(self, actor: str) -> dict[str, int]:
        rows = self._db.rows(
            "SELECT type, count(*) FROM memories WHERE actor = %s GROUP BY type ORDER BY type", [actor]
        )
        return {t: int(c) for t, c in rows}

    def actors(self) -> list[str]:
        return [r[0] for r in self._db.rows("SELECT DISTINCT actor FROM memories ORDER BY actor")]

    # -- the change feed other processes follow ---------------------------------------------
    def texts_at(self, actor: str) -> tuple[int, list[tuple[int, str, str, float]]]:
        """The actor's (label, text, type, created_at epoch seconds) rows and the audit position
        they reflect, read in one snapshot."""

        def load(conn: Any) -> tuple[int, list[tuple[int, str, str, float]]]:
            seq = conn.execute("SELECT coalesce(max(seq), 0) FROM audit WHERE actor = %s", [actor]).fetchone()[0]
            rows = conn.execute(
                "SELECT label, text, type, date_part('epoch', created_at)::float8 FROM memories "
                "WHERE actor = %s ORDER BY label",
                [actor],
            ).fetchall()
            return int(seq), [(int(label), text, str(type_), float(when)) for label, text, type_, when in rows]

        return self._db.snapshot(load)

    def text_changes(self, actor: str, seq: int) -> list[tuple[int, int, str | None, str | None, float | None]]:
        """(audit seq, label, text now or None once deleted, type, created_at epoch seconds) of
        every text change after ``seq``.

        Audit ``seq`` order is commit order (appends are serialised until commit), so the entries
        after the last one a reader applied are exactly what it has not seen, whoever wrote them.
        """
        seq = int(seq)
        found = self._db.rows_with_literals(
            ("text_changes", actor, seq),
            lambda: sql.SQL(_TEXT_CHANGES).format(actor=Inline(actor), seq=sql.Literal(seq)),
            binary=True,
        )
        return [
            (int(s), int(label), text, type_, None if when is None else float(when))
            for s, label, text, type_, when in found
        ]
