"""The arrays of an uncompressed ``.npz`` (what ``np.savez`` writes), each read straight into its own
buffer and checked against a CRC-32 the caller keeps outside the file.

``np.load`` of a ``.npz`` held in memory copies every array out of the zip (and the file had to be read
whole first); here each member is read with ``os.preadv`` into a buffer of its own (so one array kept
by the index does not pin the others' memory), its CRC-32 (header and data, as the zip computes it)
is compared with both the caller's and the zip's before a byte of it is parsed, and the array is a
view of that buffer. Reads and ``zlib.crc32`` release the GIL: two members at a time.
"""

from __future__ import annotations

import io
import os
import re
import struct
import zipfile
import zlib
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from mempager.errors import IndexStale

_LOCAL = struct.Struct("<4sHHHHHLLLHH")  # a zip local file header, 30 bytes
_LOCAL_MAGIC = b"PK\x03\x04"
_HEAD = 1 << 16  # bytes read to parse a member's .npy header (np.savez writes ~128)
_READ_MAX = 1 << 30  # bytes a single read asks for (Linux caps one read just under 2 GiB)


def member_crcs(data: bytes) -> dict[str, int]:
    """Array name -> the zip's CRC-32 of its member, for the ``.npz`` in ``data`` (to keep in a manifest)."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return {_array_name(info.filename): info.CRC for info in zf.infolist()}


def _array_name(member: str) -> str:
    return member[: -len(".npy")] if member.endswith(".npy") else member


def read_checked(path: Path, size: object, crcs: object) -> dict[str, npt.NDArray[Any]]:
    """Every array of the ``.npz`` at ``path``, after checking its size and each array's CRC-32
    against ``size`` and ``crcs`` (name -> CRC-32); IndexStale says what differs."""
    if not isinstance(crcs, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in crcs.items()
    ):
        raise IndexStale(f"the manifest's CRCs of {path} are not a map of names to integers; rebuild")
    try:
        with open(path, "rb") as fh:
            found = os.fstat(fh.fileno()).st_size
            if found != size:
                raise IndexStale(f"{path} has {found} bytes, its manifest says {size} (truncated or replaced); rebuild")
            try:
                with zipfile.ZipFile(fh) as zf:
                    members = zf.infolist()
            except (zipfile.BadZipFile, ValueError, EOFError) as exc:
                raise IndexStale(f"{path} is not a readable lexical index ({exc}); rebuild") from exc
            names = {_array_name(info.filename) for info in members}
            if names != set(crcs) or len(names) != len(members):
                raise IndexStale(f"{path} holds arrays {sorted(names)}, its manifest {sorted(crcs)}; rebuild")
            with ThreadPoolExecutor(max_workers=2, thread_name_prefix="mempager-npz") as pool:
                read = pool.map(lambda info: _member(fh.fileno(), info, crcs, path), members)
                return {_array_name(info.filename): array for info, array in zip(members, read, strict=True)}
    except OSError as exc:
        raise IndexStale(f"cannot read {path} ({exc}); rebuild the lexical index from the store") from exc


def _member(fd: int, info: zipfile.ZipInfo, crcs: Mapping[str, int], path: Path) -> npt.NDArray[Any]:
    """One member read into a buffer of its own and checked before a byte of it is parsed; the array
    is a view of that buffer past its .npy header (np.save pads the header to 64 bytes: aligned)."""
    name = _array_name(info.filename)
    if info.compress_type != zipfile.ZIP_STORED or info.compress_size != info.file_size:
        raise IndexStale(f"{path}: array {name!r} is compressed (not written by mempager); rebuild")
    local = os.pread(fd, _LOCAL.size, info.header_offset)
    if len(local) != _LOCAL.size or local[:4] != _LOCAL_MAGIC:
        raise IndexStale(f"{path}: array {name!r} has no zip header where its directory says; rebuild")
    fields = _LOCAL.unpack(local)
    data_at = info.header_offset + _LOCAL.size + fields[9] + fields[10]
    member = np.empty(info.file_size, np.uint8)
    view, done = member.data, 0
    while done < len(view):
        got = os.preadv(fd, [view[done : done + _READ_MAX]], data_at + done)
        if got <= 0:
            raise IndexStale(f"{path} ended inside array {name!r}; rebuild the lexical index")
        done += got
    crc = zlib.crc32(view)
    if crc != crcs[name] or crc != info.CRC:
        raise IndexStale(f"{path}: array {name!r} does not match its checksum in the manifest (corrupt); rebuild")
    shape, dtype, header_len = _npy_header(member[:_HEAD].tobytes(), name, path)
    body = member[header_len:]
    if body.nbytes != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
        raise IndexStale(f"{path}: array {name!r} holds {body.nbytes} bytes, not its shape's; rebuild")
    return body.view(dtype).reshape(shape)


# The header dict np.save writes for a plain array, matched without ``ast``: CPython 3.11's parser is
# not thread safe ("SystemError: AST constructor recursion depth mismatch" when two threads parse at
# once, as ``np.lib.format``'s header reader does), and members are read two at a time, beside the
# other lanes' open threads. A header np.save would not write is a file mempager did not write: rebuild.
_HEADER = re.compile(
    r"\{'descr': '(?P<descr>[<>|=][a-zA-Z][0-9]*)', 'fortran_order': (?P<fortran>True|False), "
    r"'shape': \((?P<shape>(?:[0-9]+, ?)*[0-9]*)\), \}[ ]*\n"
)


def _npy_header(head: bytes, name: str, path: Path) -> tuple[tuple[int, ...], np.dtype[Any], int]:
    """(shape, dtype, bytes before the data) of a .npy member's header."""

    def unreadable(why: str) -> IndexStale:
        return IndexStale(f"{path}: array {name!r} has no readable .npy header ({why}); rebuild")

    if head[:6] != b"\x93NUMPY" or len(head) < 12:
        raise unreadable("no .npy magic")
    if head[6] == 1:
        (length,), start = struct.unpack("<H", head[8:10]), 10
    elif head[6] in (2, 3):
        (length,), start = struct.unpack("<I", head[8:12]), 12
    else:
        raise unreadable(f"format version {head[6]}")
    if start + length > len(head):
        raise unreadable(f"a header of {length} bytes")
    found = _HEADER.fullmatch(head[start : start + length].decode("latin-1"))
    if found is None:
        raise unreadable("not the header np.save writes")
    try:
        dtype = np.dtype(found["descr"])
    except TypeError as exc:
        raise unreadable(f"dtype {found['descr']!r}: {exc}") from exc
    if found["fortran"] == "True" or dtype.hasobject:
        raise IndexStale(f"{path}: array {name!r} is not a plain C-ordered array; rebuild")
    shape = tuple(int(x) for x in found["shape"].replace(" ", "").split(",") if x)
    return shape, dtype, start + length
