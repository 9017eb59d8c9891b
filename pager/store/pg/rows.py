"""Row decoding and the column list shared by every query that returns memories."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from mempager.types import Memory, MemoryType, Scope, Source
from mempager.validate import make_uri

MEMORY_COLUMNS = (
    "label, id, actor, scope, type, text, source, confidence, importance, strength, created_at, "
    "updated_at, last_accessed_at, access_count, tags, metadata, content_hash, superseded_by, valid_until"
)

# what packing reads of a memory (``lanes.fusion.Shown``): ``ShownRow``
SHOWN_COLUMNS = "label, id, type, text, source, created_at, superseded_by, valid_until"


# Enum members by value: a dict look-up instead of EnumMeta.__call__, three per row and a fifth of
# the time it takes to turn a row into a Memory. An unknown value still goes through the Enum
# call, for its usual ValueError.
_TYPES = {t.value: t for t in MemoryType}
_SCOPES = {s.value: s for s in Scope}
_SOURCES = {s.value: s for s in Source}


def utc(value: datetime) -> datetime:
    """Aware UTC; a naive value is taken to be UTC already (as the DuckDB store does)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def maybe_utc(value: datetime | None) -> datetime | None:
    return None if value is None else utc(value)


def row_to_memory(row: Sequence[Any]) -> Memory:
    (
        label,
        mid,
        actor,
        scope,
        type_,
        text,
        source,
        confidence,
        importance,
        strength,
        created,
        updated,
        accessed,
        access_count,
        tags,
        metadata,
        chash,
        superseded,
        valid_until,
    ) = row[:19]
    mtype = _TYPES.get(type_) or MemoryType(type_)
    return Memory(
        label=int(label),
        id=mid,
        uri=make_uri(actor, mtype, mid),
        actor=actor,
        scope=_SCOPES.get(scope) or Scope(scope),
        type=mtype,
        text=text,
        source=_SOURCES.get(source) or Source(source),
        confidence=float(confidence),
        importance=float(importance),
        strength=float(strength),
        created_at=utc(created),
        updated_at=utc(updated),
        last_accessed_at=utc(accessed),
        access_count=int(access_count),
        tags=tuple(tags or ()),
        metadata={} if metadata == "{}" else json.loads(metadata),  # most memories have none
        content_hash=chash,
        superseded_by=superseded,
        valid_until=maybe_utc(valid_until),
    )


class ShownRow:
    """What packing reads of one memory (``lanes.fusion.Shown``), from ``SHOWN_COLUMNS``: a page
    fault hydrates ~20 candidates, and a whole ``Memory`` each (19 columns, four datetimes, its
    metadata) was a third of that read's time. Its fields are those ``row_to_memory`` would set."""

    __slots__ = ("label", "uri", "type", "text", "source", "created_at", "superseded_by", "valid_until")

    def __init__(self, actor: str, row: Sequence[Any]) -> None:
        label, mid, type_, text, source, created, superseded, valid_until = row
        self.label = int(label)
        self.type = _TYPES.get(type_) or MemoryType(type_)
        self.uri = make_uri(actor, self.type, mid)
        self.text = text
        self.source = _SOURCES.get(source) or Source(source)
        self.created_at = utc(created)
        self.superseded_by = superseded
        self.valid_until = maybe_utc(valid_until)
