"""A lexical save keeps each array's CRC-32 in its manifest: opening reads every array straight into a
buffer of its own and checks it; damage anywhere in the file is refused before the index is built, and
a save whose manifest has no CRCs (written before them) is still checked by its sha256."""

from __future__ import annotations

import io
import json
import random
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from mempager.errors import IndexStale
from mempager.index.lexical import MANIFEST, LexicalIndex
from mempager.index.lexical_npz import _npy_header, read_checked

WORDS = "alpha beta gamma delta omega river stone cloud ember frost main.py v1.2.3".split()


def built(n: int = 800) -> LexicalIndex:
    rng = random.Random(1)
    index = LexicalIndex()
    index.add(list(range(n)), [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))) for _ in range(n)])
    index.remove(range(0, n, 9))
    return index


def manifest(directory: Path) -> dict:  # type: ignore[type-arg]
    body: dict = json.loads((directory / MANIFEST).read_text())  # type: ignore[type-arg]
    return body


def data_file(directory: Path) -> Path:
    return directory / manifest(directory)["data"]["name"]


def answers(index: LexicalIndex) -> list[object]:
    return [index.labels().tolist(), *(index.search(q, 9) for q in ("alpha", "river stone", "main.py", "v1.2.3"))]


def member_at(path: Path, name: str) -> tuple[int, int]:
    """Where array ``name``'s member data starts in the zip, and its length."""
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(f"{name}.npy")
    raw = path.read_bytes()
    local = raw[info.header_offset : info.header_offset + 30]
    start = info.header_offset + 30 + int.from_bytes(local[26:28], "little") + int.from_bytes(local[28:30], "little")
    return start, info.file_size


def test_a_save_keeps_a_crc_of_each_array_and_loads_them_into_their_own_buffers(tmp_path: Path) -> None:
    index = built()
    index.save(tmp_path)
    crcs = manifest(tmp_path)["data"]["crc32"]
    assert set(crcs) == {"labels", "counts", "tok_term", "tok_pos", "vocab", "post_ptr", "post"}
    arrays = read_checked(data_file(tmp_path), data_file(tmp_path).stat().st_size, crcs)
    with np.load(data_file(tmp_path)) as npz:
        for name in npz.files:
            assert np.array_equal(arrays[name], npz[name]) and arrays[name].dtype == npz[name].dtype
    roots = []
    for array in arrays.values():
        while array.base is not None:
            array = array.base
        roots.append(id(array))
    assert len(set(roots)) == len(roots)  # a buffer each: an array the index keeps pins no other
    loaded = LexicalIndex()
    loaded.load(tmp_path)
    assert answers(loaded) == answers(index)


def flip(where: str) -> Callable[[Path], None]:
    def harm(directory: Path) -> None:
        path = data_file(directory)
        start, length = member_at(path, "tok_term")
        at = {"array data": start + length - 3, "npy header": start + 20, "zip directory": path.stat().st_size - 30}
        data = bytearray(path.read_bytes())
        data[at[where]] ^= 0x04
        path.write_bytes(bytes(data))

    return harm


def edit_crc(value: object) -> Callable[[Path], None]:
    def harm(directory: Path) -> None:
        body = manifest(directory)
        body["data"]["crc32"] = value(body["data"]["crc32"]) if callable(value) else value
        (directory / MANIFEST).write_text(json.dumps(body))

    return harm


def truncate(directory: Path) -> None:
    path = data_file(directory)
    path.write_bytes(path.read_bytes()[:-1])


DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "bit flip in an array": (flip("array data"), "checksum"),
    "bit flip in an array's header": (flip("npy header"), "rebuild"),
    "bit flip in the zip directory": (flip("zip directory"), "rebuild"),
    "truncated": (truncate, "bytes"),
    "a crc edited": (edit_crc(lambda c: {**c, "tok_pos": (c["tok_pos"] + 1) % 2**32}), "checksum"),
    "an array missing from the crcs": (edit_crc(lambda c: {k: v for k, v in c.items() if k != "post"}), "arrays"),
    "crcs not a map": (edit_crc([1, 2, 3]), "not a map"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damage_is_found_before_the_index_is_built(tmp_path: Path, damage: str) -> None:
    built().save(tmp_path)
    harm, message = DAMAGE[damage]
    harm(tmp_path)
    current = LexicalIndex()
    current.add([1], ["still here"])
    with pytest.raises(IndexStale, match=message):
        current.load(tmp_path)
    assert current.labels().tolist() == [1]


def test_a_valid_file_that_is_not_the_saved_one_is_refused(tmp_path: Path) -> None:
    """Same arrays, one token changed: a well-formed .npz whose zip CRCs agree with it, of the same size."""
    built().save(tmp_path)
    path = data_file(tmp_path)
    with np.load(path) as npz:
        arrays = {name: npz[name] for name in npz.files}
    arrays["tok_term"][0] = (arrays["tok_term"][0] + 1) % (len(arrays["post_ptr"]) - 1)  # another known term
    size = path.stat().st_size
    np.savez(path.with_suffix(""), **arrays)  # np.savez appends .npz
    assert path.stat().st_size == size
    with pytest.raises(IndexStale, match="checksum"):
        LexicalIndex().load(tmp_path)


@pytest.mark.parametrize("harm", ["none", "bit flip"])
def test_a_manifest_without_crcs_is_checked_by_its_sha256(tmp_path: Path, harm: str) -> None:
    index = built()
    index.save(tmp_path)
    body = manifest(tmp_path)
    del body["data"]["crc32"]  # as saves wrote it before
    (tmp_path / MANIFEST).write_text(json.dumps(body))
    if harm == "none":
        loaded = LexicalIndex()
        loaded.load(tmp_path)
        assert answers(loaded) == answers(index)
        return
    flip("array data")(tmp_path)
    with pytest.raises(IndexStale, match="sha256"):
        LexicalIndex().load(tmp_path)


@pytest.mark.parametrize(
    "array",
    [
        np.arange(401, dtype=np.int64),
        np.zeros((3, 4), np.float32),
        np.zeros(0, np.uint8),
        np.array(5),
        np.ones(7, ">i4"),
    ],
)
def test_headers_are_read_as_numpy_reads_them_without_its_parser(array: np.ndarray) -> None:
    """The header is matched by a pattern, not numpy's ``ast``-based reader (not thread safe on 3.11)."""
    buffer = io.BytesIO()
    np.save(buffer, array)
    data = buffer.getvalue()
    stream = io.BytesIO(data)
    np.lib.format.read_magic(stream)
    shape, _, dtype = np.lib.format.read_array_header_1_0(stream)
    assert _npy_header(data[:1024], "a", Path("x.npz")) == (shape, dtype, stream.tell())
    with pytest.raises(IndexStale):  # a header np.save would not write: the file is not ours
        _npy_header(data.replace(b"'fortran_order': False", b"'fortran_order': 0    "), "a", Path("x.npz"))
