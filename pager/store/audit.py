"""A tamper-evident audit trail: every mutation appends a hash-chained entry in its transaction.

Entries hold a content hash, never content, so forgetting a memory erases its text without
breaking the chain. ``verify`` recomputes every link and names the first entry that does not match.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np

from mempager.types import AuditEntry, AuditReport

GENESIS = "0" * 64


def _stamp(at: datetime) -> str:
    return at.astimezone(timezone.utc).replace(tzinfo=None).isoformat(timespec="microseconds")


def _digest(seq: int, stamp: str, actor: str, op: str, uri: str, chash: str, prev: str) -> str:
    body = "\x1f".join([str(seq), stamp, actor, op, uri, chash, prev])
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def link(seq: int, at: datetime, actor: str, op: str, uri: str, chash: str, prev: str) -> str:
    return _digest(seq, _stamp(at), actor, op, uri, chash, prev)


def chain(tail: tuple[int, str], at: datetime, rows: Sequence[tuple[str, str, str, str]]) -> list[AuditEntry]:
    """Entries for (actor, op, uri, content_hash) rows, continuing from (seq, hash) ``tail``."""
    seq, prev = tail
    stamp = _stamp(at)  # one time for the whole batch, formatted once
    out = []
    for actor, op, uri, chash in rows:
        seq += 1
        digest = _digest(seq, stamp, actor, op, uri, chash, prev)
        out.append(AuditEntry(seq, at, actor, op, uri, chash, prev, digest))
        prev = digest
    return out


def insert(con: Any, entries: Sequence[AuditEntry]) -> None:
    if not entries:
        return
    if len(entries) == 1:
        e = entries[0]
        con.execute(
            "INSERT INTO audit VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [e.seq, e.at.replace(tzinfo=None), e.actor, e.op, e.uri, e.content_hash, e.prev_hash, e.hash],
        )
        return
    cols = {  # noqa: F841 - read by DuckDB's replacement scan
        "seq": np.array([e.seq for e in entries], dtype=np.int64),
        "recorded_at": _naive_times([e.at for e in entries]),
        **{
            name: np.array([getattr(e, name) for e in entries], dtype=object)
            for name in ("actor", "op", "uri", "content_hash", "prev_hash", "hash")
        },
    }
    con.execute("INSERT INTO audit SELECT seq, recorded_at, actor, op, uri, content_hash, prev_hash, hash FROM cols")


def _naive_times(times: list[datetime]) -> np.ndarray:
    """Naive datetime64 values of aware times; a batch usually shares one time, converted once."""
    first = times[0]
    if all(t is first for t in times):
        return np.full(len(times), np.datetime64(first.replace(tzinfo=None), "us"))
    return np.array([t.replace(tzinfo=None) for t in times], dtype="datetime64[us]")


def verify(rows: Sequence[tuple[Any, ...]]) -> AuditReport:
    """Walk (seq, at, actor, op, uri, content_hash, prev_hash, hash) rows in sequence order."""
    prev, expected_seq = GENESIS, 1
    for n, (seq, at, actor, op, uri, chash, prev_hash, digest) in enumerate(rows):
        when = at.replace(tzinfo=timezone.utc)
        if seq != expected_seq:
            return AuditReport(False, n, int(seq), f"sequence gap: expected {expected_seq}, found {seq}")
        if prev_hash != prev:
            return AuditReport(False, n, int(seq), "previous-hash link does not match the entry before it")
        if link(seq, when, actor, op, uri, chash, prev_hash) != digest:
            return AuditReport(False, n, int(seq), "entry hash does not match its contents")
        prev, expected_seq = digest, expected_seq + 1
    return AuditReport(True, len(rows), None, "chain intact")
