"""The one place where psycopg's and psycopg_pool's errors become mempager's.

Every message names the server by its password-free location, says what to try, and is scrubbed
of the password in case a foreign message echoed it. The original stays chained (``from exc``).
"""

from __future__ import annotations

import psycopg
from psycopg import errors as pg
from psycopg_pool import PoolTimeout

from mempager.errors import (
    InvalidInput,
    StoreBusy,
    StoreError,
    StoreFull,
    StoreLocked,
    StoreTimeout,
    StoreUnavailable,
)
from mempager.store.pg.options import scrub

# SQLSTATE classes that mean "the connection or the server went away", not "your SQL was wrong".
_GONE_STATES = ("08", "57P01", "57P02", "57P03")


def connection_lost(exc: BaseException) -> bool:
    """True when ``exc`` says the server or the connection is gone (worth a retry elsewhere).

    Never for the pool's own timeout (a subclass of OperationalError without a SQLSTATE): that
    wait already took ``pool_timeout_s``, and retrying it would multiply the wait.
    """
    if isinstance(exc, PoolTimeout) or not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith(_GONE_STATES)


def translate(
    exc: BaseException, location: str, secret: str | None, *, writing: bool = False, busy: bool = False
) -> StoreError:
    """A StoreError (or subclass) for a foreign database error; never raises.

    ``busy``: a PoolTimeout while every pooled connection was held by this process's own calls
    (StoreBusy), rather than while the pool could not connect (StoreUnavailable).
    """
    raw = scrub(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__, secret)
    if isinstance(exc, PoolTimeout):
        not_stored = " — this write was not stored" if writing else ""
        if busy:
            return StoreBusy(
                f"every pooled connection to PostgreSQL at {location} stayed busy ({raw}): slow calls of this "
                f"process hold them; retry, or raise pool_max or pool_timeout_s{not_stored}"
            )
        return StoreUnavailable(
            f"no connection to PostgreSQL at {location} could be made ({raw}): the server is down, restarting "
            f"or unreachable; check it, then retry{not_stored}"
        )
    if connection_lost(exc):
        tail = (
            " — the write may or may not have been stored; retry it (repeated writes are deduplicated)"
            if writing
            else "; retry when the server is back"
        )
        return StoreUnavailable(f"lost the connection to PostgreSQL at {location}: {raw}{tail}")
    if isinstance(exc, pg.DiskFull):
        return StoreFull(
            f"the PostgreSQL server at {location} is out of disk space ({raw}); free space and retry. "
            "Every write acknowledged before this one is kept"
        )
    if isinstance(exc, pg.LockNotAvailable):
        return StoreLocked(
            f"another session holds a lock this call needs at {location} ({raw}); a compaction or "
            "migration may be running: retry in a moment"
        )
    if isinstance(exc, pg.QueryCanceled):
        return StoreTimeout(
            f"PostgreSQL at {location} cancelled the statement ({raw}): it ran past statement_timeout_ms "
            "or waited on a lock held by a compaction or migration; retry, or raise the timeout"
        )
    if isinstance(exc, pg.InsufficientPrivilege):
        return StoreError(
            f"the PostgreSQL user lacks a privilege at {location}: {raw}; grant it, or ask an administrator "
            "to run the step (for example CREATE EXTENSION vector)"
        )
    if isinstance(exc, (pg.UndefinedFile, pg.FeatureNotSupported)) and "vector" in raw:
        return StoreError(f"pgvector is not available on the server at {location}: {raw}; install pgvector 0.8+ there")
    state = getattr(exc, "sqlstate", None)
    return StoreError(f"PostgreSQL store {location} failed{f' ({state})' if state else ''}: {raw}")


def reject_nul(field: str, values: list[str]) -> None:
    """PostgreSQL text cannot hold NUL or lone surrogates; say so before anything is sent."""
    for value in values:
        if "\x00" in value:
            raise InvalidInput(f"{field} contains a NUL byte, which PostgreSQL text cannot store; strip \\x00")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidInput(
                f"{field} contains a lone surrogate at position {exc.start}; decode the input with errors='replace'"
            ) from exc
