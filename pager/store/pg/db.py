"""Connections: one pool per store, session settings, transactions, retries, the audit seal.

* Reads run on a pooled autocommit connection; a read that finds its connection dead is retried
  on another (after a server restart each stale pooled connection fails once and is dropped), so
  a restart costs no error once the server is back. Connections are not pinged before use: that
  was a round trip on every call (about 1 ms of an 8 ms ``retrieve`` at 100k memories).
* Writes run in one transaction. A write that loses a deadlock or serialization race is retried;
  a write whose connection died before COMMIT was sent is retried (the server rolled it back); a
  write whose connection died during COMMIT is reported, never silently repeated.
* A call that waits ``pool_timeout_s`` for a pooled connection and gets none fails at once, never
  retried (the wait would multiply): StoreBusy when this process's own calls held every pooled
  connection (slow calls), StoreUnavailable when the pool could not connect (the server is down or
  restarting). So a call takes at most one pool wait and one statement (cancelled by the server at
  ``statement_timeout_ms``: StoreTimeout), plus fast retries on stale connections after a restart
  (tests/reliability/test_pg_trouble.py).
* Every write's audit entries are appended last, under the row lock of ``audit_tail``: appends
  are serialised only for the few statements before COMMIT, and audit ``seq`` order is commit
  order, which is what lets other processes follow the store's changes by ``seq``.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg
from psycopg import pq, sql
from psycopg.types import TypeInfo
from psycopg_pool import ConnectionPool, PoolTimeout

from mempager.errors import PagerError, StoreError
from mempager.store.audit import chain
from mempager.store.pg.errors import connection_lost, translate
from mempager.store.pg.migrations import extension_schema, migrate
from mempager.store.pg.options import PgOptions
from mempager.store.pg.vectype import register
from mempager.types import AuditEntry

log = logging.getLogger("mempager.pgstore")

T = TypeVar("T")
Conn = psycopg.Connection[Any]
AuditRow = tuple[str, str, str, str, "int | None"]  # actor, op, uri, content_hash, label
Body = Callable[[Conn, list[AuditRow]], T]
_RACES = (pg.DeadlockDetected, pg.SerializationFailure)
_COMPOSED_MAX = 512  # statements with values written in (see rows_with_literals); a full cache starts over


def fetch(cur: psycopg.Cursor[Any]) -> list[tuple[Any, ...]]:
    """The rows of the last statement, or [] for one that returns none (CREATE, SET, ...).

    Checks the result status rather than ``cur.description``, which builds a Column object per
    column on every call: a tenth of the client's time for a 16-row memory fetch.
    """
    result = cur.pgresult
    return cur.fetchall() if result is not None and result.status == pq.ExecStatus.TUPLES_OK else []


def int_array(values: Iterable[int]) -> str:
    """``'{1,2,3}'``: integers for a ``::text::bigint[]`` parameter of a hot read. psycopg adapts a
    list of ints element by element, about a tenth of a millisecond per hundred labels: a third
    of the client's time in a retrieve's candidate statement (pg/candidates.py)."""
    return "{" + ",".join(map(str, map(int, values))) + "}"


class Inline(sql.Literal):
    """A value written into a statement for ``Db.rows_with_literals``, quoted as a literal.

    Its ``%`` signs are doubled: psycopg reads ``%`` as the start of a placeholder in a statement
    run with parameters (which ``rows_with_literals`` always passes), so an actor named ``a%sb``
    must not become one.
    """

    def as_bytes(self, context: Any = None) -> bytes:
        return super().as_bytes(context).replace(b"%", b"%%")


class Db:
    def __init__(
        self, conninfo: str, parts: dict[str, str], options: PgOptions, location: str, secret: str | None
    ) -> None:
        self.options = options
        self.location = location
        self._conninfo = conninfo
        self._parts = parts
        self._secret = secret
        self._vector: TypeInfo | None = None
        self._ext_schema = "public"
        self._pool: ConnectionPool[Any] | None = None
        self._composed: dict[Hashable, bytes] = {}
        self._held = 0  # pooled connections our calls hold now: tells a busy pool from an unreachable server
        self._held_lock = threading.Lock()
        self.store_id = ""
        # transactions this process committed (``write``): a reader that caught up with the
        # store at count n has seen every one of them while the count is still n
        self.commits = 0

    # -- opening ----------------------------------------------------------------------------
    def _kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": self.options.connect_timeout_s}
        if "application_name" not in self._parts:
            kwargs["application_name"] = "mempager"
        return kwargs

    def open(self) -> None:
        """Connect once, migrate under the lock, learn the vector type, then start the pool."""
        try:
            with psycopg.connect(self._conninfo, **self._kwargs()) as conn:
                migrate(conn, self.options.schema, self.location)
                self._ext_schema = extension_schema(conn) or "public"
                self._check_pgvector(conn)
                self._session(conn)
                self._vector = TypeInfo.fetch(conn, "vector")
                row = conn.execute("SELECT value FROM store_meta WHERE key = 'store_id'").fetchone()
                self.store_id = "" if row is None else str(row[0])
        except PagerError:
            raise
        except psycopg.Error as exc:
            raise self.error(exc) from exc
        self._pool = ConnectionPool(
            self._conninfo,
            kwargs=self._kwargs(),
            min_size=self.options.pool_min,
            max_size=self.options.pool_max,
            open=False,
            configure=self._configure,
            timeout=self.options.pool_timeout_s,
            # A failing connection attempt retries with a doubling delay until it gives up; only then
            # does the next call start a fresh one. Giving up after one pool wait means a server back
            # from an outage is found within about a second of the next call, not after a long backoff.
            reconnect_timeout=self.options.pool_timeout_s,
            name="mempager",
            num_workers=1,
        )
        self._pool.open(wait=False)

    def _check_pgvector(self, conn: Conn) -> None:
        row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        version = tuple(int(x) for x in str(row[0]).split(".")[:2]) if row else (0, 0)
        if version < (0, 8):
            raise StoreError(
                f"the server at {self.location} has pgvector {row[0] if row else 'missing'}; mempager needs 0.8 or "
                "newer (iterative index scans keep actor-filtered searches complete): ALTER EXTENSION vector UPDATE"
            )

    def _session(self, conn: Conn) -> None:
        o = self.options
        conn.execute(
            sql.SQL(
                "SET search_path TO {}, {}; SET TimeZone TO 'UTC'; SET statement_timeout = {};"
                " SELECT '[1]'::vector; SET hnsw.ef_search = {}; SET hnsw.iterative_scan = relaxed_order"
            ).format(
                sql.Identifier(o.schema),
                sql.Identifier(self._ext_schema),
                sql.Literal(o.statement_timeout_ms),
                sql.Literal(o.ef_search),
            )
        )

    def _configure(self, conn: Conn) -> None:
        self._session(conn)
        if self._vector is not None:
            register(conn, self._vector)

    def error(self, exc: BaseException, *, writing: bool = False) -> StoreError:
        busy = isinstance(exc, PoolTimeout) and self._held >= self.options.pool_max
        return translate(exc, self.location, self._secret, writing=writing, busy=busy)

    @contextmanager
    def _lease(self, pool: ConnectionPool[Any]) -> Iterator[Conn]:
        """A pooled connection, counted while held (see ``error``)."""
        with pool.connection() as conn:
            with self._held_lock:
                self._held += 1
            try:
                yield conn
            finally:
                with self._held_lock:
                    self._held -= 1

    def _checked_pool(self) -> ConnectionPool[Any]:
        if self._pool is None or self._pool.closed:
            raise StoreError(f"store {self.location} is closed; open it again with mempager.open()")
        return self._pool

    # -- running ----------------------------------------------------------------------------
    def _attempts(self) -> range:
        # After a server restart every pooled connection is stale and fails once (the pool then
        # drops it), so a call may need one attempt per pooled connection plus a fresh one.
        return range(self.options.pool_max + 2)

    def read(self, fn: Callable[[Conn], T]) -> T:
        pool = self._checked_pool()
        attempts = self._attempts()
        for attempt in attempts:
            try:
                with self._lease(pool) as conn:
                    return fn(conn)
            except PoolTimeout as exc:  # before psycopg.Error, its base class: a wait is never retried
                raise self.error(exc) from exc
            except psycopg.Error as exc:
                if attempt < attempts[-1] and connection_lost(exc):
                    log.info("read lost its connection to %s (%s); retrying", self.location, exc.sqlstate)
                    continue
                raise self.error(exc) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def rows(
        self, query: Any, params: Sequence[Any] | dict[str, Any] | None = None, binary: bool = False
    ) -> list[tuple[Any, ...]]:
        def run(conn: Conn) -> list[tuple[Any, ...]]:
            return fetch(conn.execute(query, params, binary=binary))

        return self.read(run)

    def rows_with_literals(
        self,
        key: Hashable,
        build: Callable[[], sql.Composable],
        params: Sequence[Any] | dict[str, Any] | None = None,
        binary: bool = False,
    ) -> list[tuple[Any, ...]]:
        """Rows of the statement ``build()`` composes (values written in as quoted literals), cached under ``key``.

        For the hot reads whose parameters steer the plan (the actor, an audit position): with
        them as ``$n`` PostgreSQL either plans the statement again on every call (custom plans:
        a tenth of a millisecond or more each) or settles on one generic plan for every actor
        and position, which can be the wrong index for some. Written in, each distinct value is
        its own prepared statement (psycopg prepares it after a few calls) planned once for
        exactly that value; it is planned again when ANALYZE changes the table's statistics.
        Values go in as ``Inline`` only; ``params`` (never None) fill the ``%(name)s`` placeholders.
        """

        def run(conn: Conn) -> list[tuple[Any, ...]]:
            query = self._composed.get(key)
            if query is None:
                query = build().as_bytes(conn)  # quoted by the server connection's own rules
                if len(self._composed) >= _COMPOSED_MAX:
                    self._composed = {}
                self._composed[key] = query
            return fetch(conn.execute(query, {} if params is None else params, binary=binary))

        return self.read(run)

    def snapshot(self, fn: Callable[[Conn], T]) -> T:
        """``fn`` inside one read-only REPEATABLE READ transaction: all its queries see one snapshot."""

        def run(conn: Conn) -> T:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                result = fn(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return result

        return self.read(run)

    def write(self, fn: Body[T]) -> tuple[T, list[AuditEntry]]:
        """Run ``fn(conn, audit_rows)`` in one transaction, seal its audit rows, commit."""
        pool = self._checked_pool()
        delay, lost = 0.005, 0
        for attempt in range(self.options.write_retries + 1 + len(self._attempts())):
            audit: list[AuditRow] = []
            sent = False  # True once COMMIT may have reached the server
            try:
                with self._lease(pool) as conn:
                    try:
                        with conn.transaction():
                            result = fn(conn, audit)
                            entries = self._seal(conn, audit) if audit else []
                            sent = True
                    finally:
                        if sent:  # committed, or maybe (lost while committing): counted either way
                            with self._held_lock:  # never a lost count: a reader compares it for equality
                                self.commits += 1
                    return result, entries
            except PoolTimeout as exc:  # before psycopg.Error, its base class: a wait is never retried
                raise self.error(exc, writing=True) from exc
            except _RACES as exc:
                if attempt - lost >= self.options.write_retries:
                    raise self.error(exc, writing=True) from exc
                time.sleep(delay * (1 + random.random()))  # noqa: S311 - jitter, not crypto
                delay = min(0.2, delay * 2)
            except psycopg.Error as exc:
                # Lost before COMMIT was sent: the server rolled the transaction back, so run it again.
                if not sent and connection_lost(exc) and lost < len(self._attempts()) - 1:
                    lost += 1
                    log.info("write lost its connection to %s before commit; retrying", self.location)
                    continue
                raise self.error(exc, writing=sent or connection_lost(exc)) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def maintenance(self, statements: Sequence[Any]) -> None:
        """Statements that cannot run in a transaction (VACUUM), without the statement timeout."""

        def run(conn: Conn) -> None:
            conn.execute(
                sql.SQL("SET statement_timeout = 0; SET maintenance_work_mem = {}").format(
                    sql.Literal(f"{self.options.maintenance_work_mem_mb}MB")
                )
            )
            try:
                for statement in statements:
                    conn.execute(statement)
            finally:
                conn.execute(
                    sql.SQL("SET statement_timeout = {}; RESET maintenance_work_mem").format(
                        sql.Literal(self.options.statement_timeout_ms)
                    )
                )

        self.read(run)

    @staticmethod
    def _seal(conn: Conn, rows: list[AuditRow]) -> list[AuditEntry]:
        """Append ``rows`` to the hash chain; the tail row lock is held until this transaction ends."""
        tail = conn.execute("SELECT seq, hash, clock_timestamp() FROM audit_tail FOR UPDATE").fetchone()
        if tail is None:
            raise StoreError("the audit tail row is missing; the store's schema was altered outside mempager")
        seq, prev, now = tail
        entries = chain((int(seq), str(prev)), now, [row[:4] for row in rows])
        conn.execute(
            "WITH tail AS (UPDATE audit_tail SET seq = %(seq)s, hash = %(hash)s) "
            "INSERT INTO audit (seq, recorded_at, actor, op, uri, content_hash, prev_hash, hash, label) "
            "SELECT * FROM unnest(%(seqs)s::bigint[], %(at)s::timestamptz[], %(actor)s::text[], %(op)s::text[],"
            " %(uri)s::text[], %(chash)s::text[], %(prev)s::text[], %(hashes)s::text[], %(label)s::bigint[])",
            {
                "seq": entries[-1].seq,
                "hash": entries[-1].hash,
                "seqs": [e.seq for e in entries],
                "at": [e.at for e in entries],
                "actor": [e.actor for e in entries],
                "op": [e.op for e in entries],
                "uri": [e.uri for e in entries],
                "chash": [e.content_hash for e in entries],
                "prev": [e.prev_hash for e in entries],
                "hashes": [e.hash for e in entries],
                "label": [row[4] for row in rows],
            },
        )
        return entries

    def close(self) -> None:
        if self._pool is not None and not self._pool.closed:
            self._pool.close()
