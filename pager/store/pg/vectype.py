"""pgvector's ``vector`` type on the wire, in binary: float32 rows out, float32 rows in.

The binary form is ``int16 dim, int16 unused, dim * float32`` (network byte order). Only values
wrapped in ``PgVector`` use the dumper, so no other numpy array in the process changes meaning.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from psycopg.adapt import Buffer, Dumper, Loader
from psycopg.pq import Format
from psycopg.types import TypeInfo

from mempager.types import FloatMatrix

_HEAD = struct.Struct(">HH")


@dataclass(frozen=True, slots=True)
class PgVector:
    """One float32 row to send as a pgvector ``vector``."""

    values: FloatMatrix


class _VectorDumper(Dumper):
    format = Format.BINARY

    def dump(self, obj: Any) -> Buffer:
        row = np.asarray(obj.values, dtype=">f4").reshape(-1)
        return _HEAD.pack(row.shape[0], 0) + row.tobytes()


class _VectorBinaryLoader(Loader):
    format = Format.BINARY

    def load(self, data: Buffer) -> Any:
        dim = _HEAD.unpack_from(data)[0]
        return np.frombuffer(bytes(data), dtype=">f4", count=dim, offset=_HEAD.size).astype(np.float32)


class _VectorTextLoader(Loader):
    format = Format.TEXT

    def load(self, data: Buffer) -> Any:
        text = bytes(data).decode("ascii").strip("[]")
        return np.array([float(x) for x in text.split(",")] if text else [], dtype=np.float32)


def register(conn: psycopg.Connection[Any], info: TypeInfo) -> None:
    """Teach one connection to send ``PgVector`` and read ``vector`` columns as float32 arrays."""
    info.register(conn)  # also makes lists of PgVector travel as vector[]
    dumper = type("VectorDumper", (_VectorDumper,), {"oid": info.oid})
    conn.adapters.register_dumper(PgVector, dumper)
    conn.adapters.register_loader(info.oid, _VectorBinaryLoader)
    conn.adapters.register_loader(info.oid, _VectorTextLoader)


def rows(matrix: FloatMatrix) -> list[PgVector]:
    return [PgVector(row) for row in np.asarray(matrix, dtype=np.float32)]
