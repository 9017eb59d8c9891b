"""The PostgreSQL + pgvector store: one memory shared by many agent processes and hosts.

    import mempager
    p = mempager.open("postgresql://agent:secret@db.internal:5432/memory", actor="neo")

Needs the ``postgres`` extra (``pip install 'mempager[postgres]'``) and pgvector 0.8+ on the server.
``?schema=name`` in the URL keeps several stores in one database.
"""

from __future__ import annotations

from mempager.errors import ConfigError

try:
    import psycopg  # noqa: F401
    import psycopg_pool  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ConfigError(
        "the PostgreSQL store needs psycopg 3 and psycopg_pool: pip install 'mempager[postgres]'"
    ) from exc

from mempager.store.pg.options import PgOptions  # noqa: E402
from mempager.store.pg.store import PostgresStore, open_pg_store  # noqa: E402

__all__ = ["PgOptions", "PostgresStore", "open_pg_store"]
