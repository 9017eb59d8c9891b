"""Embedding models: registration (which fills the embedding queue), one HNSW index per model, re-queueing.

``embed_models`` registers each model (and its dimension); registering fills ``embed_queue`` with
every memory that has no vector of it, and every later write queues its new memories for every
registered model, so "pending" is a small table, never an anti-join over all memories.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence

from psycopg import sql

from mempager.errors import DimensionMismatch
from mempager.store.pg.db import Conn, Db
from mempager.store.pg.options import PgOptions

MODEL_LOCK = "SELECT pg_advisory_xact_lock(hashtext('mempager.model'), hashtext(%s))"


def index_type(dim: int) -> str | None:
    """pgvector's HNSW indexes ``vector`` up to 2,000 dimensions and ``halfvec`` up to 4,000."""
    if dim <= 2000:
        return "vector"
    if dim <= 4000:
        return "halfvec"
    return None


def requeue(conn: Conn, labels: Sequence[int], actor: str) -> None:
    """Re-worded memories: drop their vectors and queue them again for every model."""
    conn.execute(
        "WITH gone AS (DELETE FROM vectors WHERE label = ANY(%(l)s)) "
        "INSERT INTO embed_queue (model, label, actor) SELECT m.model, l, %(a)s FROM embed_models m"
        " CROSS JOIN unnest(%(l)s::bigint[]) AS l ON CONFLICT (model, label) DO UPDATE SET attempts = 0,"
        " last_error = NULL, last_at = NULL, claimed_by = NULL, claimed_until = NULL",
        {"l": [int(x) for x in labels], "a": actor},
    )


class PgModels:
    """The registered models, and the dimension of each one's index as this process learned it."""

    def __init__(self, db: Db, options: PgOptions) -> None:
        self._db = db
        self._hnsw_m = options.hnsw_m
        self._hnsw_ef_construction = options.hnsw_ef_construction
        self._dims: dict[str, int] = {}  # model -> dim of its index, learned on first search
        self._lock = threading.Lock()

    def ensure_model(self, model: str, dim: int | None = None) -> int | None:
        """Register ``model`` (queueing every memory for it) and, once its dim is known, index it."""
        found = self._db.rows("SELECT dim, index_name FROM embed_models WHERE model = %s", [model])
        if found:
            have, index = found[0]
            if have is not None and dim is not None and have != dim:
                raise DimensionMismatch(
                    f"model {model!r} has {have}-d vectors in this store, got {dim}-d; "
                    "a model whose dimension changed needs a new versioned name"
                )
            if dim is None or index is not None:
                return None if have is None else int(have)
        self._db.write(lambda conn, audit: self._register(conn, model, dim))
        return dim

    def indexed_dim(self, model: str) -> int | None:
        """The dimension of ``model``'s index, or None while it has none (cached once known)."""
        with self._lock:
            if model in self._dims:
                return self._dims[model]
        found = self._db.rows("SELECT dim FROM embed_models WHERE model = %s AND index_name IS NOT NULL", [model])
        if not found or found[0][0] is None:
            return None
        with self._lock:
            self._dims[model] = int(found[0][0])
        return int(found[0][0])

    def forget_dim(self, model: str) -> None:
        """Look ``model``'s index up again next time (dropped, or re-registered elsewhere)."""
        with self._lock:
            self._dims.pop(model, None)

    def _register(self, conn: Conn, model: str, dim: int | None) -> None:
        conn.execute(MODEL_LOCK, [model])
        row = conn.execute("SELECT dim, index_name FROM embed_models WHERE model = %s", [model]).fetchone()
        if row is None:
            conn.execute("LOCK TABLE memories IN SHARE MODE")  # no write may slip between fill and registration
            conn.execute("INSERT INTO embed_models (model, dim) VALUES (%s, %s)", [model, dim])
            conn.execute(
                "INSERT INTO embed_queue (model, label, actor) SELECT %(m)s, m.label, m.actor FROM memories m"
                " WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE v.label = m.label AND v.model = %(m)s)",
                {"m": model},
            )
            row = (dim, None)
        have, index = row
        if have is None and dim is not None:
            conn.execute("UPDATE embed_models SET dim = %s WHERE model = %s", [dim, model])
            have = dim
        elif have is not None and dim is not None and have != dim:
            raise DimensionMismatch(f"model {model!r} has {have}-d vectors in this store, got {dim}-d")
        if have is not None and index is None:
            conn.execute(
                "UPDATE embed_models SET index_name = %s WHERE model = %s",
                [self._create_index(conn, model, int(have)), model],
            )

    def _create_index(self, conn: Conn, model: str, dim: int) -> str:
        kind = index_type(dim)
        if kind is None:
            return ""  # beyond pgvector's index limits: searched exactly
        name = "vectors_hnsw_" + hashlib.sha1(model.encode("utf-8")).hexdigest()[:16]  # noqa: S324 - a name
        conn.execute(
            sql.SQL(
                "CREATE INDEX IF NOT EXISTS {name} ON vectors USING hnsw ((vec::{kind}({dim})) {ops})"
                " WITH (m = {m}, ef_construction = {efc}) WHERE model = {model}"
            ).format(
                name=sql.Identifier(name),
                kind=sql.SQL(kind),
                dim=sql.Literal(dim),
                ops=sql.SQL(f"{kind}_cosine_ops"),
                m=sql.Literal(self._hnsw_m),
                efc=sql.Literal(self._hnsw_ef_construction),
                model=sql.Literal(model),
            )
        )
        return name
