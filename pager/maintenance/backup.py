"""A consistent copy of an embedded (DuckDB) store, taken while the store is in use.

The copy is DuckDB's ``COPY FROM DATABASE`` into a new file, run under the store's write lock:
no write (and no compaction) can interleave (writers wait while it copies), readers go on
meanwhile, and the one statement reads one snapshot, so the copy holds exactly the writes
committed before it started (the WAL's too, sequences included, so the copy accepts new writes
where the original left off). It is written
beside ``dest``, fsynced, and renamed into place: ``dest`` is a whole store or absent. The
per-process index caches (``<store>.index``) are not copied: the copy rebuilds them from its
vectors on first open.

A PostgreSQL store is not copied here: its server does that (``pg_dump``), or ``mempager export``
writes each actor's memories and vectors as JSON lines.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb

from mempager.errors import InvalidInput, StoreError
from mempager.protocols import Store
from mempager.store.base import fsync_path, translate
from mempager.store.duckdb import DuckDBStore

_ALIAS = "mempager_backup"


class BackupUnsupported(StoreError):
    """This kind of store is not backed up by mempager; the message names what does it."""


def backup_store(store: Store, dest: str | Path) -> Path:
    """Copy ``store`` to ``dest`` (a new file, or a directory to put ``<store name>`` in); returns the path."""
    if not isinstance(store, DuckDBStore):
        raise BackupUnsupported(
            f"backup copies an embedded DuckDB store; {store.location} is a server store: back it up with "
            "its server's tools (pg_dump --schema=<schema> for PostgreSQL), or write each actor's memories "
            "and vectors with `mempager export --vectors --actor A > A.jsonl`"
        )
    target = Path(dest).expanduser()
    if target.is_dir():
        target = target / Path(store.location).name
    if target.exists():
        raise InvalidInput(f"{target} already exists; back up to a new path (a backup never overwrites)")
    source = Path(store.location).resolve()
    if target.resolve() == source:
        raise InvalidInput(f"{target} is the store itself; back up to another path")
    if not target.parent.is_dir():
        raise InvalidInput(f"{target.parent} is not a directory; create it first or pick another destination")
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    for leftover in (partial, Path(f"{partial}.wal")):
        leftover.unlink(missing_ok=True)
    try:
        _copy(store, partial)
        fsync_path(partial)
        os.replace(partial, target)
        fsync_path(target.parent)
    except OSError as exc:
        raise translate(exc, str(target)) from exc
    finally:
        for leftover in (partial, Path(f"{partial}.wal")):
            leftover.unlink(missing_ok=True)
    return target


def _copy(store: DuckDBStore, partial: Path) -> None:
    quoted = str(partial).replace("'", "''")
    with store.db.write_lock:  # no write or compaction until the copy is whole
        con = store.db.con()
        try:
            name = str(con.execute("SELECT current_database()").fetchone()[0]).replace('"', '""')
            con.execute(f"ATTACH '{quoted}' AS {_ALIAS}")
            try:
                con.execute(f'COPY FROM DATABASE "{name}" TO {_ALIAS}')
            finally:
                con.execute(f"DETACH {_ALIAS}")
        except duckdb.Error as exc:
            raise translate(exc, str(partial)) from exc
