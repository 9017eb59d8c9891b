"""Changing what is stored: update, forget (really), model migration, compaction, the audit trail."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .audit import AuditEntry, AuditReport
from .config import PagerConfig
from .errors import InvalidInput, MemoryNotFound
from .protocols import LexicalLaneLike, SemanticLaneLike, Store
from .retrieval import RetrievalMixin
from .semantic import slug
from .types import Memory, NewMemory
from .validate import parse_since, parse_time, parse_uri

FORGET_FILTERS = frozenset({"query", "types", "since", "until", "source", "tags"})


class MaintenanceMixin(RetrievalMixin):
    store: Store
    actor: str
    config: PagerConfig
    clock: Callable[[], datetime]
    semantic: SemanticLaneLike
    lexical: LexicalLaneLike
    workers: Any

    if TYPE_CHECKING:  # provided by WriteBack; a runtime stub here would shadow it in the MRO
        def _new(self, type_: object, text: object, **fields: Any) -> NewMemory: ...

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
        ``where`` forgets all of the actor's memories. Hard by default: after the call the text
        and vectors are gone from the store, every lane and index, and the files on disk (the
        store file is rewritten). ``hard=False`` deletes logically only: the bytes may remain in
        the files until the next hard forget or ``compact()``. Returns how many were forgotten.
        """
        if (uri is None) == (actor is None and where is None):
            raise InvalidInput("forget takes a uri, or actor= and/or where= (not both, not neither)")
        if uri is not None:
            ids = [self.get(uri).id]  # MemoryNotFound for another actor's uri: never confirm or deny it
        else:
            if actor is not None and actor != self.actor:
                raise MemoryNotFound(f"this pager serves actor {self.actor!r}; open one for {actor!r} to forget there")
            filters = dict(where or {})
            unknown = set(filters) - FORGET_FILTERS
            if unknown:
                raise InvalidInput(f"forget where= takes {sorted(FORGET_FILTERS)}, not {sorted(unknown)}")
            ids = [m.id for m in self.recall(limit=1_000_000_000, **filters)]
        with self.semantic.lock:
            removed = self.store.delete_many(self.actor, ids)
            self.semantic.remove([m.label for m in removed])
        if removed and hard:
            self.compact()
        return len(removed)

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
        self.store.compact()

    def audit(self, since: Any = None, limit: int = 1000) -> list[AuditEntry]:
        """This actor's audit entries, oldest first (``since``: a time, or "7d" / "12h" / "30m")."""
        return self.store.audit_entries(self.actor, parse_since(since) if since is not None else None, limit)

    def verify_audit(self) -> AuditReport:
        return self.store.verify_audit()

    def update(self, uri: str, **changes: Any) -> Memory:
        """Correct a memory in place: text, tags, importance, confidence, metadata, valid_until.

        A new text is re-embedded in the background (its old vector stops answering at once)
        and re-indexed lexically in this call.
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
        updated = self.store.update(self.actor, current.id, op="update", **clean)
        self.workers.notify()
        return updated

    def get(self, uri: str) -> Memory:
        actor, mtype, memory_id = parse_uri(uri)
        memory = self.store.get(self.actor, memory_id) if actor == self.actor else None
        if memory is None or memory.type is not mtype:  # the whole uri must match, not just the id
            raise MemoryNotFound(f"no memory {uri} for actor {self.actor!r}")
        return memory
