"""Switching embedding models: only by an explicit act, then re-embed, then drop the old vectors.

The store records each actor's *active* model (``store_meta``, key ``active_model:<actor>``).
A pager whose embedder is another model (``--embedder hash`` on a MiniLM store, or a chain that
fell back) is a reader: it embeds nothing, so it never rewrites the store's vectors, and its
semantic lane sees only vectors of its own model. ``use_model`` (``mempager model use``), or
``PagerConfig(adopt_embedder=True)``, makes the pager's model the active one: the workers then
re-embed every memory, and the old model's vectors stay until ``finalize_migration``.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable

from mempager.errors import InvalidInput
from mempager.lanes.semantic import slug
from mempager.maintenance.workers import EmbedWorkers
from mempager.protocols import SemanticLaneLike, Store

log = logging.getLogger("mempager")


def active_key(actor: str) -> str:
    return f"active_model:{actor}"


def resolve_active(store: Store, actor: str, chosen: str, *, adopt: bool) -> str:
    """The actor's active model, recorded on first open: ``chosen`` for a store without vectors
    (or when adopting it), else the model most of its vectors belong to (a store from before the
    active model was recorded keeps the model it was built with). Warns when it is not ``chosen``:
    a pager of another model reads, never rewrites."""
    recorded = store.meta(active_key(actor))
    if recorded is None or (recorded != chosen and adopt):
        if recorded is None and not adopt:
            counts = store.vector_models(actor)
            recorded = max(sorted(counts), key=lambda m: counts[m]) if counts else chosen
        else:
            recorded = chosen
        store.set_meta(active_key(actor), recorded, actor=actor)
    if recorded != chosen:
        log.warning(
            "store %s: %s's active model is %s, this pager's is %s: it reads without embedding "
            "(switch with `mempager model use` / Pager.use_model())",
            store.location,
            actor,
            recorded,
            chosen,
        )
    return recorded


class ModelMigration:
    def __init__(
        self, store: Store, actor: str, *, semantic: SemanticLaneLike, workers: EmbedWorkers, worker_count: int
    ) -> None:
        self.store = store
        self.actor = actor
        self.semantic = semantic
        self.workers = workers
        self.worker_count = worker_count  # how many workers to start once this pager's model is the active one

    @property
    def active(self) -> str:
        return self.store.meta(active_key(self.actor)) or self.semantic.model

    @property
    def reading_only(self) -> bool:
        """True while this pager's model is not the store's active one: it embeds nothing."""
        return self.active != self.semantic.model

    def use_model(self) -> dict[str, object]:
        """Make this pager's model the actor's active one (an explicit act; audited) and start
        re-embedding: every memory without a vector of it is pending. Old vectors stay until
        ``finalize_migration``. Returns what changed."""
        previous = self.active
        model = self.semantic.model
        if previous != model:
            self.store.set_meta(active_key(self.actor), model, actor=self.actor)
        # Counted before the workers wake: a fast embedder could drain the queue first, and the
        # caller must learn how much the switch set pending, not how much was left a moment later.
        pending = self.store.pending_stats(self.actor, model).count
        if not self.workers.threads and self.worker_count:
            self.workers.start(self.worker_count)
        self.workers.notify()
        return {
            "active": model,
            "previous": previous,
            "pending": pending,
            "vector_models": self.store.vector_models(self.actor),
        }

    def reembed(self, progress: Callable[[int, int], None] | None = None, timeout: float | None = None) -> bool:
        """Wait while the workers give every memory a vector of the active model.

        Switching embedders starts this by itself (memories without a vector of the active model
        are pending); an interrupted run resumes where it stopped. ``progress(done, total)`` is
        called as the queue drains. Old models' vectors stay until ``finalize_migration``.
        """
        total = self.store.pending_stats(self.actor, self.semantic.model).count
        if total and self.reading_only:
            raise InvalidInput(
                f"the store's active model is {self.active}, not {self.semantic.model}: this pager only reads; "
                f"switch with `mempager model use` (Pager.use_model()) to re-embed with {self.semantic.model}"
            )
        if total and not self.workers.threads:
            raise InvalidInput(
                f"{total} memories wait for {self.semantic.model}, but this pager was opened with "
                "embed_workers=0 and embeds nothing; open it with workers to re-embed"
            )
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
        if self.reading_only:
            raise InvalidInput(
                f"the store's active model is {self.active}; this pager reads with {self.semantic.model} and "
                f"must not drop {self.active}'s vectors: switch with `mempager model use` first"
            )
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
