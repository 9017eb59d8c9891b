"""A damaged DuckDB store seen before DuckDB reads it, and a damaged WAL tail set aside, never deleted.

What DuckDB 2.0 does on its own with a damaged file (measured; ``tests/reliability/test_damaged_store.py``):

* a WAL whose tail is torn (a crash or a full disk mid-append) or followed by garbage: it replays every
  transaction committed before the first entry it cannot frame, ignores the rest, and truncates the WAL
  there at its next write, so the tail's bytes are gone;
* a WAL entry whose checksum does not match (a flipped bit, a zeroed block), or a damaged WAL header:
  every open fails ("Failure while replaying WAL file"), a crash loop for a server that restarts;
* an empty, truncated or foreign main file: every open fails (a SQLite file even makes it try to
  download its sqlite extension); a bad block in the main file fails the read that meets it.

So before a writing open (holding the file's lock, so no live writer's WAL is touched) the WAL is
checked entry by entry as DuckDB frames it: a version-2 WAL is a header object (DuckDB's binary
serializer: fields 100-103, then 0xFFFF) followed by entries of ``u64 size, u64 checksum, payload``,
the checksum being DuckDB's (``Checksum``: each 8 bytes times a constant, xor-ed; the 0-7 remaining bytes
by MurmurHash2-64); a transaction ends with a WAL_FLUSH entry. When anything follows the last
committed transaction that frames and checks (a torn or corrupt entry, garbage, a transaction that
never committed), the WAL as it was is copied to ``<store>.wal.damaged-<time>`` and cut there, so
DuckDB replays exactly the committed transactions before the damage and the rest stays on disk. A
WAL layout this code does not know (versions 1 and 3, encrypted) is left to DuckDB. The main file is
only sniffed (empty? DuckDB's magic?); its deeper damage surfaces as DuckDB's error, turned here into a
typed one naming the file and ``mempager doctor``.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from mempager.errors import NotAStore, StoreDamaged, StoreError, WalReplayFailed
from mempager.store.base import fsync_path

log = logging.getLogger("mempager.store")

MAGIC = b"DUCK"  # at bytes 8-12 of every DuckDB database file
_WAL_VERSION = 98  # WALType::WAL_VERSION, the header entry's type
_FLUSH = b"\x64\x00\x64\xff\xff"  # a WAL_FLUSH entry's whole payload: it ends a committed transaction
_K = np.uint64(0xBF58476D1CE4E5B9)
_M = 0xC6A4A7935BD1E995
_MASK = (1 << 64) - 1
_FOREIGN = (  # what a file that is not a store usually is, by its first bytes
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"SQLite format 3\x00", "a SQLite database"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"%PDF", "a PDF document"),
    (b"PK\x03\x04", "a zip archive"),
    (b"\x1f\x8b", "a gzip file"),
    (b"GIF8", "a GIF image"),
)


def doctor_hint(store: Path | str) -> str:
    return f"`mempager doctor --store {store}`"


def aside_name(path: Path) -> Path:
    """``<path>.damaged-<UTC time>``, a name no file has yet."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    target = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while target.exists():
        target = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
        n += 1
    return target


def set_aside_files(path: Path) -> list[Path]:
    """Files an earlier recovery set aside for ``path`` (its own and its WAL's), oldest first."""
    found = [*path.parent.glob(f"{path.name}.damaged-*"), *path.parent.glob(f"{path.name}.wal.damaged-*")]
    return sorted(found, key=lambda p: p.name)


# -- the main file -------------------------------------------------------------------------------


def foreign_kind(head: bytes) -> str:
    """What a file starting with ``head`` is, as far as its first bytes tell."""
    for magic, kind in _FOREIGN:
        if head.startswith(magic):
            return kind
    stripped = head.lstrip()
    if stripped[:1] in (b"{", b"["):
        return "a JSON or text file"
    if head and all(32 <= b < 127 or b in (9, 10, 13) for b in head):
        return "a text file"
    return "not a DuckDB database"


def main_problem(path: Path) -> StoreError | None:
    """A typed error when ``path`` exists but cannot be a DuckDB store at all (empty, another file type)."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            head = fh.read(16)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return StoreError(f"cannot read the store file {path}: {exc.strerror or exc}; check its permissions")
    if size == 0:
        return StoreDamaged(
            f"the store file {path} is empty (0 bytes): it holds no memories DuckDB can read. "
            f"{doctor_hint(path)} reports every file; with --repair it moves this one aside (to "
            f"{path.name}.damaged-<time>) so a new store starts there; or restore a `mempager backup`"
        )
    if head[8:12] != MAGIC:
        return NotAStore(
            f"{path} is {foreign_kind(head)}, not a mempager store; pass --store the path of your store "
            "(or move this file away): mempager does not touch it"
        )
    return None


# -- the write-ahead log -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WalScan:
    """How much of a WAL DuckDB can replay as it is."""

    size: int
    intact_to: int  # bytes from the start up to the end of the last committed transaction that frames and checks
    entries: int  # entries (after the header) up to there
    problem: str | None  # why the bytes after ``intact_to`` are damaged; None: all intact (or unknown)
    known: bool = True  # False: a WAL layout this code does not check (left to DuckDB)

    @property
    def damaged(self) -> bool:
        return self.known and self.problem is not None


def checksum(payload: bytes) -> int:
    """DuckDB's ``Checksum`` of a WAL entry's payload."""
    whole = len(payload) // 8
    words = np.frombuffer(payload, dtype="<u8", count=whole)
    result = 5381 ^ (int(np.bitwise_xor.reduce(words * _K)) if whole else 0)
    rest = payload[whole * 8 :]
    if rest:
        h = (0xE17A1465 ^ (len(rest) * _M)) & _MASK
        h = ((h ^ int.from_bytes(rest, "little")) * _M) & _MASK
        h ^= h >> 47
        h = (h * _M) & _MASK
        h ^= h >> 47
        result ^= h
    return result


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if at >= len(data) or shift > 63:
            raise ValueError("varint runs past the header")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return value, at
        shift += 7


def _header(data: bytes) -> tuple[int, int]:
    """(WAL version, bytes the header takes); ValueError when it is not a WAL header."""
    fields: dict[int, int] = {}
    at = 0
    while True:
        if at + 2 > len(data):
            raise ValueError("the header has no end marker")
        field = int.from_bytes(data[at : at + 2], "little")
        at += 2
        if field == 0xFFFF:
            break
        if field not in (100, 101, 102, 103) or field in fields:
            raise ValueError(f"unexpected header field {field}")
        if field == 102:  # the database identifier: a count, then that many varints
            count, at = _varint(data, at)
            if count > 64:
                raise ValueError("a database identifier too long")
            for _ in range(count):
                _, at = _varint(data, at)
            fields[field] = count
        else:
            fields[field], at = _varint(data, at)
    if fields.get(100) != _WAL_VERSION or 101 not in fields:
        raise ValueError("the header is not a WAL version entry")
    return fields[101], at


def scan_wal(path: Path) -> WalScan | None:
    """How much of the WAL at ``path`` is intact; None when there is none (or it is empty)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    if not data:
        return None
    try:
        version, at = _header(data[:4096])
    except ValueError as exc:
        return WalScan(len(data), 0, 0, f"its header is damaged ({exc})")
    if version in (1, 3):  # unchecked (1) or encrypted (3) entries: DuckDB's own checks decide
        return WalScan(len(data), len(data), 0, None, known=False)
    if version != 2:
        return WalScan(len(data), 0, 0, f"its header names WAL version {version}, which DuckDB cannot read")
    entries, committed = 0, (at, 0)  # (bytes, entries) up to the end of the last committed transaction
    problem = None
    while at < len(data) and problem is None:
        size = int.from_bytes(data[at : at + 8], "little") if at + 16 <= len(data) else -1
        if size < 0:
            problem = f"it ends inside an entry's frame at byte {at} (a torn write)"
        elif size == 0 or at + 16 + size > len(data):
            why = "an empty entry" if size == 0 else f"an entry of {size} bytes that runs past its end"
            problem = f"at byte {at} it holds {why} (a torn write or garbage)"
        elif checksum(data[at + 16 : at + 16 + size]) != int.from_bytes(data[at + 8 : at + 16], "little"):
            problem = f"the entry at byte {at} fails its checksum (corrupt)"
        else:
            entries += 1
            at += 16 + size
            if data[at - size : at] == _FLUSH:
                committed = (at, entries)
    if problem is None and committed[0] < len(data):
        problem = f"its last {len(data) - committed[0]} bytes are a transaction that never committed (a torn write)"
    return WalScan(len(data), committed[0], committed[1], problem)


def set_aside_wal(wal: Path, scan: WalScan) -> Path:
    """Copy the WAL to ``<wal>.damaged-<time>`` and cut it to its intact part; returns the copy's path.

    The copy is durable before the cut. A WAL with nothing intact after its header is moved whole.
    """
    target = aside_name(wal)
    if scan.entries == 0:
        os.replace(wal, target)
    else:
        shutil.copyfile(wal, target)
        fsync_path(target)
        with open(wal, "r+b") as fh:
            fh.truncate(scan.intact_to)
            os.fsync(fh.fileno())
    fsync_path(wal.parent)  # the new name (and a move) live in the directory
    return target


@contextmanager
def exclusive(path: Path) -> Iterator[bool]:
    """The store file's write lock (DuckDB's own: a POSIX record lock), held in the block; False when
    another process holds it (its WAL is live: never touch it). Released before DuckDB opens the file,
    as closing any descriptor of a file drops every lock this process holds on it."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        yield True  # no main file: nobody can be writing this WAL through it
        return
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EACCES, errno.EAGAIN):
                raise
            yield False
            return
        yield True
    finally:
        os.close(fd)


def prepare(path: Path) -> Path | None:
    """Before a writing open of ``path``: refuse a file that cannot be a store, and set a damaged WAL
    tail aside (logged). Returns the set-aside file, if any."""
    problem = main_problem(path)
    if problem is not None:
        raise problem
    wal = path.with_name(path.name + ".wal")
    if not wal.exists():
        return None
    with exclusive(path) as mine:
        if not mine:
            return None  # another process has the store open: DuckDB refuses this open with StoreLocked
        scan = scan_wal(wal)
        if scan is None or not scan.damaged:
            return None
        target = set_aside_wal(wal, scan)
        dropped = drop_saved_indexes(path)
    log.warning(
        "the write-ahead log %s was damaged: %s. Its %d intact entries are replayed; the whole log as it was "
        "is kept in %s (%d bytes after byte %d were not replayed)%s",
        wal,
        scan.problem,
        scan.entries,
        target,
        scan.size - scan.intact_to,
        scan.intact_to,
        "; the saved indexes are rebuilt from the store" if dropped else "",
    )
    return target


def index_root(path: Path) -> Path:
    """Where the lanes save their indexes for the store file ``path`` (``lanes/opening.py``)."""
    return path.with_name(path.name + ".index")


def drop_saved_indexes(path: Path) -> bool:
    """Remove the saved indexes of ``path`` (caches: the next open rebuilds them from the store).

    After a WAL was cut they may hold memories, rewordings and vectors the store no longer has, under
    labels and revisions it will hand out again, which a load's catch-up could not tell apart."""
    root = index_root(path)
    if not root.exists():
        return False
    shutil.rmtree(root)
    return True


def explain(exc: BaseException, path: Path) -> StoreError | None:
    """The typed error for a failed open of ``path`` that damage explains; None for any other failure."""
    text = str(exc.__cause__ or exc)
    if "Failure while replaying WAL" in text:
        return WalReplayFailed(
            f"the store {path} cannot be opened: replaying its write-ahead log {path}.wal failed ({text}). "
            f"{doctor_hint(path)} says which file is damaged; with --repair it sets the log aside as "
            f"{path.name}.wal.damaged-<time> (nothing is deleted) and the store opens with what was checkpointed"
        )
    markers = ("not a valid DuckDB database", "Could not read enough bytes", "Corrupt database file")
    if any(marker in text for marker in markers):
        return StoreDamaged(
            f"the store file {path} is damaged ({text}). Restore it from a `mempager backup`, or run "
            f"{doctor_hint(path)} to see every file; with --repair it moves the damaged files aside (to "
            f"{path.name}.damaged-<time>, nothing is deleted) and a new, empty store starts there"
        )
    return None
