"""Changing what is stored: update, forget (really), model migration, compaction, the audit trail."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from mempager.store.audit import AuditEntry, AuditReport
from mempager.config import PagerConfig
from mempager.errors import InvalidInput, MemoryNotFound
from mempager.procedural.patterns import PatternSpec, text_for_index
from mempager.protocols import LexicalLaneLike, SemanticLaneLike, Store
from mempager.lanes.retrieval import RetrievalMixin
from mempager.lanes.semantic import slug
from mempager.store.duckdb import dedup_key_of
from mempager.store.journal import ReviewItem
from mempager.types import Memory, MemoryType, NewMemory, Source
from mempager.validate import check_text, check_type, parse_since, parse_time, parse_uri

FORGET_FILTERS = frozenset({"query", "types", "since", "until", "source", "tags"})


class MaintenanceMixin(RetrievalMixin):
    store: Store
    actor: str
    config: PagerConfig
    clock: Callable[[], datetime]
    semantic: SemanticLaneLike
    lexical: LexicalLaneLike
    workers: Any

    if TYPE_CHECKING:  # provided by WriteBack / ProceduralMixin; a runtime stub would shadow them in the MRO
        def _new(self, type_: object, text: object, **fields: Any) -> NewMemory: ...

        def _drop_pattern_caches(self) -> None: ...

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
            doomed = [self.get(uri)]  # MemoryNotFound for another actor's uri: never confirm or deny it
        else:
            if actor is not None and actor != self.actor:
                raise MemoryNotFound(f"this pager serves actor {self.actor!r}; open one for {actor!r} to forget there")
            filters = dict(where or {})
            unknown = set(filters) - FORGET_FILTERS
            if unknown:
                raise InvalidInput(f"forget where= takes {sorted(FORGET_FILTERS)}, not {sorted(unknown)}")
            doomed = self.recall(limit=1_000_000_000, **filters)  # also validates the filters
            queued = queued_matching(self.store.review_list(self.actor, status=None), filters,
                                     self.config.max_text_bytes)
        ids = [m.id for m in doomed] + self._inversions_of({m.uri for m in doomed})
        with self.semantic.lock:
            removed = self.store.delete_many(self.actor, ids)
            self.semantic.remove([m.label for m in removed])
        purged = self.store.review_purge(self.actor, queued) if queued else 0
        if removed or purged:
            self._drop_pattern_caches()
            if hard:
                self.compact()
        return len(removed)

    def _inversions_of(self, uris: set[str]) -> list[str]:
        """Ids of the anti-patterns inverted from these patterns: they copy the original's label,
        trigger and steps, so the original's words would outlive its forgetting in them."""
        if not uris:
            return []
        return [m.id for m in self.store.of_types(self.actor, [MemoryType.PATTERN], limit=1_000_000_000)
                if m.metadata.get("inverted_from") in uris and m.uri not in uris]

    def reembed(self, progress: Callable[[int, int], None] | None = None, timeout: float | None = None) -> bool:
        """Wait while the workers give every memory a vector of the active model.

        Switching embedders starts this by itself (memories without a vector of the active model
        are pending); an interrupted run resumes where it stopped. ``progress(done, total)`` is
        called as the queue drains. Old models' vectors stay until ``finalize_migration``.
        """
        total = self.store.pending_stats(self.actor, self.semantic.model).count
        deadline = None if timeout is None else time.monotonic() + timeout
        self.workers.notify()
        while True:
            left = self.store.pending_stats(self.actor, self.semantic.model).count
            if progress is not None:
                progress(total - left, total)
            if left == 0:
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.2)

    def finalize_migration(self) -> dict[str, int]:
        """Drop other models' vectors (and their saved indexes) once the active model covers all."""
        pending = self.store.pending_stats(self.actor, self.semantic.model).count
        if pending:
            raise InvalidInput(
                f"migration to {self.semantic.model} is not complete: {pending} memories still pending; "
                "run `mempager reembed` until it finishes, then finalize"
            )
        dropped = {}
        for model in self.store.vector_models(self.actor):
            if model != self.semantic.model:
                dropped[model] = self.store.drop_vectors(self.actor, model)
                folder = getattr(self.semantic, "directory", None)  # only the embedded lane saves files
                if folder is not None and (folder.parent / slug(model)).exists():
                    shutil.rmtree(folder.parent / slug(model))
        return dropped

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
    def audit(self, since: Any = None, limit: int = 1000) -> list[AuditEntry]:
        """This actor's audit entries, oldest first (``since``: a time, or "7d" / "12h" / "30m")."""
        return self.store.audit_entries(self.actor, parse_since(since) if since is not None else None, limit)

    def verify_audit(self) -> AuditReport:
        return self.store.verify_audit()

    def update(self, uri: str, **changes: Any) -> Memory:
        """Correct a memory in place: text, tags, importance, confidence, metadata, valid_until.

        A new text is re-embedded in the background (its old vector stops answering at once),
        re-indexed lexically in this call, and deduplicated as a fresh write of it would be: a
        later write of the old text is a new memory, a write of the new text reinforces this one.
        A text another memory of the same type already holds is refused (``InvalidInput`` naming
        it): two memories saying one thing would leave dedup to pick either.
        """
        allowed = {"text", "tags", "importance", "confidence", "metadata", "valid_until"}
        unknown = set(changes) - allowed
        if unknown:
            raise InvalidInput(f"cannot update {sorted(unknown)}; updatable: {sorted(allowed)}")
        current = self.get(uri)
        probe = self._new(current.type, changes.get("text", current.text),
                          **{k: v for k, v in changes.items() if k in ("tags", "importance", "confidence",
                                                                       "metadata")})
        clean = {k: getattr(probe, k) for k in changes if k in ("text", "tags", "importance", "confidence",
                                                                "metadata")}
        if "valid_until" in changes:
            clean["valid_until"] = None if changes["valid_until"] is None else parse_time(
                changes["valid_until"], "valid_until")
        if "text" in clean and clean["text"] != current.text:
            clean["dedup_key"] = self._dedup_key_for(current, clean["text"])
        updated = self.store.update(self.actor, current.id, op="update", **clean)
        self.workers.notify()
        return updated

    def _dedup_key_for(self, current: Memory, text: str) -> str:
        """The key a write of ``text`` would dedup by, in the form ``current``'s key has."""
        if current.type is MemoryType.PATTERN:
            return PatternSpec.decode(text).dedup_key()
        created = None
        if current.type is MemoryType.EVENT:  # timed when the event was written with its time
            untimed = self.store.find(self.actor, current.type, dedup_key_of(self._new(current.type, current.text)))
            created = None if untimed is not None and untimed.id == current.id else current.created_at
        key = dedup_key_of(NewMemory(actor=self.actor, type=current.type, text=text, created_at=created))
        other = self.store.find(self.actor, current.type, key)
        if other is not None and other.id != current.id:
            raise InvalidInput(f"{other.uri} already says that; update or forget that one instead")
        return key

    def get(self, uri: str) -> Memory:
        actor, mtype, memory_id = parse_uri(uri)
        memory = self.store.get(self.actor, memory_id) if actor == self.actor else None
        if memory is None or memory.type is not mtype:  # the whole uri must match, not just the id
            raise MemoryNotFound(f"no memory {uri} for actor {self.actor!r}")
        return memory


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
        if (i in hits and (not kinds or payload.get("type") in kinds)
                and (not sources or payload.get("source") in sources) and tags <= set(payload.get("tags", ()))
                and (lo is None or created >= lo) and (hi is None or created < hi)):
            out.append(item.id)
    return out
