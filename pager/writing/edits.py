"""Correcting a memory in place, keeping dedup honest: the edited text dedups as a fresh write would."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from mempager.errors import InvalidInput
from mempager.lanes.retrieval import Retriever
from mempager.patterns import PatternSpec
from mempager.protocols import Store
from mempager.store.writes import dedup_key_of
from mempager.types import Memory, MemoryType, NewMemory
from mempager.validate import parse_time
from mempager.writing.build import MemoryBuilder


class Editor:
    def __init__(
        self,
        store: Store,
        actor: str,
        *,
        build: MemoryBuilder,
        retriever: Retriever,
        notify: Callable[[], None],
        rewriting: Callable[[], AbstractContextManager[None]],
    ) -> None:
        self.store = store
        self.actor = actor
        self.build = build
        self.retriever = retriever
        self.notify = notify  # wakes the embedding workers: a new text needs a new vector
        self.rewriting = rewriting  # the old text's bytes stay in the files: erased like a forget

    def update(self, uri: str, **changes: Any) -> Memory:
        """Correct a memory in place: text, tags, importance, confidence, metadata, valid_until.

        A new text is re-embedded in the background (its old vector stops answering at once),
        re-indexed lexically in this call, and deduplicated as a fresh write of it would be: a
        later write of the old text is a new memory, a write of the new text reinforces this one.
        A text another memory of the same type already holds is refused (``InvalidInput`` naming
        it): two memories saying one thing would leave dedup to pick either. The old text and its
        vector are erased from the files as a hard forget's are (the same background pass).
        """
        allowed = {"text", "tags", "importance", "confidence", "metadata", "valid_until"}
        unknown = set(changes) - allowed
        if unknown:
            raise InvalidInput(f"cannot update {sorted(unknown)}; updatable: {sorted(allowed)}")
        current = self.retriever.get(uri)
        probe = self.build(
            current.type,
            changes.get("text", current.text),
            **{k: v for k, v in changes.items() if k in ("tags", "importance", "confidence", "metadata")},
        )
        clean = {k: getattr(probe, k) for k in changes if k in ("text", "tags", "importance", "confidence", "metadata")}
        if "valid_until" in changes:
            clean["valid_until"] = (
                None if changes["valid_until"] is None else parse_time(changes["valid_until"], "valid_until")
            )
        reworded = "text" in clean and clean["text"] != current.text
        if reworded:
            clean["dedup_key"] = self._dedup_key_for(current, clean["text"])
        with self.rewriting() if reworded else contextlib.nullcontext():
            updated = self.store.update(self.actor, current.id, op="update", **clean)
        self.notify()
        return updated

    def _dedup_key_for(self, current: Memory, text: str) -> str:
        """The key a write of ``text`` would dedup by, in the form ``current``'s key has."""
        if current.type is MemoryType.PATTERN:
            return PatternSpec.decode(text).dedup_key()
        created = None
        if current.type is MemoryType.EVENT:  # timed when the event was written with its time
            untimed = self.store.find(self.actor, current.type, dedup_key_of(self.build(current.type, current.text)))
            created = None if untimed is not None and untimed.id == current.id else current.created_at
        key = dedup_key_of(NewMemory(actor=self.actor, type=current.type, text=text, created_at=created))
        other = self.store.find(self.actor, current.type, key)
        if other is not None and other.id != current.id:
            raise InvalidInput(f"{other.uri} already says that; update or forget that one instead")
        return key
