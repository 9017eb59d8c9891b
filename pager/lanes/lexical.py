"""The lexical lane: BM25 over one actor's memories, a cache derived from the store.

It is updated in the same call as every committed write, update and delete (the store tells
its listeners under its write lock), so a memory written a moment ago is found by its words
before it has a vector. Saved beside the store with the highest memory revision it holds; on
open it is verified, caught up from the store, or rebuilt.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mempager.errors import IndexStale
from mempager.index.episodes import ContextConfig
from mempager.patterns import text_for_index
from mempager.types import Memory, MemoryType

log = logging.getLogger("mempager.lexical")


class LexicalLane:
    def __init__(
        self,
        store: Any,
        actor: str,
        directory: Path | None,
        store_id: str = "",
        context: ContextConfig | None = None,
        context_types: tuple[MemoryType, ...] = (MemoryType.EVENT,),
    ) -> None:
        from mempager.index.lexical import LexicalIndex  # lazily: `import mempager` stays light

        def make() -> Any:
            return LexicalIndex(context=context)

        self._make = make
        self.store = store
        self.actor = actor
        self.directory = directory
        self.store_id = store_id
        # memories of these types are scored with their episode's neighbours (index.episodes)
        self.context_types = context_types if context is not None and context.window > 0 else ()
        self.index: Any = self._make()
        self.lock = threading.RLock()
        self.dirty = False  # a listener failed: rebuild before the next search
        self.changed = True  # anything the saved files lack
        self.opened_how = "new"

    def _meta(self) -> dict[str, Any]:
        return {"store_id": self.store_id, "actor": self.actor}

    def open(self) -> str:
        with self.lock:
            if self.directory is None or not self.directory.exists():
                return self.rebuild("no saved index")
            try:
                meta = self.index.load(self.directory, expect_meta=self._meta())
            except IndexStale as exc:
                log.warning("saved lexical index for %s is stale, rebuilding: %s", self.actor, exc)
                return self.rebuild(f"stale: {exc}")
            return self._catch_up(int(meta.get("rev", 0)))

    def rebuild(self, why: str) -> str:
        with self.lock:
            self.index = self._make()
            labels, texts = self.store.texts_since(self.actor, 0)
            if labels:
                self.index.add(labels, [text_for_index(t) for t in texts])
            self._place_all()
            self.dirty = False
            self.changed = True
            self.opened_how = f"rebuilt ({why}): {len(labels)} documents"
            return self.opened_how

    def _catch_up(self, rev: int) -> str:
        labels, texts = self.store.texts_since(self.actor, rev)
        if labels:
            self.index.add(labels, [text_for_index(t) for t in texts])
        live = self.store.live_labels(self.actor)
        extra = np.setdiff1d(self.index.labels(), live, assume_unique=True)
        if len(extra):
            self.index.remove(extra.tolist())
        if len(self.index) != len(live):
            return self.rebuild(f"{len(self.index)} indexed vs {len(live)} stored after catch-up")
        self._place_all()
        self.opened_how = f"loaded: +{len(labels)} caught up, -{len(extra)} removed"
        self.changed = bool(labels or len(extra))
        return self.opened_how

    def save(self) -> None:
        if self.directory is None or not (self.changed or self.dirty):
            return
        with self.lock:
            if self.dirty:
                self.rebuild("a write could not be applied")
            rev = self.store.max_rev(self.actor)  # read before the snapshot: catch-up may redo, never miss
            self.directory.mkdir(parents=True, exist_ok=True)
            self.index.save(self.directory, meta={**self._meta(), "rev": rev})
            self.changed = False

    def apply(self, upserted: Sequence[Memory], removed: Sequence[int]) -> None:
        """Called by the store, under its write lock, after every committed change."""
        with self.lock:
            self.changed = True
            try:
                if upserted:
                    self.index.add(
                        [m.label for m in upserted],
                        [text_for_index(m.text) for m in upserted],
                        [self._time(m) for m in upserted],
                    )
                if removed:
                    self.index.remove(list(removed))
            except Exception:  # noqa: BLE001 - the write is durable; rebuild the cache before it is read
                log.exception("lexical index update failed for actor %s; it will be rebuilt", self.actor)
                self.dirty = True

    def _time(self, m: Memory) -> float:
        """A memory's place in its episode (epoch seconds), NaN when its type has no context keys."""
        return m.created_at.timestamp() if m.type in self.context_types else math.nan

    def _place_all(self) -> None:
        """Every indexed memory of the context types in its episode (after a rebuild or a load)."""
        if not self.context_types:
            return
        columns = getattr(self.store, "created_of_types", None)  # the embedded store's mirror: arrays
        if columns is not None:
            labels, times = columns(self.actor, list(self.context_types))
            self.index.place(labels, times)
            return
        found = self.store.of_types(self.actor, list(self.context_types), order="oldest", limit=2**62)
        self.index.place([m.label for m in found], [m.created_at.timestamp() for m in found])

    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        with self.lock:
            if self.dirty:
                self.rebuild("a write could not be applied")
            index = self.index
        result: list[tuple[int, float]] = index.search(query, k)
        return result

    def search_scored(
        self, query: str, k: int, also: Sequence[int] | Callable[[], Sequence[int]]
    ) -> tuple[list[tuple[int, float]], dict[int, float]]:
        with self.lock:
            if self.dirty:
                self.rebuild("a write could not be applied")
            index = self.index
        top, extra = index.search_scored(query, k, also)
        return list(top), dict(extra)

    def spoken_by(self, query: str, labels: Iterable[int]) -> list[int]:
        """The memories among ``labels`` whose speaker prefix ``query`` names (index.speakers)."""
        with self.lock:
            if self.dirty:
                self.rebuild("a write could not be applied")
            index = self.index
        said: list[int] = index.spoken_by(query, labels)
        return said

    def match(self, query: str) -> list[tuple[int, float]]:
        with self.lock:
            if self.dirty:
                self.rebuild("a write could not be applied")
            index = self.index
        result: list[tuple[int, float]] = index.match(query)
        return result

    def __len__(self) -> int:
        return len(self.index)
