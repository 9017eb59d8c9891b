"""The manifest of a saved index, and the crash-safe file handling around it.

A saved index is a directory holding content-addressed data files (``<prefix>-<sha256[:16]><suffix>``)
and ``manifest.json``, which names them with their sha256, size and the CRC-32 of each 64 MiB chunk.
Data files are written to a temp file, fsynced and renamed first; the manifest is written last, the
same way. A crash at any point therefore leaves the previous manifest pointing at the previous (still
present) files, and a reader never needs to trust bytes it has not checked. Files no manifest refers
to are removed after each save.

Opening checks the chunk CRCs (four chunks at a time: file reads and ``zlib.crc32`` release the GIL,
and CRC-32 runs at ~7 GB/s where sha256 runs at ~1 GB/s; at a million 384-d vectors the graph file
is 1.7 GB, and older saves had a 1.5 GB vectors file beside it). What the check is for is damage
(truncation, torn writes, bit rot), which CRC-32 detects (every burst up to 32 bits, anything else
but 1 in 2^32); it is no defence against someone who can write the index directory, and neither was
sha256 next to its manifest. A manifest written before the CRCs existed is checked by its sha256.

One directory holds one index and has one writer at a time.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import tempfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt

from mempager.errors import IndexStale, InvalidInput
from mempager.types import FloatMatrix, LabelArray

FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"
_CHUNK = 1 << 20
CRC_CHUNK = 64 << 20  # bytes per CRC-32 in a manifest entry
_READ = 8 << 20  # bytes a read when checking a file's CRCs
_READERS = 4  # chunks checked at once
BoolArray = npt.NDArray[np.bool_]
ByteArray = npt.NDArray[np.uint8]


@dataclass(frozen=True, slots=True)
class FileEntry:
    name: str  # a plain file name inside the index directory
    sha256: str
    size: int
    crc32: tuple[int, ...] = ()  # of each CRC_CHUNK bytes, in order (empty: check the sha256)


@dataclass(frozen=True, slots=True, kw_only=True)
class Manifest:
    """What was saved, and for whom (``meta`` is owner-supplied: model, actor, store generation...)."""

    kind: str
    dim: int
    M: int
    ef_construction: int
    count: int  # live labels
    rows: int  # rows in the graph, live + deleted
    deleted: int
    max_label: int | None
    files: Mapping[str, FileEntry]
    meta: Mapping[str, Any] = field(default_factory=dict)
    format_version: int = FORMAT_VERSION
    written_at: str = ""

    def to_json(self) -> bytes:
        body = {
            "format_version": self.format_version,
            "kind": self.kind,
            "dim": self.dim,
            "M": self.M,
            "ef_construction": self.ef_construction,
            "count": self.count,
            "rows": self.rows,
            "deleted": self.deleted,
            "max_label": self.max_label,
            "files": {k: _entry_json(f) for k, f in self.files.items()},
            "meta": dict(self.meta),
            "written_at": self.written_at or datetime.now(timezone.utc).isoformat(),
        }
        try:
            return json.dumps(body, indent=1, sort_keys=True, allow_nan=False).encode()
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"index meta must be plain JSON (str/int/float/bool/None/list/dict): {exc}") from exc


def _entry_json(entry: FileEntry) -> dict[str, Any]:
    out: dict[str, Any] = {"name": entry.name, "sha256": entry.sha256, "size": entry.size}
    if entry.crc32:
        out["crc32"] = list(entry.crc32)
    return out


def normalise_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The meta as it reads back from JSON (tuples become lists), so comparisons are like for like."""
    try:
        loaded: dict[str, Any] = json.loads(json.dumps(dict(meta), allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"index meta must be plain JSON (str/int/float/bool/None/list/dict): {exc}") from exc
    return loaded


def meta_differences(saved: Mapping[str, Any], expected: Mapping[str, Any]) -> list[str]:
    """Every expected key must be saved with an equal value; extra saved keys are fine."""
    problems = []
    for key, want in normalise_meta(expected).items():
        if key not in saved:
            problems.append(f"meta {key!r} missing (expected {want!r})")
        elif saved[key] != want:
            problems.append(f"meta {key!r} is {saved[key]!r}, expected {want!r}")
    return problems


# -- reading ------------------------------------------------------------------------------------


def read_manifest(directory: Path) -> Manifest | None:
    """The manifest in ``directory``; None when there is none; IndexStale when it cannot be trusted."""
    path = Path(directory) / MANIFEST_NAME
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise IndexStale(f"cannot read {path} ({exc}); rebuild the index from the store") from exc
    try:
        body = json.loads(raw)
        return _parse(body)
    except (ValueError, TypeError, KeyError) as exc:
        raise IndexStale(f"{path} is malformed ({exc}); rebuild the index from the store") from exc


def _parse(body: Any) -> Manifest:
    if not isinstance(body, dict):
        raise ValueError("top level is not an object")
    version = _int(body, "format_version")
    if version != FORMAT_VERSION:
        raise ValueError(f"format_version {version} is not {FORMAT_VERSION} (written by another mempager)")
    max_label = body["max_label"]
    if max_label is not None and (isinstance(max_label, bool) or not isinstance(max_label, int)):
        raise ValueError(f"max_label {max_label!r} is not an integer")
    files, meta = body["files"], body["meta"]
    if not isinstance(files, dict) or not isinstance(meta, dict):
        raise ValueError("files and meta must be objects")
    kind, written_at = body["kind"], body.get("written_at", "")
    if not isinstance(kind, str) or not isinstance(written_at, str):
        raise ValueError("kind and written_at must be strings")
    return Manifest(
        kind=kind,
        dim=_int(body, "dim"),
        M=_int(body, "M"),
        ef_construction=_int(body, "ef_construction"),
        count=_int(body, "count"),
        rows=_int(body, "rows"),
        deleted=_int(body, "deleted"),
        max_label=max_label,
        files=MappingProxyType({str(k): _file_entry(v) for k, v in files.items()}),
        meta=MappingProxyType(meta),
        format_version=version,
        written_at=written_at,
    )


def _int(body: Mapping[str, Any], key: str) -> int:
    value = body[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{key} {value!r} is not a non-negative integer")
    return value


def _file_entry(value: Any) -> FileEntry:
    if not isinstance(value, dict):
        raise ValueError(f"file entry {value!r} is not an object")
    name, digest = value["name"], value["sha256"]
    # A manifest only ever names files inside its own directory.
    if not isinstance(name, str) or not name or Path(name).name != name or name.startswith("."):
        raise ValueError(f"file name {name!r} is not a plain file name")
    if not isinstance(digest, str) or len(digest) != 64:
        raise ValueError(f"sha256 {digest!r} of {name} is not a hex digest")
    size = _int(value, "size")
    crcs = value.get("crc32", [])
    if not isinstance(crcs, list) or not all(
        isinstance(c, int) and not isinstance(c, bool) and 0 <= c < 1 << 32 for c in crcs
    ):
        raise ValueError(f"crc32 of {name} is not a list of 32-bit integers")
    if crcs and len(crcs) != _chunks(size):
        raise ValueError(f"{name} has {len(crcs)} CRCs for {_chunks(size)} chunks of its {size} bytes")
    return FileEntry(name=name, sha256=digest, size=size, crc32=tuple(crcs))


def _chunks(size: int) -> int:
    return max(1, -(-size // CRC_CHUNK))


def read_verified(directory: Path, entry: FileEntry) -> ByteArray:
    """The file's bytes (a writable uint8 array), after checking its size and sha256 against the manifest."""
    path = Path(directory) / entry.name
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size != entry.size:
                raise IndexStale(
                    f"{path} has {size} bytes, the manifest says {entry.size} (truncated or "
                    "replaced); rebuild the index from the store"
                )
            data: ByteArray = np.empty(size, dtype=np.uint8)  # unlike bytearray(size), not zero-filled first
            got = fh.readinto(data.data)
    except OSError as exc:
        raise IndexStale(f"cannot read {path} ({exc}); rebuild the index from the store") from exc
    if entry.crc32:
        intact = got == entry.size and _crcs(memoryview(data.data)) == entry.crc32
    else:
        intact = got == entry.size and hashlib.sha256(data.data).hexdigest() == entry.sha256
    if not intact:
        raise IndexStale(
            f"{path} does not match its checksum in the manifest (corrupt); rebuild the index from the store"
        )
    return data


def verify_file(directory: Path, entry: FileEntry) -> Path:
    """Check a file without keeping its bytes (for files a library reads itself)."""
    path = Path(directory) / entry.name
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size != entry.size:
                intact = False
            elif entry.crc32:
                intact = _file_crcs(fh.fileno(), size) == entry.crc32
            else:
                intact = _sha256(fh) == entry.sha256
    except OSError as exc:
        raise IndexStale(f"cannot read {path} ({exc}); rebuild the index from the store") from exc
    if size != entry.size:
        raise IndexStale(
            f"{path} has {size} bytes, the manifest says {entry.size} (truncated or replaced); "
            "rebuild the index from the store"
        )
    if not intact:
        raise IndexStale(
            f"{path} does not match its checksum in the manifest (corrupt); rebuild the index from the store"
        )
    return path


def _crcs(data: memoryview) -> tuple[int, ...]:
    return tuple(zlib.crc32(data[lo : lo + CRC_CHUNK]) for lo in range(0, max(len(data), 1), CRC_CHUNK))


def _file_crcs(fd: int, size: int) -> tuple[int, ...]:
    """The chunk CRCs of an open file, four chunks at a time (reads and ``zlib.crc32`` release the GIL).

    Each chunk is read in ``_READ`` pieces into a buffer its thread reuses: four reads in flight
    keep a cold disk busy (~2 GB/s here, against ~1.2 GB/s faulting a mapping in two threads),
    and nothing of the file stays in this process once checked."""
    if size == 0:
        return (zlib.crc32(b""),)

    def chunk(lo: int) -> int:
        buffer = bytearray(min(_READ, size - lo))
        view = memoryview(buffer)
        crc, at, end = 0, lo, min(lo + CRC_CHUNK, size)
        while at < end:
            got = os.preadv(fd, [view[: min(len(buffer), end - at)]], at)
            if got <= 0:
                raise OSError(f"the file ended at byte {at} of {size}")
            crc = zlib.crc32(view[:got], crc)
            at += got
        return crc

    with ThreadPoolExecutor(max_workers=_READERS, thread_name_prefix="mempager-crc") as pool:
        return tuple(pool.map(chunk, range(0, size, CRC_CHUNK)))


def _sha256(fh: Any) -> str:
    digest = hashlib.sha256()
    buffer = bytearray(_CHUNK)
    view = memoryview(buffer)
    while n := fh.readinto(buffer):
        digest.update(view[:n])
    return digest.hexdigest()


# -- writing ------------------------------------------------------------------------------------


def fsync_dir(directory: Path) -> None:
    """Make renames in ``directory`` durable (a rename lives in the directory, not the file)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _temp_file(directory: Path, prefix: str) -> Iterator[Path]:
    fd, name = tempfile.mkstemp(dir=directory, prefix=f".{prefix}-", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
    finally:
        tmp.unlink(missing_ok=True)  # already renamed on success; a failed write leaves no litter


def write_content_file(directory: Path, prefix: str, suffix: str, write: Callable[[Path], None]) -> FileEntry:
    """Write via ``write(temp_path)``, fsync, and rename to a name derived from the content's hash.

    The caller fsyncs the directory once after its last rename.
    """
    with _temp_file(directory, prefix) as tmp:
        write(tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())  # Linux flushes a file's dirty pages through any descriptor
            size = os.fstat(fh.fileno()).st_size
            with ThreadPoolExecutor(max_workers=1) as pool:  # the two passes side by side
                crcs = pool.submit(_file_crcs, fh.fileno(), size)
                digest = _sha256(fh)
                chunk_crcs = crcs.result()
        name = f"{prefix}-{digest[:16]}{suffix}"
        os.replace(tmp, directory / name)
    return FileEntry(name=name, sha256=digest, size=size, crc32=chunk_crcs)


def write_manifest(directory: Path, manifest: Manifest) -> None:
    """Atomically replace the manifest; call only after the files it names are durable."""
    data = manifest.to_json()
    with _temp_file(directory, "manifest") as tmp:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, directory / MANIFEST_NAME)
    fsync_dir(directory)


def remove_unreferenced(directory: Path, manifest: Manifest, prefixes: tuple[str, ...]) -> None:
    """Delete data files of earlier saves and temp files of interrupted ones."""
    keep = {entry.name for entry in manifest.files.values()}
    for path in directory.iterdir():
        name = path.name
        ours = any(name.startswith((f"{p}-", f".{p}-")) for p in (*prefixes, "manifest"))
        if ours and name not in keep and name != MANIFEST_NAME:
            path.unlink(missing_ok=True)


# -- the rows file ------------------------------------------------------------------------------
# Layout, little-endian, no header (the manifest has rows and dim):
# labels int64[rows], vectors float32[rows, dim], live uint8[rows]. An index's saves since the
# graph file holds its vectors (``hnsw_file.stamp``) write no vectors: labels int64[rows], live uint8[rows].


def write_rows(
    path: Path, labels: LabelArray, vectors: Iterable[npt.NDArray[Any]], live: BoolArray | ByteArray
) -> None:
    """``vectors``: what sits between the labels and the live flags, in as many blocks as the
    caller likes: the rows' vectors in an older save (a large index streamed them from its file
    rather than gather them all in memory), each row's record in the graph file in a newer one."""
    parts: Iterator[npt.NDArray[Any]] = itertools.chain([labels], vectors, [live])
    with open(path, "wb") as fh:
        for part in parts:
            fh.write(np.ascontiguousarray(part.astype(part.dtype.newbyteorder("<"), copy=False)).data)


def read_rows(data: ByteArray, manifest: Manifest) -> tuple[LabelArray, FloatMatrix, BoolArray]:
    """Parse verified bytes into arrays that view (not copy) the buffer, and check them against the manifest."""
    n, dim = manifest.rows, manifest.dim
    if len(data) != n * (8 + 4 * dim + 1):
        raise IndexStale(
            f"vectors file holds {len(data)} bytes, expected {n * (8 + 4 * dim + 1)} for "
            f"{n} rows of {dim} dims; rebuild the index from the store"
        )
    # Views of the verified buffer: no copy, and writable, so remove() can zero rows in place.
    labels = data[: 8 * n].view("<i8").astype(np.int64, copy=False)
    vectors = data[8 * n : (8 + 4 * dim) * n].view("<f4").reshape(n, dim)
    live = checked_live(labels, data[(8 + 4 * dim) * n :], manifest)
    return labels, vectors.astype(np.float32, copy=False), live


def read_labels(path: Path, manifest: Manifest) -> tuple[LabelArray, BoolArray]:
    """The labels and live flags of a verified vectors file, without reading its vectors."""
    n, dim = manifest.rows, manifest.dim
    labels = np.empty(n, "<i8")
    flags = np.empty(n, np.uint8)
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            got = os.preadv(fd, [labels.data], 0), os.preadv(fd, [flags.data], (8 + 4 * dim) * n)
        finally:
            os.close(fd)
    except OSError as exc:
        raise IndexStale(f"cannot read {path} ({exc}); rebuild the index from the store") from exc
    if got != (8 * n, n):
        raise IndexStale(f"{path} is shorter than its {n} rows; rebuild the index from the store")
    return labels.astype(np.int64, copy=False), checked_live(labels, flags, manifest)


def checked_live(labels: LabelArray, flags: ByteArray, manifest: Manifest) -> BoolArray:
    """The live flags as booleans, after checking them and the labels against the manifest."""
    n = manifest.rows
    if flags.size and int(flags.max()) > 1:
        raise IndexStale("saved live flags are not 0/1; rebuild the index from the store")
    live = flags.view(np.bool_)
    live_labels = np.sort(labels[live])  # sorted: duplicates sit side by side (np.unique hashes, slowly)
    problems = []
    if live_labels.size != manifest.count or n - live_labels.size != manifest.deleted:
        problems.append(
            f"{live_labels.size} live of {n} rows, manifest says {manifest.count} live, {manifest.deleted} deleted"
        )
    if live_labels.size and bool((live_labels[1:] == live_labels[:-1]).any()):
        problems.append("a label is live in two rows")
    if (int(live_labels[-1]) if live_labels.size else None) != manifest.max_label:
        problems.append(f"max label differs from the manifest's {manifest.max_label}")
    if problems:
        raise IndexStale(f"saved vectors are inconsistent ({'; '.join(problems)}); rebuild the index")
    return live
