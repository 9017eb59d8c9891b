"""Turning a caller's arguments into a validated ``NewMemory``: every check a write runs first."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from difflib import get_close_matches
from typing import Any

from mempager.config import PagerConfig
from mempager.errors import InvalidInput, InvalidText
from mempager.types import NewMemory, Scope, Source
from mempager.validate import check_text, check_type, parse_time

METADATA_MAX_DEPTH = 32
METADATA_MAX_BYTES = 100_000


def check_unit(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise InvalidInput(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)


def check_tags(tags: Iterable[str]) -> tuple[str, ...]:
    if isinstance(tags, str):
        raise InvalidInput(f"tags must be a list of strings, got the string {tags!r}; wrap it: [{tags!r}]")
    out = tuple(tags)
    for tag in out:
        if not isinstance(tag, str) or not tag.strip() or "\x00" in tag or len(tag) > 200:
            raise InvalidInput(f"tag {tag!r} is not usable: non-empty text up to 200 characters")
        try:
            tag.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidText(f"tag {tag[:40]!r} holds a lone surrogate; clean it before storing") from None
    return out


def check_metadata(value: object) -> dict[str, Any]:
    """Plain JSON with string keys, at most 32 levels deep and 100 KB: what every reader can load."""
    if not isinstance(value, Mapping):
        raise InvalidInput(f"metadata must be a mapping, got {type(value).__name__}")

    def walk(node: object, depth: int) -> None:
        if depth > METADATA_MAX_DEPTH:
            raise InvalidInput(f"metadata is nested deeper than {METADATA_MAX_DEPTH} levels; flatten it")
        if isinstance(node, Mapping):
            for key, item in node.items():
                if not isinstance(key, str):
                    raise InvalidInput(f"metadata keys must be strings, got {type(key).__name__} {key!r}")
                walk(item, depth + 1)
        elif isinstance(node, (list, tuple)):
            for item in node:
                walk(item, depth + 1)
        elif not (
            node is None
            or isinstance(node, (str, bool, int))
            or (isinstance(node, float) and node == node and abs(node) != float("inf"))
        ):
            raise InvalidInput(
                f"metadata values must be JSON (str, number, bool, null, list, object), got {type(node).__name__}"
            )

    walk(value, 0)
    try:
        size = len(json.dumps(value, ensure_ascii=False).encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidText("metadata holds a lone surrogate; clean it before storing") from None
    if size > METADATA_MAX_BYTES:
        raise InvalidInput(f"metadata is {size:,} bytes, over {METADATA_MAX_BYTES:,}; store large data elsewhere")
    return dict(value)


# what a caller may set on a memory besides its type and text (``remember(type, text, **fields)``)
FIELDS = frozenset({"source", "scope", "confidence", "importance", "strength", "created_at", "tags", "metadata"})


def check_fields(fields: Iterable[str]) -> None:
    unknown = sorted(set(fields) - FIELDS)
    if unknown:
        hints = [
            f"{name!r} (did you mean {close[0]!r}?)"
            for name in unknown
            for close in [get_close_matches(name, FIELDS, 1)]
            if close
        ]
        named = ", ".join(hints) if len(hints) == len(unknown) else ", ".join(repr(u) for u in unknown)
        raise InvalidInput(f"unknown memory field {named}; a memory takes {', '.join(sorted(FIELDS))}")


class MemoryBuilder:
    """Builds this actor's ``NewMemory`` from loose arguments, or raises a typed error naming the bad value."""

    def __init__(self, actor: str, config: PagerConfig) -> None:
        self.actor = actor
        self.config = config

    def __call__(self, type_: object, text: object, **fields: Any) -> NewMemory:
        check_fields(fields)
        mtype = check_type(type_)
        body = check_text(text, self.config.max_text_bytes)
        for name in ("importance", "confidence", "strength"):
            if name in fields:
                fields[name] = check_unit(name, fields[name])
        if "tags" in fields:
            fields["tags"] = check_tags(fields["tags"])
        if fields.get("created_at") is not None:
            fields["created_at"] = parse_time(fields["created_at"])
        if "metadata" in fields:
            fields["metadata"] = check_metadata(fields["metadata"])
        for name, enum in (("source", Source), ("scope", Scope)):
            if name in fields and not isinstance(fields[name], enum):
                try:
                    fields[name] = enum(fields[name])
                except ValueError:
                    allowed = ", ".join(e.value for e in enum)
                    raise InvalidInput(f"{name} must be one of {allowed}, got {fields[name]!r}") from None
        return NewMemory(actor=self.actor, type=mtype, text=body, **fields)


def fields_of(item: NewMemory) -> dict[str, Any]:
    return {name: getattr(item, name) for name in NewMemory.__dataclass_fields__}
