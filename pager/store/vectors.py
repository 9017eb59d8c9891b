"""Vectors per memory per model, and the pending-embedding queue derived from them.

A memory is *pending* for a model when it has no vector of that model whose content hash
matches its text. The queue is therefore never out of step with the memories: a crash between
a write and its embedding simply leaves the memory pending.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np

from mempager.errors import DimensionMismatch, InvalidInput, NonFiniteVector
from mempager.protocols import PendingItem, PendingStats
from mempager.store.base import DuckDb, aware, naive_utc
from mempager.types import FloatMatrix, LabelArray, as_labels

_SLICE = 65_536  # vectors per query when reading many (~100 MB of 384-d rows)
_PENDING = (
    "FROM memories m LEFT JOIN vectors v ON v.label = m.label AND v.model = ? "
    "AND v.content_hash = m.content_hash "
    "LEFT JOIN embed_failures f ON f.label = m.label AND f.model = ? "
    "WHERE m.actor = ? AND v.label IS NULL"
)


class Vectors:
    def __init__(self, db: DuckDb) -> None:
        self.db = db

    def put_vectors(
        self, model: str, labels: LabelArray, vectors: FloatMatrix, content_hashes: Sequence[str]
    ) -> LabelArray:
        """Store vectors for memories whose text is still the text that was embedded.

        Returns the labels actually stored: a memory deleted or re-worded while it was being
        embedded is skipped (its vector would describe text that no longer exists).
        """
        labels = as_labels(labels)
        if len(content_hashes) != len(labels):
            raise InvalidInput(f"{len(labels)} labels but {len(content_hashes)} content hashes; pass one per label")
        vectors = np.asarray(vectors)
        if vectors.dtype != np.float32 or vectors.ndim != 2 or vectors.shape[0] != len(labels):
            raise DimensionMismatch(
                f"expected float32 ({len(labels)}, dim) vectors, got {vectors.dtype} {vectors.shape}"
            )
        if not np.isfinite(vectors).all():
            raise NonFiniteVector(f"refusing to store non-finite vectors for model {model!r}")
        if len(labels) == 0:
            return np.zeros(0, dtype=np.int64)
        dim = int(vectors.shape[1])
        blobs = np.empty(len(labels), dtype=object)
        for i, row in enumerate(vectors):
            blobs[i] = np.ascontiguousarray(row).tobytes()
        batch = {  # noqa: F841 - read by DuckDB's replacement scan
            "label": np.asarray(labels, dtype=np.int64),
            "content_hash": np.array(list(content_hashes), dtype=object),
            "vec": blobs,
        }
        with self.db.tx() as con:
            existing_dim = con.execute("SELECT any_value(dim) FROM vectors WHERE model = ?", [model]).fetchone()[0]
            if existing_dim is not None and int(existing_dim) != dim:
                raise DimensionMismatch(
                    f"model {model!r} has {existing_dim}-d vectors in this store, got {dim}-d; "
                    "a model whose dimension changed needs a new versioned name"
                )
            rows = con.execute(
                "INSERT OR REPLACE INTO vectors (label, model, dim, content_hash, vec, seq) "
                "SELECT b.label, ?, ?, b.content_hash, b.vec, nextval('vector_seq') FROM batch b "
                "JOIN memories m ON m.label = b.label AND m.content_hash = b.content_hash "
                "RETURNING label",
                [model, dim],
            ).fetchall()
            stored = np.array(sorted(int(r[0]) for r in rows), dtype=np.int64)
            if len(stored):
                con.execute(
                    "DELETE FROM embed_failures WHERE model = ? AND label IN (SELECT unnest(?))",
                    [model, stored.tolist()],
                )
        return stored

    def vectors(self, actor: str, model: str) -> tuple[LabelArray, FloatMatrix]:
        return self._vectors_where(actor, model, "", [])

    def vectors_since(self, actor: str, model: str, seq: int) -> tuple[LabelArray, FloatMatrix]:
        """Vectors written after sequence ``seq`` (catch-up of a saved index)."""
        return self._vectors_where(actor, model, "AND v.seq > ?", [int(seq)])

    def _vectors_where(self, actor: str, model: str, extra: str, params: list[Any]) -> tuple[LabelArray, FloatMatrix]:
        """The actor's current vectors of ``model`` by label, read a label range at a time into one
        matrix: the whole result as Python rows (and DuckDB's sort of it) cost ~11 GB at a million."""
        with self.db.reading():
            con = self.db.con()
            count, low, high, dim = con.execute(
                "SELECT count(*), coalesce(min(v.label), 0), coalesce(max(v.label), -1), any_value(v.dim) "
                "FROM vectors v JOIN memories m ON m.label = v.label "
                f"WHERE m.actor = ? AND v.model = ? AND v.content_hash = m.content_hash {extra}",
                [actor, model, *params],
            ).fetchone()
            if not count:
                return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
            dim = int(dim)
            labels = np.empty(count, np.int64)
            matrix = np.empty((count, dim), np.float32)
            step = max(1, -(-(high - low + 1) // max(1, -(-count // _SLICE))))
            at = 0
            for start in range(low, high + 1, step):
                rows = con.execute(
                    "SELECT v.label, v.vec FROM vectors v JOIN memories m ON m.label = v.label "
                    "WHERE m.actor = ? AND v.model = ? AND v.content_hash = m.content_hash "
                    f"AND v.label >= ? AND v.label < ? {extra} ORDER BY v.label",
                    [actor, model, start, start + step, *params],
                ).fetchall()
                if at + len(rows) > len(labels):  # written since the count: room for them
                    labels = np.concatenate([labels, np.empty(len(rows), np.int64)])
                    matrix = np.concatenate([matrix, np.empty((len(rows), dim), np.float32)])
                if rows:
                    labels[at : at + len(rows)] = [r[0] for r in rows]
                    matrix[at : at + len(rows)] = np.frombuffer(b"".join(r[1] for r in rows), np.float32).reshape(
                        len(rows), dim
                    )
                    at += len(rows)
        return labels[:at], matrix[:at]

    def vector_state(self, actor: str, model: str) -> tuple[int, int]:
        """(count, max sequence) of this actor's current vectors of ``model``."""
        row = self.db.fetch(
            "SELECT count(*), coalesce(max(v.seq), 0) FROM vectors v JOIN memories m"
            " ON m.label = v.label WHERE m.actor = ? AND v.model = ? AND v.content_hash = m.content_hash",
            [actor, model],
        )[0]
        return int(row[0]), int(row[1])

    def vector_labels(self, actor: str, model: str) -> LabelArray:
        with self.db.reading():
            got = (
                self.db.con()
                .execute(
                    "SELECT v.label FROM vectors v JOIN memories m ON m.label = v.label "
                    "WHERE m.actor = ? AND v.model = ? AND v.content_hash = m.content_hash ORDER BY v.label",
                    [actor, model],
                )
                .fetchnumpy()["label"]
            )
        return np.asarray(got, dtype=np.int64)

    def scores(self, actor: str, model: str, vector: FloatMatrix, labels: Sequence[int]) -> dict[int, float]:
        """Cosine of ``vector`` with each label's current vector of ``model`` (labels without one left out)."""
        if not len(labels):
            return {}
        rows = self.db.fetch(
            "SELECT v.label, v.vec FROM vectors v JOIN memories m ON m.label = v.label "
            "WHERE m.actor = ? AND v.model = ? AND v.content_hash = m.content_hash AND v.label IN (SELECT unnest(?))",
            [actor, model, [int(x) for x in labels]],
        )
        if not rows:
            return {}
        matrix = np.frombuffer(b"".join(r[1] for r in rows), np.float32).reshape(len(rows), -1)
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        cosine = (matrix @ query) / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(query))
        return dict(zip((int(r[0]) for r in rows), cosine.tolist(), strict=True))

    def vector_models(self, actor: str) -> dict[str, int]:
        rows = self.db.fetch(
            "SELECT v.model, count(*) FROM vectors v JOIN memories m ON m.label = v.label "
            "WHERE m.actor = ? GROUP BY v.model ORDER BY v.model",
            [actor],
        )
        return {m: int(c) for m, c in rows}

    def drop_vectors(self, actor: str, model: str) -> int:
        with self.db.tx() as con:
            rows = con.execute(
                "DELETE FROM vectors WHERE model = ? AND label IN "
                "(SELECT label FROM memories WHERE actor = ?) RETURNING label",
                [model, actor],
            ).fetchall()
            self.db.audit(con, [(actor, "migration", f"model:{model}", f"dropped:{len(rows)}")])
        return len(rows)

    def pending(self, actor: str, model: str, limit: int) -> list[PendingItem]:
        rows = self.db.fetch(
            "SELECT m.label, m.actor, m.text, m.content_hash, coalesce(f.attempts, 0), f.last_error "
            f"{_PENDING} ORDER BY coalesce(f.attempts, 0), m.label LIMIT ?",
            [model, model, actor, int(limit)],
        )
        return [PendingItem(int(r[0]), r[1], r[2], r[3], int(r[4]), r[5]) for r in rows]

    def pending_stats(self, actor: str, model: str) -> PendingStats:
        row = self.db.fetch(f"SELECT count(*), min(m.written_at), count(f.label) {_PENDING}", [model, model, actor])[0]
        return PendingStats(count=int(row[0]), oldest_created_at=aware(row[1]), failing=int(row[2]))

    def record_embed_failure(self, model: str, labels: Sequence[int], error: str) -> None:
        now = naive_utc(datetime.now(timezone.utc))
        with self.db.tx() as con:
            con.execute(
                "INSERT INTO embed_failures (label, model, attempts, last_error, last_at) "
                "SELECT unnest(?), ?, 1, ?, ? "
                "ON CONFLICT (label, model) DO UPDATE SET attempts = embed_failures.attempts + 1,"
                " last_error = excluded.last_error, last_at = excluded.last_at",
                [[int(x) for x in labels], model, error[:2000], now],
            )
