"""Switching embedding models: wait for the re-embedding, then drop the old model's vectors.

The workers re-embed by themselves (a memory without a vector of the active model is pending);
nothing here rewrites vectors, and old vectors stay until ``finalize_migration`` is asked for.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable

from mempager.errors import InvalidInput
from mempager.lanes.semantic import slug
from mempager.maintenance.workers import EmbedWorkers
from mempager.protocols import SemanticLaneLike, Store


class ModelMigration:
    def __init__(self, store: Store, actor: str, *, semantic: SemanticLaneLike, workers: EmbedWorkers) -> None:
        self.store = store
        self.actor = actor
        self.semantic = semantic
        self.workers = workers

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
