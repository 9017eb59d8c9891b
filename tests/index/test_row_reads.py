"""The compiled positional row reads (index/_rows.c) that FileRows reads saved vectors with: the bytes
at each offset into each row's place, a file that ends early named, a failed read raised."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from mempager.index._rows import pread_rows


def _file(tmp_path: Path, rows: int, dim: int, stride: int) -> tuple[Path, np.ndarray]:
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((rows, dim)).astype(np.float32)
    raw = bytearray(b"\xab" * (16 + rows * stride))  # a header, then each row padded to its stride
    for i in range(rows):
        raw[16 + i * stride : 16 + i * stride + 4 * dim] = vectors[i].tobytes()
    path = tmp_path / "rows.bin"
    path.write_bytes(bytes(raw))
    return path, vectors


def test_each_row_is_read_from_its_offset_into_its_place(tmp_path: Path) -> None:
    path, vectors = _file(tmp_path, 300, 24, 24 * 4 + 40)
    pick = np.array([299, 0, 17, 17, 150, 3], np.int64)
    out = np.full((len(pick), 24), np.nan, np.float32)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert pread_rows(fd, out, 16 + pick * (24 * 4 + 40), 24 * 4) == len(pick)
        assert out.tobytes() == vectors[pick].tobytes()
        assert pread_rows(fd, out[:0], pick[:0], 24 * 4) == 0  # nothing asked, nothing read
    finally:
        os.close(fd)


def test_a_row_past_the_end_of_the_file_is_named_not_read(tmp_path: Path) -> None:
    path, vectors = _file(tmp_path, 10, 8, 32)
    out = np.zeros((3, 8), np.float32)
    fd = os.open(path, os.O_RDONLY)
    try:
        offsets = np.array([16, 16 + 9 * 32 + 8, 16 + 2 * 32], np.int64)  # the second row runs past the end
        assert pread_rows(fd, out, offsets, 32) == 1
        assert out[0].tobytes() == vectors[0].tobytes()
    finally:
        os.close(fd)


def test_a_failed_read_or_a_wrong_buffer_raises(tmp_path: Path) -> None:
    path, _ = _file(tmp_path, 4, 8, 32)
    out = np.zeros((2, 8), np.float32)
    fd = os.open(path, os.O_RDONLY)
    os.close(fd)
    with pytest.raises(OSError):  # a closed descriptor (EBADF)
        pread_rows(fd, out, np.array([16, 48], np.int64), 32)
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(ValueError, match="len\\(offsets\\) rows"):
            pread_rows(fd, out, np.array([16, 48, 80], np.int64), 32)  # three rows, room for two
        with pytest.raises(ValueError, match="int64"):
            pread_rows(fd, out, np.array([16, 48], np.int32), 32)
    finally:
        os.close(fd)
