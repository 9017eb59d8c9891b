"""A forced embedder that failed at open: recorded as down, never quietly replaced by another.

Forcing an embedder (``embedder="gateway"``...) is an explicit request for that model, so when it
fails its boot probe the chain does not fall back: vectors recorded under another model's name
would have to be thrown away, and two models' vectors must never be compared. Refusing to open
would be worse still: the store is the ground truth and must take writes whatever the embedder
does. So the pager opens with a ``DownEmbedder`` in its place. It carries the forced candidate's
own name, so the store's pending queue is the queue of that model; every ``embed`` either reaches
the real backend (an HTTP server that comes back is simply used again) or raises an
``EmbedderError`` the embedding workers record on the memories, which stay stored and pending
while retrieval falls back to the lexical and salience lanes.

A local model that could not be built (package or weights missing, wrong sha256) has no backend
to wait for: every ``embed`` raises the boot error again, and ``stats()`` keeps showing it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from mempager.embedders.base import check_role, check_texts
from mempager.errors import DimensionMismatch, EmbedderUnavailable
from mempager.protocols import Embedder
from mempager.types import FloatMatrix, Role

logger = logging.getLogger("mempager.embedders")


class DownEmbedder:
    """Stands in for the forced embedder ``name`` whose boot failed with ``reason``.

    ``backend`` is the real embedder when it could be built (an HTTP client whose probe failed),
    None when it could not (a local model that did not load). ``dim`` is the configured width,
    if any; otherwise the backend's once it has answered, and until then reading ``dim`` raises
    ``EmbedderUnavailable`` at once instead of asking a server that is known to be down.
    """

    def __init__(self, name: str, reason: str, *, backend: Embedder | None = None, dim: int | None = None) -> None:
        self._name = name
        self._reason = reason
        self._backend = backend
        self._dim = dim
        self._answered = False
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self._name

    @property
    def reason(self) -> str:
        """Why the embedder was down at open (the boot probe's error)."""
        return self._reason

    @property
    def recoverable(self) -> bool:
        """False when there is no backend to come back (a local model that could not load)."""
        return self._backend is not None

    @property
    def answered(self) -> bool:
        """True once the backend has embedded something since the failed boot probe."""
        return self._answered

    @property
    def dim(self) -> int:
        # An HTTP backend learns its width from its first answer: read it without a request.
        known = self._dim if self._dim is not None else getattr(self._backend, "known_dim", None)
        if isinstance(known, int):
            return known
        raise EmbedderUnavailable(
            f"{self._name} is down and its vector width is not known until it answers ({self._reason})"
        )

    def __repr__(self) -> str:
        return f"DownEmbedder(name={self._name!r}, recoverable={self.recoverable}, answered={self._answered})"

    def embed(self, texts: Sequence[str], role: Role = "document") -> FloatMatrix:
        items = check_texts(texts)
        role = check_role(role)
        if self._backend is None:
            raise EmbedderUnavailable(
                f"{self._name} cannot embed: it failed to start when the store was opened ({self._reason}); "
                "fix it and reopen, or choose another embedder (memories stay stored and pending)"
            )
        vectors = self._backend.embed(items, role=role)
        if self._dim is not None and vectors.shape[1:] != (self._dim,):  # the backend checks too
            raise DimensionMismatch(f"{self._name} returned vectors of shape {vectors.shape}, configured {self._dim}")
        with self._lock:
            first, self._answered = not self._answered, True
        if first:
            logger.info(
                "embedder %s answered after failing its boot probe: pending memories can be embedded", self._name
            )
        return vectors

    def close(self) -> None:
        close = getattr(self._backend, "close", None)
        if close is not None:
            close()
