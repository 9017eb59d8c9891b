"""Filters on what a page fault or a recall may return: tags and metadata, matched exactly.

``Where(tags=("billing",), metadata={"project": "atlas"})`` keeps a memory that carries every
tag and has every metadata key with exactly that value. The lanes rank as always; the filter
then keeps the candidates that match, before packing, so the page is filled with matching
memories only. Each lane looks ``DEPTH_FACTOR`` times deeper when a filter is set, so a filter
that keeps one candidate in that many still fills the page; ``recall`` with the same filter is
exhaustive.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mempager.errors import InvalidInput
from mempager.types import Memory

DEPTH_FACTOR = 4


@dataclass(frozen=True, slots=True)
class Where:
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.tags or self.metadata)

    def matches(self, memory: Memory) -> bool:
        if self.tags and not set(self.tags) <= set(memory.tags):
            return False
        return all(key in memory.metadata and memory.metadata[key] == value for key, value in self.metadata.items())


ANYTHING = Where()  # no filter: the default of every ``where`` parameter


def where_of(tags: Sequence[str] | None = None, metadata: Mapping[str, Any] | None = None) -> Where:
    """A checked filter: a list of tags (not a lone string) and a mapping with string keys."""
    if isinstance(tags, str) or (tags is not None and not all(isinstance(t, str) for t in tags)):
        raise InvalidInput(f"tags must be a list of strings, got {tags!r}; wrap one tag in a list: [{tags!r}]")
    if metadata is not None and (not isinstance(metadata, Mapping) or not all(isinstance(k, str) for k in metadata)):
        raise InvalidInput(
            f"metadata must be a mapping with string keys, e.g. {{'project': 'atlas'}}, got {metadata!r}"
        )
    return Where(tuple(tags or ()), dict(metadata or {}))
