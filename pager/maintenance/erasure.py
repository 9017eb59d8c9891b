"""Erasure: forget (really), and the pass that erases what deleted memories left in files.

A hard forget leaves no byte of the memory behind: not in the store file, not in any lane or
saved index (other models' too), not in the review queue, not in a pattern inverted from it.
The delete is immediate (out of every lane, page and result when ``forget`` returns); erasing
the bytes from the files is a pass shared by every forget of the last ``erase_delay_seconds``
(maintenance/erasure_queue.py), run at ``close()``, and at once with ``wait=True`` /
``erase_now()``. The store holds a durable mark until the pass is done, so an open after a
crash finishes the erasure before it serves anything.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from mempager.config import PagerConfig
from mempager.errors import InvalidInput, MemoryNotFound
from mempager.lanes.opening import actor_index_dir
from mempager.lanes.retrieval import Retriever
from mempager.maintenance.erasure_queue import ErasureQueue
from mempager.patterns import text_for_index
from mempager.protocols import LexicalLaneLike, SemanticLaneLike, Store
from mempager.store.journal import ReviewItem
from mempager.types import MemoryType, Source
from mempager.validate import check_text, check_type, parse_since, parse_time

log = logging.getLogger("mempager.erasure")

FORGET_FILTERS = frozenset({"query", "types", "since", "until", "source", "tags"})

# Every open Eraser: at open, another actor's pending mark is finished here only when no pager of
# that actor is open on the same store object (its own queue will finish it).
_OPEN: weakref.WeakSet[Eraser] = weakref.WeakSet()


class Eraser:
    def __init__(
        self,
        store: Store,
        actor: str,
        config: PagerConfig,
        *,
        semantic: SemanticLaneLike,
        lexical: LexicalLaneLike,
        retriever: Retriever,
        drop_caches: Callable[[], None],
    ) -> None:
        self.store = store
        self.actor = actor
        self.config = config
        self.semantic = semantic
        self.lexical = lexical
        self.retriever = retriever
        self.drop_caches = drop_caches  # in-process caches that may hold a forgotten text (pattern triggers)
        self.queue = ErasureQueue(self._pass, delay=config.erase_delay_seconds, name=actor)
        self._marked = False  # whether this pager's forgets have (re)written the store's mark
        _OPEN.add(self)

    def forget(
        self,
        uri: str | None = None,
        *,
        actor: str | None = None,
        where: Mapping[str, Any] | None = None,
        hard: bool = True,
        wait: bool = False,
    ) -> int:
        """Forget one memory by uri, or every memory of ``actor`` matching ``where``.

        ``where`` takes recall's filters (query, types, since, until, source, tags); an empty
        ``where`` forgets all of the actor's memories and empties its review queue. Texts still
        waiting in the review queue (copilot mode) that match ``where`` are deleted too, and so is
        every review row and page-injection record of a forgotten memory (in the delete's
        transaction), and every anti-pattern inverted from a forgotten pattern (it copies the
        pattern's words; it is counted). When this returns, the memory is out of every lane, page
        and result. Hard (the default): its text and vectors are also erased from every file of
        the store (the store file, every saved index, other models' included) by a background
        pass within ``erase_delay_seconds`` plus the pass itself, at ``close()``, or before this
        returns with ``wait=True``. ``hard=False`` deletes logically only: the bytes may remain in
        the files until a later erasure pass. Returns how many memories were forgotten (queued
        texts are not memories and are not counted).
        """
        if (uri is None) == (actor is None and where is None):
            raise InvalidInput("forget takes a uri, or actor= and/or where= (not both, not neither)")
        queued: list[str] = []
        if uri is not None:
            doomed = [self.retriever.get(uri)]  # MemoryNotFound for another actor's uri: never confirm or deny it
        else:
            if actor is not None and actor != self.actor:
                raise MemoryNotFound(f"this pager serves actor {self.actor!r}; open one for {actor!r} to forget there")
            filters = dict(where or {})
            unknown = set(filters) - FORGET_FILTERS
            if unknown:
                raise InvalidInput(f"forget where= takes {sorted(FORGET_FILTERS)}, not {sorted(unknown)}")
            doomed = self.retriever.recall(limit=1_000_000_000, **filters)  # also validates the filters
            queued = queued_matching(
                self.store.review_list(self.actor, status=None), filters, self.config.max_text_bytes
            )
        if not doomed and not queued:
            return 0
        ids = [m.id for m in doomed] + self._inversions_of({m.uri for m in doomed})
        if not hard:
            removed, purged = self._delete(ids, queued)
        else:
            with self.queue.forgetting():
                self.store.mark_erasure(self.actor)  # first, and durable: a crash after the delete still erases
                removed, purged = self._delete(ids, queued)
            if wait:
                self.queue.run_now()
        if removed or purged:
            self.drop_caches()
        return removed

    @contextlib.contextmanager
    def rewriting(self) -> Iterator[None]:
        """Around a change that leaves words behind in the files (``update`` of a text): the same
        durable mark and erasure pass as a hard forget, so the old text and vector go too."""
        with self.queue.forgetting():
            self.store.mark_erasure(self.actor)
            yield

    def _delete(self, ids: list[str], queued: list[str]) -> tuple[int, int]:
        with self.semantic.lock:
            removed = self.store.delete_many(self.actor, ids)
            self.semantic.remove([m.label for m in removed])
        purged = self.store.review_purge(self.actor, queued) if queued else 0
        return len(removed), purged

    def _inversions_of(self, uris: set[str]) -> list[str]:
        """Ids of the anti-patterns inverted from these patterns: they copy the original's label,
        trigger and steps, so the original's words would outlive its forgetting in them."""
        if not uris:
            return []
        return [
            m.id
            for m in self.store.of_types(self.actor, [MemoryType.PATTERN], limit=1_000_000_000)
            if m.metadata.get("inverted_from") in uris and m.uri not in uris
        ]

    # -- the erasure pass -----------------------------------------------------------------------
    def erase_now(self) -> None:
        """Erase the bytes of everything forgotten so far from every file of the store, now."""
        self.queue.run_now()

    def _pass(self) -> None:
        """Re-save the indexes (a saved HNSW file never holds a tombstone's vector; BM25 saves
        only live documents and terms), drop other models' saved indexes, rewrite the store
        file, then clear the mark if no forget came after the one this pass read."""
        token = self.store.erasure_marks().get(self.actor)
        self.semantic.save()
        self.lexical.save()
        self._drop_other_models_indexes()
        self.store.compact()
        if token is not None:
            self.store.clear_erasure(self.actor, token)

    def recover(self) -> None:
        """At open: finish erasures a crash interrupted, before anything is served.

        This actor's own: the full pass. Another actor's (no pager of it open on this store
        object): its saved indexes are dropped (caches, rebuilt from the store when it opens)
        and the store file is rewritten, so a crashed actor's forgotten bytes do not wait for
        that actor to come back.
        """
        marks = self.store.erasure_marks()
        if not marks:
            return
        others = {
            actor: token
            for actor, token in marks.items()
            if actor != self.actor and not any(e.store is self.store and e.actor == actor for e in _OPEN)
        }
        for actor in others:
            folder = actor_index_dir(self.store, actor)
            if folder is not None and folder.is_dir():
                shutil.rmtree(folder)
        if self.actor in marks:
            log.warning("finishing the erasure of memories %s forgot before an interrupted close", self.actor)
            self.queue.run_now()
        elif others:
            self.store.compact()
        for actor, token in others.items():
            self.store.clear_erasure(actor, token)

    def close(self) -> None:
        """Stop the background pass; erase now whatever is still due (raises what the pass raised)."""
        self.queue.stop()
        _OPEN.discard(self)
        if self.queue.due:
            self.queue.run_now()

    def _drop_other_models_indexes(self) -> None:
        """Saved indexes of models other than the active one still hold forgotten vectors; they
        are caches (rebuilt from the store's vectors when that model is used again), so drop them."""
        folder = getattr(self.semantic, "directory", None)  # only the embedded lane saves files
        lexical = getattr(self.lexical, "directory", None)
        if folder is None or not Path(folder).parent.is_dir():
            return
        for other in Path(folder).parent.iterdir():
            if other.is_dir() and other not in (folder, lexical):
                shutil.rmtree(other)


def queued_matching(items: Sequence[ReviewItem], filters: Mapping[str, Any], max_text_bytes: int) -> list[str]:
    """Ids of the review items ``forget(where=filters)`` erases (filters already validated by recall).

    No filter: every item. Otherwise the items that still hold a text (pending) and match the
    filters as recall would match a memory: the same lexical query syntax, type, source, tags and
    created_at (the one given to the gate, else when the item was queued). Decided items hold no
    text; those tied to a forgotten memory go with it in the store's delete.
    """
    if not filters:
        return [item.id for item in items]
    held = [item for item in items if isinstance(item.payload.get("text"), str)]
    kinds = {check_type(t).value for t in filters.get("types") or ()}
    sources = {Source(s).value for s in filters.get("source") or ()}
    tags = set(filters.get("tags") or ())
    lo = parse_since(filters["since"]) if filters.get("since") is not None else None
    hi = parse_time(filters["until"], "until") if filters.get("until") is not None else None
    hits = set(range(len(held)))
    if filters.get("query"):
        from mempager.index.lexical import LexicalIndex  # lazily: `import mempager` stays light

        index = LexicalIndex()
        index.add(list(range(len(held))), [text_for_index(item.payload["text"]) for item in held])
        hits = {label for label, _ in index.match(check_text(filters["query"], max_text_bytes, "query"))}
    out = []
    for i, item in enumerate(held):
        payload = item.payload
        created = parse_time(payload["created_at"]) if payload.get("created_at") else item.created_at
        if (
            i in hits
            and (not kinds or payload.get("type") in kinds)
            and (not sources or payload.get("source") in sources)
            and tags <= set(payload.get("tags", ()))
            and (lo is None or created >= lo)
            and (hi is None or created < hi)
        ):
            out.append(item.id)
    return out
