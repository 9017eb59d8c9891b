"""A local model that loads on its first embed, not when the store opens.

Loading torch and the MiniLM weights takes seconds and half a gigabyte; a command that embeds
nothing (``mempager stats``, ``recall``, ``pinned``, ``get``, ``audit``) must not pay for it. The
semantic lane only needs the model's name and width to open its index, and both are known from
the model's files (``local_identity``): the weights are loaded, checked and probed the first time
something is embedded: a query, or the background workers' first batch.

A model that fails to load then is reported the way a forced embedder that is down at open is
(``embedders.down``): every ``embed`` raises the same ``EmbedderError``, memories stay stored and
pending, and retrieval uses the lexical and salience lanes. It is never replaced by another model:
the store's vectors are recorded under this model's name.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from mempager.embedders.base import check_role, check_texts
from mempager.errors import EmbedderError, EmbedderUnavailable
from mempager.protocols import Embedder
from mempager.types import FloatMatrix, Role

logger = logging.getLogger("mempager.embedders")


class DeferredEmbedder:
    """Stands in for ``build()``'s embedder, named ``name`` with width ``dim``, until first used."""

    def __init__(self, name: str, dim: int, build: Callable[[], Embedder]) -> None:
        self._name = name
        self._dim = dim
        self._build = build
        self._inner: Embedder | None = None
        self._failed: str | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def loaded(self) -> bool:
        """True once the real model has been built (and passed its probe)."""
        return self._inner is not None

    def __repr__(self) -> str:
        state = "loaded" if self._inner is not None else ("failed" if self._failed else "not loaded")
        return f"DeferredEmbedder(name={self._name!r}, dim={self._dim}, {state})"

    def _model(self) -> Embedder:
        with self._lock:  # one load, however many threads ask at once
            if self._inner is not None:
                return self._inner
            if self._failed is not None:
                raise EmbedderUnavailable(
                    f"{self._name} could not be loaded ({self._failed}); memories stay stored and pending and "
                    "retrieval uses the lexical and salience lanes: fix the model and reopen the store"
                )
            try:
                inner = self._build()
            except Exception as exc:  # noqa: BLE001 - kept and re-raised, typed, on every later embed
                self._failed = f"{type(exc).__name__}: {exc}"
                logger.warning("embedder %s failed to load on first use: %s", self._name, self._failed)
                if isinstance(exc, EmbedderError):
                    raise
                raise EmbedderUnavailable(f"{self._name} failed to load: {self._failed}") from exc
            if inner.name != self._name or inner.dim != self._dim:
                self._failed = f"it loaded as {inner.name} with {inner.dim} dimensions"
                raise EmbedderUnavailable(
                    f"{self._name} ({self._dim} dimensions) loaded as {inner.name} with {inner.dim}: its files "
                    "changed since they were read; reopen the store"
                )
            self._inner = inner
            logger.info("embedder %s loaded on first use", self._name)
            return inner

    def embed(self, texts: Sequence[str], role: Role = "document") -> FloatMatrix:
        items, role = check_texts(texts), check_role(role)  # bad input is refused before any loading
        return self._model().embed(items, role=role)
