"""Saving and loading a lexical index: a content-named ``.npz`` of the live documents' tokens plus
``lexical.json`` naming it, written atomically (data first, then the manifest), and verified on load
(format, tokenizer, size, checksums, counts, the owner's ``meta``): any difference is ``IndexStale``.

The manifest holds the CRC-32 of each array the ``.npz`` holds (the zip's own CRC of that member,
kept where the file cannot change it): opening reads each array straight into its own buffer with
positional reads and checks its CRC on the way (``lexical_npz``), instead of reading the whole file,
hashing it with sha256 and copying every array out of the zip (at a million documents 1.3 s of CPU
became ~0.4 s). A manifest without CRCs (saves before them) is checked by its sha256, as then.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from mempager.errors import IndexStale, InvalidInput
from mempager.index.lexical_npz import member_crcs, read_checked
from mempager.index.lexical_postings import checked_csr

Int64s = npt.NDArray[np.int64]
Int32s = npt.NDArray[np.int32]
KIND = "lexical"
FORMAT_VERSION = 1
MANIFEST = "lexical.json"
_DATA_PREFIX = "lexical-"


@dataclass(frozen=True, slots=True)
class Docs:
    """Live documents as flat arrays: the save format, and the input of a (re)build."""

    labels: Int64s
    counts: Int64s  # tokens per document
    tok_term: Int32s  # term id of each token, documents back to back
    tok_pos: Int32s
    terms: list[str]
    # each term's postings (rows: documents in the order above), CSR; absent in files of older saves
    post_ptr: Int64s | None = None
    post: Int32s | None = None


def save_docs(directory: Path, docs: Docs, *, tokenizer: str, k1: float, b: float, meta: Mapping[str, Any]) -> None:
    """Write ``docs`` (and the scoring parameters and ``meta`` they were saved with) atomically."""
    meta_plain = _plain_meta(meta)
    directory.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    vocab = np.frombuffer("\n".join(docs.terms).encode(), np.uint8)
    if docs.post_ptr is None or docs.post is None:  # a caller's Docs without postings
        ptr, post = np.zeros(0, np.int64), np.zeros((2, 0), np.int32)
    else:
        ptr, post = docs.post_ptr, docs.post
    np.savez(
        buf,
        labels=docs.labels,
        counts=docs.counts,
        tok_term=docs.tok_term,
        tok_pos=docs.tok_pos,
        vocab=vocab,
        post_ptr=ptr,
        post=post,
    )
    data = buf.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    crcs = member_crcs(data)
    name = f"{_DATA_PREFIX}{digest[:16]}.npz"
    _write_atomic(directory / name, data)
    manifest = {
        "format_version": FORMAT_VERSION,
        "kind": KIND,
        "tokenizer": tokenizer,
        "k1": k1,
        "b": b,
        "count": len(docs.labels),
        "terms": len(docs.terms),
        "tokens": len(docs.tok_term),
        "max_label": int(docs.labels.max()) if len(docs.labels) else None,
        "data": {"name": name, "sha256": digest, "size": len(data), "crc32": crcs},
        "meta": meta_plain,
        "written_at": datetime.now(timezone.utc).isoformat(),
    }
    # The data file is durable before the manifest names it; a crash keeps the previous pair.
    _write_atomic(directory / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True).encode())
    for old in directory.glob(f"{_DATA_PREFIX}*.npz"):
        if old.name != name:
            old.unlink(missing_ok=True)


def load_docs(directory: Path, tokenizer: str, expect_meta: Mapping[str, Any]) -> tuple[Docs, dict[str, Any]]:
    """The saved documents and ``meta``, after checking them against the manifest and ``expect_meta``."""
    manifest = _read_manifest(directory / MANIFEST, tokenizer, _plain_meta(expect_meta))
    return _read_docs(directory, manifest), dict(manifest["meta"])


def _plain_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    """``meta`` as it reads back from JSON (tuples become lists), so comparisons are like for like."""
    try:
        plain: dict[str, Any] = json.loads(json.dumps(dict(meta), allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"index meta must be plain JSON (str/int/float/bool/None/list/dict): {exc}") from exc
    return plain


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)  # no litter; the exception still propagates
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # the rename lives in the directory
    finally:
        os.close(dir_fd)


def _read_manifest(path: Path, tokenizer: str, expect: dict[str, Any]) -> dict[str, Any]:
    try:
        body = json.loads(path.read_bytes())
    except FileNotFoundError as exc:
        raise IndexStale(f"no saved lexical index at {path}; build it from the store") from exc
    except (OSError, ValueError) as exc:
        raise IndexStale(f"cannot read {path} ({exc}); rebuild the lexical index from the store") from exc
    if not isinstance(body, dict) or not isinstance(body.get("data"), dict) or not isinstance(body.get("meta"), dict):
        raise IndexStale(f"{path} is not a lexical index manifest; rebuild the lexical index from the store")
    wanted = {"format_version": FORMAT_VERSION, "kind": KIND, "tokenizer": tokenizer}
    problems = [
        f"{key} is {body.get(key)!r}, expected {want!r}" for key, want in wanted.items() if body.get(key) != want
    ]
    meta = body["meta"]
    problems += [
        f"meta {key!r} is {meta.get(key, '<missing>')!r}, expected {want!r}"
        for key, want in expect.items()
        if key not in meta or meta[key] != want
    ]
    if problems:
        raise IndexStale(f"lexical index at {path} is stale: {'; '.join(problems)}; rebuild it from the store")
    return body


def _distinct(labels: Int64s) -> int:
    """How many distinct labels (sorting: np.unique hashes, 7x slower on a million)."""
    ordered = np.sort(labels)
    return int(len(ordered) - np.count_nonzero(ordered[1:] == ordered[:-1])) if len(ordered) else 0


def _postings(arrays: Mapping[str, npt.NDArray[Any]]) -> tuple[Int64s, Int32s] | tuple[()]:
    """The saved CSR postings, if the file has them (saves before they existed, or of a Docs
    without them, hold the tokens only: the index is then built from those)."""
    if "post_ptr" not in arrays or not len(arrays["post_ptr"]):
        return ()
    return arrays["post_ptr"].astype(np.int64, copy=False), arrays["post"].astype(np.int32, copy=False)


def _read_hashed(path: Path, entry: Mapping[str, Any]) -> dict[str, npt.NDArray[Any]]:
    """The arrays of a save whose manifest has no CRCs: the whole file read and its sha256 checked."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise IndexStale(f"cannot read {path} ({exc}); rebuild the lexical index from the store") from exc
    if len(data) != entry.get("size") or hashlib.sha256(data).hexdigest() != entry.get("sha256"):
        raise IndexStale(f"{path} does not match the size/sha256 in its manifest (truncated or corrupt); rebuild")
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            return {key: npz[key] for key in npz.files}
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise IndexStale(f"{path} is not a readable lexical index ({exc}); rebuild") from exc


def _read_docs(directory: Path, manifest: dict[str, Any]) -> Docs:
    entry = manifest["data"]
    name = entry.get("name")
    if not isinstance(name, str) or Path(name).name != name or not name.startswith(_DATA_PREFIX):
        raise IndexStale(f"manifest in {directory} names {name!r}, not a lexical data file; rebuild")
    path = directory / name
    crcs = entry.get("crc32")
    if crcs is not None:
        arrays = read_checked(path, entry.get("size"), crcs)
    else:
        arrays = _read_hashed(path, entry)
    try:
        blob = arrays["vocab"].tobytes().decode("utf-8")
        docs = Docs(
            arrays["labels"].astype(np.int64, copy=False),
            arrays["counts"].astype(np.int64, copy=False),
            arrays["tok_term"].astype(np.int32, copy=False),
            arrays["tok_pos"].astype(np.int32, copy=False),
            blob.split("\n") if blob else [],
            *_postings(arrays),
        )
    except (ValueError, KeyError) as exc:  # UnicodeDecodeError is a ValueError
        raise IndexStale(f"{path} is not a readable lexical index ({exc}); rebuild") from exc
    n_tok, labels = len(docs.tok_term), docs.labels
    checks = {
        "count": (len(labels), manifest.get("count")),
        "terms": (len(docs.terms), manifest.get("terms")),
        "tokens": (n_tok, manifest.get("tokens")),
        "positions": (len(docs.tok_pos), n_tok),
        "max_label": (int(labels.max()) if len(labels) else None, manifest.get("max_label")),
        "token sum": (int(docs.counts.sum()), n_tok),
        "distinct labels": (_distinct(labels), len(labels)),
        "term ids in range": (
            bool(n_tok == 0 or (docs.tok_term.min() >= 0 and docs.tok_term.max() < len(docs.terms))),
            True,
        ),
    }
    problems = [f"{key} {got!r} != {want!r}" for key, (got, want) in checks.items() if got != want]
    if problems or (len(docs.counts) and docs.counts.min() < 0):
        raise IndexStale(f"{path} disagrees with its manifest ({'; '.join(problems)}); rebuild")
    if docs.post_ptr is not None and docs.post is not None:
        checked_csr(docs.post_ptr, docs.post, len(docs.terms), len(labels), n_tok)
    return docs
