"""Erasure: forget (really), and compaction of what deleted memories left in files and caches.

A hard forget leaves no byte of the memory behind: not in the store file, not in any lane or
saved index (other models' too), not in the review queue, not in a pattern inverted from it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mempager.config import PagerConfig
from mempager.errors import InvalidInput, MemoryNotFound
from mempager.lanes.retrieval import Retriever
from mempager.patterns import text_for_index
from mempager.protocols import LexicalLaneLike, SemanticLaneLike, Store
from mempager.store.journal import ReviewItem
from mempager.types import MemoryType, Source
from mempager.validate import check_text, check_type, parse_since, parse_time

FORGET_FILTERS = frozenset({"query", "types", "since", "until", "source", "tags"})


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

    def forget(
        self,
        uri: str | None = None,
        *,
        actor: str | None = None,
        where: Mapping[str, Any] | None = None,
        hard: bool = True,
    ) -> int:
        """Forget one memory by uri, or every memory of ``actor`` matching ``where``.

        ``where`` takes recall's filters (query, types, since, until, source, tags); an empty
        ``where`` forgets all of the actor's memories and empties its review queue. Texts still
        waiting in the review queue (copilot mode) that match ``where`` are deleted too, and so is
        every review row and page-injection record of a forgotten memory (in the delete's
        transaction), and every anti-pattern inverted from a forgotten pattern (it copies the
        pattern's words; it is counted). Hard by default: after the call the text and vectors are
        gone from the store, every lane and index (other models' saved indexes included), and the
        files on disk (the store file is rewritten). ``hard=False`` deletes logically only: the bytes may remain in
        the files until the next hard forget or ``compact()``. Returns how many memories were
        forgotten (queued texts are not memories and are not counted).
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
        ids = [m.id for m in doomed] + self._inversions_of({m.uri for m in doomed})
        with self.semantic.lock:
            removed = self.store.delete_many(self.actor, ids)
            self.semantic.remove([m.label for m in removed])
        purged = self.store.review_purge(self.actor, queued) if queued else 0
        if removed or purged:
            self.drop_caches()
            if hard:
                self.compact()
        return len(removed)

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

    def compact(self) -> None:
        """Erase deleted memories' bytes: rebuild and re-save the indexes, rewrite the store file."""
        self.semantic.purge()
        self.lexical.rebuild("purge after forget")
        self.lexical.save()
        self._drop_other_models_indexes()
        self.store.compact()

    def _drop_other_models_indexes(self) -> None:
        """Saved indexes of models other than the active one still hold forgotten vectors; they
        are caches (rebuilt from the store's vectors when that model is used again), so drop them."""
        folder = getattr(self.semantic, "directory", None)  # only the embedded lane saves files
        lexical = getattr(self.lexical, "directory", None)
        if folder is None or not folder.parent.is_dir():
            return
        for other in folder.parent.iterdir():
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
