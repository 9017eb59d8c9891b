"""Typed embedder failures, so a caller can tell "fix your config" from "try again later".

Everything here subclasses the kernel's ``EmbedderError`` tree (``mempager.errors``), which also holds
``DimensionMismatch`` and ``NonFiniteVector``. Messages say what happened and what to do next, and
never contain a credential.

    EmbedderError
    ├── EmbedderUnavailable          cannot be used as configured; retrying will not help
    │   ├── MissingExtra             an optional dependency is not installed
    │   ├── ModelNotFound            the local model is not on disk (mempager never downloads)
    │   ├── ModelIntegrityError      the weights file does not have the expected sha256
    │   ├── OnnxExportUnusable       a saved ONNX export is missing, stale or corrupt (it is rebuilt)
    │   ├── OnnxExportFailed         exporting a local model to ONNX failed or missed its cosine bound
    │   └── EmbedderAuthError        HTTP 401/403: the token or key was refused
    ├── EmbedderTimeout              connect or read timeout
    │   └── EmbedderConnectTimeout   (also an EmbedderConnectionError)
    ├── EmbedderConnectionError      could not connect, or the connection dropped
    ├── EmbedderRateLimited          HTTP 429 after every retry
    ├── EmbedderServerError          HTTP 5xx after every retry
    ├── EmbedderRejected             another HTTP 4xx: wrong model name, payload too large...
    ├── EmbedderBadResponse          not the OpenAI embeddings format (HTML, truncated JSON, bad index...)
    ├── DimensionMismatch            (mempager.errors)
    └── NonFiniteVector              (mempager.errors)
"""

from __future__ import annotations

from typing import Literal

from mempager.errors import EmbedderError, EmbedderUnavailable


class MissingExtra(EmbedderUnavailable):
    """An optional dependency is missing; the message names the pip extra that installs it."""


class ModelNotFound(EmbedderUnavailable):
    """The model path does not exist or the model is not in the local cache."""


class ModelIntegrityError(EmbedderUnavailable):
    """The weights file on disk is not the one the model name promises."""


class OnnxExportUnusable(EmbedderUnavailable):
    """A saved ONNX export cannot be served: ``kind`` says whether it is missing, stale or corrupt.

    Never fatal on its own: the caller exports the model again from its verified weights.
    """

    def __init__(self, message: str, *, kind: Literal["missing", "stale", "corrupt"]) -> None:
        super().__init__(message)
        self.kind = kind


class OnnxExportFailed(EmbedderUnavailable):
    """Exporting a local model to ONNX failed, or its vectors missed the cosine bound against torch."""


class EmbedderAuthError(EmbedderUnavailable):
    """The server refused the credentials (HTTP 401 or 403)."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


class EmbedderTimeout(EmbedderError):
    """The backend did not answer in time."""


class EmbedderConnectionError(EmbedderError):
    """No connection could be made, or it broke before a full answer arrived."""


class EmbedderConnectTimeout(EmbedderTimeout, EmbedderConnectionError):
    """Connecting timed out: both a timeout and a connection failure, and safe to retry."""


class _StatusError(EmbedderError):
    def __init__(self, message: str, *, status: int, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        # Seconds the server asked us to wait (already capped), when it said.
        self.retry_after = retry_after


class EmbedderRateLimited(_StatusError):
    """HTTP 429: the server wants fewer requests; ``retry_after`` says how long to wait."""


class EmbedderServerError(_StatusError):
    """HTTP 5xx: the server failed; usually transient."""


class EmbedderRejected(_StatusError):
    """HTTP 4xx other than 401/403/429: the request itself was refused (model name, size)."""


class EmbedderBadResponse(EmbedderError):
    """The answer was not a valid OpenAI-format embeddings response for our request."""


__all__ = [
    "EmbedderAuthError",
    "EmbedderBadResponse",
    "EmbedderConnectTimeout",
    "EmbedderConnectionError",
    "EmbedderRateLimited",
    "EmbedderRejected",
    "EmbedderServerError",
    "EmbedderTimeout",
    "MissingExtra",
    "ModelIntegrityError",
    "ModelNotFound",
    "OnnxExportFailed",
    "OnnxExportUnusable",
]
