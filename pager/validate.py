"""Input checks that run before anything touches the store, plus uri and time parsing."""

from __future__ import annotations

import hashlib
import re
import secrets
import unicodedata
from collections.abc import Sequence
from datetime import date, datetime, timedelta, timezone
from typing import Any

import numpy as np
import numpy.typing as npt

from mempager.errors import (
    EmptyText,
    InvalidActor,
    InvalidText,
    InvalidTime,
    InvalidUri,
    TextTooLong,
    UnknownType,
)
from mempager.types import MemoryType

_ACTOR = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@:+-]{0,127}$")
_URI = re.compile(r"^mem://(?P<actor>[^/]+)/(?P<type>[a-z]+)/(?P<id>[0-9a-f]{16,32})$")
_WS = re.compile(r"\s+")
_TYPE_BY_VALUE = {t.value: t for t in MemoryType}


def check_text(text: object, max_bytes: int, what: str = "text") -> str:
    if not isinstance(text, str):
        raise InvalidText(f"{what} must be a str, got {type(text).__name__}; pass the text itself")
    if not text.strip():
        raise EmptyText(f"{what} is empty or whitespace only; pass the words to remember")
    if "\x00" in text:
        raise InvalidText(f"{what} contains a NUL byte; strip \\x00 characters and try again")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidText(
            f"{what} contains a lone surrogate at position {exc.start}; "
            "decode your input with errors='replace' before storing it"
        ) from exc
    if size > max_bytes:
        raise TextTooLong(
            f"{what} is {size:,} bytes, over the {max_bytes:,}-byte limit "
            "(PagerConfig.max_text_bytes); split it or store a summary"
        )
    return text


def check_actor(actor: object) -> str:
    if not isinstance(actor, str) or not _ACTOR.match(actor) or ".." in actor:
        shown = actor if not isinstance(actor, str) else actor[:80]
        raise InvalidActor(
            f"actor {shown!r} is not usable: use 1-128 characters from letters, digits and ._@:+- "
            "starting with a letter or digit (no slashes, no '..')"
        )
    return actor


def check_type(value: object) -> MemoryType:
    if isinstance(value, MemoryType):
        return value
    known_type = _TYPE_BY_VALUE.get(value) if isinstance(value, str) else None
    if known_type is not None:
        return known_type
    try:
        return MemoryType(str(value).strip().lower())
    except ValueError:
        known = ", ".join(t.value for t in MemoryType)
        raise UnknownType(f"unknown memory type {value!r}; use one of: {known}") from None


def normalize(text: str) -> str:
    r"""Dedup form: NFKC, case-folded, whitespace collapsed, trailing punctuation dropped.

    ``str.split()`` splits on exactly the characters regex ``\s`` matches (a test checks every
    code point), so this equals the regex form every stored dedup key was made with —
    ``re.sub(r"[\s.!;,]+$", "", re.sub(r"\s+", " ", folded).strip())`` — at a fifth of the cost:
    once whitespace is collapsed to single spaces, that trailing run is what ``rstrip(" .!;,")``
    removes. (tests/pager/test_fast_forms.py holds the two forms equal.)
    """
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split()).rstrip(" .!;,")


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


DIGEST_BITS = 60  # a content digest: this many leading bits of the content hash
_DIGITS = DIGEST_BITS // 4
_HEX = np.full(256, -1, np.int64)
_HEX[np.frombuffer(b"0123456789abcdef", np.uint8)] = np.arange(16)
_HEX[np.frombuffer(b"ABCDEF", np.uint8)] = np.arange(10, 16)


def content_digest(chash: str | None) -> int:
    """The first 60 bits of a content hash (hex sha256) as an int >= 0; -1 for none. 8 bytes a memory
    instead of a dict entry and a string; two texts agree on 60 bits once in 10^18 comparisons.
    A hash that is not hex (a test's, a foreign store's) is hashed first."""
    if not chash:
        return -1
    head = chash[:_DIGITS]
    if len(head) < _DIGITS or head.strip("0123456789abcdefABCDEF"):
        head = hashlib.sha256(chash.encode("utf-8")).hexdigest()[:_DIGITS]
    return int(head, 16)


def content_digests(hashes: Sequence[str | None]) -> npt.NDArray[np.int64]:
    """``content_digest`` of each content hash, vectorised for the hex sha256 ones the store writes."""
    values = np.array([h if h and h.isascii() else "" for h in hashes], dtype=f"S{_DIGITS}")
    nibbles = _HEX[values.view(np.uint8).reshape(len(values), _DIGITS)] if len(values) else np.zeros((0, _DIGITS))
    out: npt.NDArray[np.int64] = nibbles.astype(np.int64) @ (16 ** np.arange(_DIGITS - 1, -1, -1, dtype=np.int64))
    for i in np.flatnonzero((nibbles < 0).any(axis=1)).tolist():  # not hex: rare, one by one
        out[i] = content_digest(hashes[i])
    return out


def new_ids(n: int) -> list[str]:
    """``n`` fresh memory ids, each 16 hex digits of ``secrets`` randomness (as ``token_hex(8)``
    each): one read of the OS's random source for the batch instead of one a memory."""
    blob = secrets.token_bytes(8 * n).hex()
    return [blob[i : i + 16] for i in range(0, 16 * n, 16)]


def make_uri(actor: str, type_: MemoryType, memory_id: str) -> str:
    return f"mem://{actor}/{type_._value_}/{memory_id}"


def parse_uri(uri: object) -> tuple[str, MemoryType, str]:
    if not isinstance(uri, str):
        raise InvalidUri(f"uri must be a str like mem://<actor>/<type>/<id>, got {type(uri).__name__}")
    m = _URI.match(uri.strip())
    if not m:
        raise InvalidUri(
            f"{uri[:200]!r} is not a memory uri; expected mem://<actor>/<type>/<id> "
            "as returned by remember_* or shown by `mempager recall`"
        )
    return m["actor"], check_type(m["type"]), m["id"]


_HUMAN_FORMATS = (
    "%I:%M %p on %d %B, %Y",  # LoCoMo-style "1:56 pm on 8 May, 2023"
    "%I:%M %p on %d %b, %Y",
    "%d %B %Y",
    "%d %b %Y",
    "%B %d, %Y",
    "%b %d, %Y",
    "%Y/%m/%d %H:%M:%S",
    "%Y/%m/%d %H:%M",
    "%Y/%m/%d",
    "%d/%m/%Y %H:%M",
    "%m/%d/%Y %H:%M",
    "%a, %d %b %Y %H:%M:%S",
)


def to_utc(value: datetime) -> datetime:
    """Aware UTC datetime; a naive one is taken to be UTC already."""
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def parse_time(value: Any, what: str = "created_at") -> datetime:
    """ISO-8601 strings, datetimes, dates, epoch seconds and common human log formats."""
    if isinstance(value, datetime):
        return to_utc(value)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=timezone.utc)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(float(value), tz=timezone.utc)
        except (OverflowError, OSError, ValueError) as exc:
            raise InvalidTime(f"{what}={value!r} is not a usable epoch time") from exc
    if isinstance(value, str):
        text = value.strip()
        iso = text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text
        try:
            return to_utc(datetime.fromisoformat(iso))
        except ValueError:
            pass
        squashed = _WS.sub(" ", text)
        for fmt in _HUMAN_FORMATS:
            try:
                return to_utc(datetime.strptime(squashed, fmt))
            except ValueError:
                continue
    raise InvalidTime(
        f"{what}={value!r} is not a time mempager can read; use ISO-8601 such as '2023-05-08T13:56:00' or a datetime"
    )


_SINCE = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")


def parse_since(value: Any, now: datetime | None = None) -> datetime:
    """A time, or a span back from now: "30m", "12h", "7d", "2w"."""
    if isinstance(value, str) and (m := _SINCE.match(value)):
        seconds = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[m.group(2)] * int(m.group(1))
        return (now or datetime.now(timezone.utc)) - timedelta(seconds=seconds)
    return parse_time(value, "since")
