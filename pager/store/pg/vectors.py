"""Vectors per memory per model (pgvector): storing them, reading them back, and searching them.

The semantic search is one SQL query per model index (``WHERE model = <literal>`` matches the
partial index) with the actor filter inside it, also written in, so each actor's search is one
prepared statement planned once for that actor (``Db.rows_with_literals``); pgvector's iterative
scan keeps the filtered search returning k, and a short answer falls back to an exact scan of the
actor's vectors.
Registering models and their indexes is ``models``; the embedding queue is ``embed_queue``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
from psycopg import sql

from mempager.errors import DimensionMismatch, InvalidInput, NonFiniteVector, StoreError
from mempager.store.pg.db import AuditRow, Conn, Db, Inline, int_array
from mempager.store.pg.listeners import PgListeners
from mempager.store.pg.models import MODEL_LOCK, PgModels, index_type
from mempager.store.pg.vectype import PgVector, rows
from mempager.types import FloatMatrix, LabelArray

_PUT = """
WITH b AS (
    SELECT * FROM unnest(%(label)s::bigint[], %(chash)s::text[], %(vec)b::vector[]) AS b(label, content_hash, vec)
), live AS (  -- FOR SHARE: a concurrent re-wording waits for us, or we see its new hash and skip
    SELECT m.label, m.actor FROM memories m JOIN b ON m.label = b.label AND m.content_hash = b.content_hash
    ORDER BY m.label FOR SHARE OF m
), ins AS (
    INSERT INTO vectors (label, model, actor, dim, content_hash, vec)
    SELECT b.label, %(model)s, live.actor, %(dim)s, b.content_hash, b.vec FROM b JOIN live ON live.label = b.label
    ORDER BY b.label
    ON CONFLICT (label, model) DO UPDATE SET content_hash = excluded.content_hash, vec = excluded.vec,
        dim = excluded.dim, actor = excluded.actor, seq = nextval('vector_seq')
    RETURNING label
), done AS (
    DELETE FROM embed_queue q USING ins WHERE q.model = %(model)s AND q.label = ins.label
)
SELECT label FROM ins ORDER BY label
"""


def _search(kind: str, dim: int, model: str, actor: str, k: int) -> sql.Composed:
    """The index search; ``vec::<kind>(<dim>)`` is the expression the model's partial HNSW index is built on."""
    cast = sql.SQL("::{}({})").format(sql.SQL(kind), sql.Literal(dim))
    return sql.SQL(
        "SELECT label, 1 - (vec{c} <=> %(q)b::vector{c}) FROM vectors WHERE model = {m} AND actor = {a}"
        " ORDER BY vec{c} <=> %(q)b::vector{c} LIMIT {k}"
    ).format(c=cast, m=Inline(model), a=Inline(actor), k=sql.Literal(k))


def _search_and_queue(kind: str, dim: int, model: str, actor: str, k: int, latest: bool) -> sql.Composed:
    """The index search and the actor's queued labels in one statement (``queued`` true on the
    queue's rows): one round trip instead of two, and both read from the same snapshot.

    ``latest``: and one row more (``queued`` NULL) holding the seq of the actor's latest text
    change, the last entry ``PgReads.text_changes`` would return (0 for none): the lexical lane
    that already stands there has nothing to read (``lanes.PgSemanticLane.search_snapshot``).
    """
    latest_change = sql.SQL(
        " UNION ALL SELECT coalesce(max(seq), 0), NULL, NULL FROM audit"
        " WHERE actor = {a} AND label IS NOT NULL AND op <> 'reinforce'"
    ).format(a=Inline(actor))
    return sql.SQL(
        "SELECT label, score, false AS queued FROM ({search}) AS hits(label, score)"
        " UNION ALL SELECT label, NULL, true FROM embed_queue WHERE model = {m} AND actor = {a}{latest}"
    ).format(
        search=_search(kind, dim, model, actor, k),
        m=Inline(model),
        a=Inline(actor),
        latest=latest_change if latest else sql.SQL(""),
    )


def _as_labels(values: object) -> LabelArray:
    """int64 labels from any integer sequence, or InvalidInput (never a raw numpy error)."""
    try:
        raw = np.asarray(values)
        if raw.size and raw.dtype.kind not in "iu":
            raise InvalidInput(f"labels must be integers, got {raw.dtype} values")
        return np.asarray(raw, dtype=np.int64).reshape(-1)
    except (ValueError, TypeError, OverflowError) as exc:
        raise InvalidInput(f"labels must be int64 integers: {exc}") from exc


def _analyze(conn: Conn) -> int:
    """One process at a time refreshes the statistics; the others skip. Returns the table's row estimate."""
    if conn.execute("SELECT pg_try_advisory_xact_lock(hashtext('mempager.analyze'))").fetchone() == (True,):
        conn.execute("ANALYZE vectors")
        conn.execute("ANALYZE memories")
    row = conn.execute("SELECT greatest(reltuples, 0) FROM pg_class WHERE oid = 'vectors'::regclass").fetchone()
    return int(row[0]) if row else 0


class PgVectors:
    """The vectors table; drop_vectors tells the audit listeners (through ``listeners``)."""

    def __init__(self, db: Db, models: PgModels, listeners: PgListeners) -> None:
        self._db = db
        self._models = models
        self._listeners = listeners
        self._lock = threading.Lock()
        self._grown = 0  # vectors this process stored since its last ANALYZE
        self._dequeued = 0  # queue entries its stores removed since it last vacuumed the queue
        self._analyzed_rows = 0

    # -- vectors --------------------------------------------------------------------------
    def put_vectors(
        self, model: str, labels: LabelArray, vectors: FloatMatrix, content_hashes: Sequence[str]
    ) -> LabelArray:
        """Store vectors for memories whose text is still the text that was embedded.

        Returns the labels actually stored: a memory deleted or re-worded meanwhile is skipped.
        """
        labels = _as_labels(labels)
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
        self._models.ensure_model(model, dim)
        first: dict[int, int] = {}
        for i, label in enumerate(labels.tolist()):
            first.setdefault(int(label), i)  # a label repeated in one call keeps its first row (as DuckDB does)
        keep = sorted(first.values())
        params = {
            "label": [int(labels[i]) for i in keep],
            "chash": [content_hashes[i] for i in keep],
            "vec": rows(vectors[keep]),
            "model": model,
            "dim": dim,
        }
        stored, _ = self._db.write(lambda conn, audit: conn.execute(_PUT, params).fetchall())
        self._note_growth(model, len(stored))
        return np.array([int(r[0]) for r in stored], dtype=np.int64)

    def _note_growth(self, model: str, added: int) -> None:
        """ANALYZE once the vectors grew by a fifth since we last looked; vacuum the queue then, and when it drains.

        The planner needs row counts per actor to choose between the HNSW index (a big actor) and
        the (actor, model) b-tree plus an exact sort (a small one); a freshly filled table has none
        until autovacuum gets round to it, and then it scans every vector of a big actor exactly.
        """
        with self._lock:
            self._grown += added
            self._dequeued += added
            due = self._grown >= max(1000, self._analyzed_rows // 5)
            if due:
                self._grown = 0
            churned = self._dequeued >= 1000
        if due:
            rows, _ = self._db.write(lambda conn, audit: _analyze(conn))
            self._analyzed_rows = rows
            self._vacuum_queue()
        elif churned and not self._db.rows("SELECT 1 FROM embed_queue WHERE model = %s LIMIT 1", [model]):
            # the queue just drained (a bulk write, an import, a re-embed all caught up): the
            # dead rows its churn left would otherwise stay until autovacuum, which may be busy
            # with the big tables for minutes, and every retrieve reads the queue twice
            self._vacuum_queue()

    def _vacuum_queue(self) -> None:
        """The queue is all churn (queued, claimed, dequeued): its table and indexes are mostly dead
        rows until vacuumed, and every retrieve reads it (unembedded labels): over the 100k dead
        rows a 100k-memory import leaves, a read takes 0.2 ms instead of 0.03. Another VACUUM of
        it running: skipped."""
        with self._lock:
            self._dequeued = 0
        self._db.maintenance(["VACUUM (SKIP_LOCKED) embed_queue"])

    def vectors(self, actor: str, model: str) -> tuple[LabelArray, FloatMatrix]:
        return self._vectors_where(actor, model, 0)

    def vectors_since(self, actor: str, model: str, seq: int) -> tuple[LabelArray, FloatMatrix]:
        """Vectors written after sequence ``seq``."""
        return self._vectors_where(actor, model, int(seq))

    def _vectors_where(self, actor: str, model: str, seq: int) -> tuple[LabelArray, FloatMatrix]:
        found = self._db.rows(
            "SELECT label, vec FROM vectors WHERE actor = %s AND model = %s AND seq > %s ORDER BY label",
            [actor, model, seq],
            binary=True,
        )
        if not found:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
        labels = np.fromiter((r[0] for r in found), dtype=np.int64, count=len(found))
        return labels, np.stack([r[1] for r in found]).astype(np.float32)

    def vector_state(self, actor: str, model: str) -> tuple[int, int]:
        """(count, max sequence) of this actor's vectors of ``model``."""
        row = self._db.rows(
            "SELECT count(*), coalesce(max(seq), 0) FROM vectors WHERE actor = %s AND model = %s", [actor, model]
        )[0]
        return int(row[0]), int(row[1])

    def vector_labels(self, actor: str, model: str) -> LabelArray:
        found = self._db.rows(
            "SELECT label FROM vectors WHERE actor = %s AND model = %s ORDER BY label", [actor, model]
        )
        return np.fromiter((r[0] for r in found), dtype=np.int64, count=len(found))

    def vector_models(self, actor: str) -> dict[str, int]:
        found = self._db.rows(
            "SELECT model, count(*) FROM vectors WHERE actor = %s GROUP BY model ORDER BY model", [actor]
        )
        return {m: int(c) for m, c in found}

    def drop_vectors(self, actor: str, model: str) -> int:
        def body(conn: Conn, audit: list[AuditRow]) -> int:
            conn.execute(MODEL_LOCK, [model])
            dropped = conn.execute("DELETE FROM vectors WHERE model = %s AND actor = %s", [model, actor]).rowcount
            if conn.execute("SELECT 1 FROM vectors WHERE model = %s LIMIT 1", [model]).fetchone() is None:
                row = conn.execute("DELETE FROM embed_models WHERE model = %s RETURNING index_name", [model]).fetchone()
                if row is not None and row[0]:  # nobody has vectors of it any more: retire it and its index
                    conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(row[0])))
            else:  # other actors still use it: this actor's memories are pending for it again
                conn.execute(
                    "INSERT INTO embed_queue (model, label, actor) SELECT %(m)s, label, actor FROM memories"
                    " WHERE actor = %(a)s ON CONFLICT DO NOTHING",
                    {"m": model, "a": actor},
                )
            audit.append((actor, "migration", f"model:{model}", f"dropped:{dropped}", None))
            return int(dropped)

        dropped, entries = self._db.write(body)
        self._models.forget_dim(model)
        self._listeners.publish(entries)
        return dropped

    # -- search -----------------------------------------------------------------------------
    def search_vectors(self, actor: str, model: str, vector: FloatMatrix, k: int) -> list[tuple[int, float]]:
        """The actor's k nearest memories by cosine (best first; ties by label)."""
        dim = self._models.indexed_dim(model)
        if dim is None or k <= 0:
            return []
        q = PgVector(np.asarray(vector, dtype=np.float32).reshape(-1))
        kind = index_type(dim)
        found: list[tuple[Any, ...]] = []
        if kind is not None:
            k = int(k)
            try:
                # model, actor and k written in: one plan per actor (the HNSW index for a big one,
                # the (actor, model) b-tree and an exact sort for a small one), made once, not per call
                found = self._db.rows_with_literals(
                    ("search", model, dim, actor, k), lambda: _search(kind, dim, model, actor, k), {"q": q}, binary=True
                )
            except StoreError:  # re-registered elsewhere with another dimension? look it up again next time
                self._models.forget_dim(model)
                raise
        if len(found) < k and self.vector_state(actor, model)[0] > len(found):
            found = self._db.rows(  # a tiny actor among big ones, or no index: exact over the actor's rows
                "SELECT label, 1 - (vec <=> %(q)b) AS score FROM vectors WHERE model = %(model)s"
                " AND actor = %(actor)s ORDER BY score DESC, label LIMIT %(k)s",
                {"q": q, "actor": actor, "k": int(k), "model": model},
            )
        hits = [(int(label), float(score)) for label, score in found]
        return sorted(hits, key=lambda h: (-h[1], h[0]))

    def search_with_queue(
        self, actor: str, model: str, vector: FloatMatrix, k: int, latest: bool = False
    ) -> tuple[list[tuple[int, float]], list[int], int | None]:
        """``search_vectors`` and the actor's labels still queued for ``model``, read together, and
        (``latest``) the seq of the actor's latest text change, read with them (None: not read).

        One statement sees one snapshot, so a memory is either found by the search or queued,
        never neither (the semantic/salience hand-over of ``lanes.retrieval.rank``), and the
        retrieve pays one round trip for both instead of three (a queue read before and after);
        the latest change saves the lexical lane's catch-up read when nothing changed.
        """
        dim = self._models.indexed_dim(model)
        kind = None if dim is None else index_type(dim)
        if dim is None or kind is None or k <= 0:
            rows = self._db.rows("SELECT label FROM embed_queue WHERE model = %s AND actor = %s", [model, actor])
            return self.search_vectors(actor, model, vector, k), [int(r[0]) for r in rows], None
        k = int(k)
        q = PgVector(np.asarray(vector, dtype=np.float32).reshape(-1))
        try:
            found = self._db.rows_with_literals(
                ("search+queue", model, dim, actor, k, latest),
                lambda: _search_and_queue(kind, dim, model, actor, k, latest),
                {"q": q},
                binary=True,
            )
        except StoreError:  # re-registered elsewhere with another dimension? look it up again next time
            self._models.forget_dim(model)
            raise
        hits: list[tuple[int, float]] = []
        queued: list[int] = []
        change: int | None = None
        for label, score, is_queued in found:
            if is_queued is None:  # the latest-change row
                change = int(label)
            elif is_queued:
                queued.append(int(label))
            else:
                hits.append((int(label), float(score)))
        if len(hits) < k:  # a tiny actor among big ones: the exact search (search_vectors' own fallback)
            return self.search_vectors(actor, model, vector, k), queued, change
        return sorted(hits, key=lambda h: (-h[1], h[0])), queued, change

    def vector_scores(self, actor: str, model: str, vector: FloatMatrix, labels: Sequence[int]) -> dict[int, float]:
        """Cosine of ``vector`` with each labelled vector the actor has (labels without one are left out)."""
        if not len(labels):
            return {}
        found = self._db.rows(
            "SELECT label, 1 - (vec <=> %(q)b) FROM vectors WHERE model = %(model)s AND actor = %(actor)s"
            " AND label = ANY(%(labels)s::text::bigint[])",
            {
                "q": PgVector(np.asarray(vector, dtype=np.float32).reshape(-1)),
                "model": model,
                "actor": actor,
                "labels": int_array(labels),
            },
            binary=True,
        )
        return {int(label): float(score) for label, score in found}

    def has_vector(self, actor: str, model: str, label: int) -> bool:
        return bool(
            self._db.rows(
                "SELECT 1 FROM vectors WHERE label = %s AND model = %s AND actor = %s", [int(label), model, actor]
            )
        )
