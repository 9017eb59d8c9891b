"""What every embedder shares: input checks, the output guard, and a probe with a time limit.

``check_vectors`` is the last thing every backend calls before it returns: whatever a model or a
server produced, the caller only ever sees an ``(n, dim)`` float32 matrix of finite unit rows.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

from mempager.embedders.errors import EmbedderBadResponse, EmbedderTimeout
from mempager.errors import DimensionMismatch, InvalidInput, NonFiniteVector
from mempager.protocols import Embedder
from mempager.types import FloatMatrix, Role

T = TypeVar("T")
ROLES: tuple[Role, ...] = ("query", "document")
PROBE_TEXT = "mempager embedder probe"


def check_texts(texts: Sequence[str]) -> list[str]:
    """A list of ``str``. A bare string is refused: embedding it would embed each character."""
    if isinstance(texts, (str, bytes)):
        raise InvalidInput("embed() takes a sequence of strings, not one string: use embed([text])")
    out = list(texts)
    for i, text in enumerate(out):
        if not isinstance(text, str):
            raise InvalidInput(f"embed() texts[{i}] must be a str, got {type(text).__name__}")
    return out


def check_role(role: str) -> Role:
    if role == "query":
        return "query"
    if role == "document":
        return "document"
    raise InvalidInput(f"role must be 'query' or 'document', got {role!r}")


def check_vectors(matrix: object, n: int, dim: int, who: str) -> FloatMatrix:
    """Validate and re-normalise ``matrix`` as ``n`` rows of ``dim`` finite values.

    Raises ``EmbedderBadResponse`` (wrong row count, not numbers, zero rows),
    ``DimensionMismatch`` and ``NonFiniteVector``; ``who`` names the embedder in the message.
    Rows are re-normalised in float64 after scaling by their largest value, so huge but finite
    values cannot overflow and tiny ones cannot underflow to a zero norm.
    """
    try:
        values = np.asarray(matrix, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise EmbedderBadResponse(f"{who} returned vectors that are not arrays of numbers: {exc}") from exc
    if n == 0 and values.size == 0:
        return np.zeros((0, dim), dtype=np.float32)
    if values.ndim != 2:
        raise EmbedderBadResponse(f"{who} returned an array of shape {values.shape}, expected ({n}, {dim})")
    if values.shape[0] != n:
        raise EmbedderBadResponse(
            f"{who} returned {values.shape[0]} vectors for {n} texts; refusing to guess which is which"
        )
    if values.shape[1] != dim:
        raise DimensionMismatch(
            f"{who} returned vectors of dimension {values.shape[1]}, expected {dim}; "
            "the backend is serving a different model than the one configured"
        )
    bad = ~np.isfinite(values).all(axis=1)
    if bad.any():
        rows = np.flatnonzero(bad)[:5].tolist()
        raise NonFiniteVector(f"{who} returned NaN or infinite values in rows {rows}; nothing was kept")
    scale = np.abs(values).max(axis=1, keepdims=True)
    zero = (scale == 0.0).ravel()
    if zero.any():
        rows = np.flatnonzero(zero)[:5].tolist()
        raise EmbedderBadResponse(f"{who} returned all-zero vectors in rows {rows}; they have no direction")
    scaled = values / scale
    unit = scaled / np.linalg.norm(scaled, axis=1, keepdims=True)
    return np.ascontiguousarray(unit, dtype=np.float32)


def run_with_timeout(fn: Callable[[], T], timeout: float, what: str) -> T:
    """Run ``fn`` in a daemon thread and wait at most ``timeout`` seconds for it.

    A daemon thread, not an executor: a hung model load or socket must not keep the interpreter
    from exiting. On timeout the thread is abandoned (Python cannot kill it) and its eventual
    result is dropped. An exception raised by ``fn`` is re-raised here unchanged.
    """
    result: list[T] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(fn())
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread, re-raised there
            error.append(exc)

    worker = threading.Thread(target=target, name=f"mempager-probe-{what}", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise EmbedderTimeout(f"{what} did not finish within {timeout:g}s")
    if error:
        raise error[0]
    return result[0]


def probe(embedder: Embedder, timeout: float) -> None:
    """One tiny embed: right shape, float32, finite, unit rows, within ``timeout`` seconds."""
    who = embedder.name
    vectors = run_with_timeout(lambda: embedder.embed([PROBE_TEXT], role="query"), timeout, f"probe of {who}")
    dim = embedder.dim
    if not isinstance(vectors, np.ndarray) or vectors.dtype != np.float32:
        raise EmbedderBadResponse(f"{who} probe returned {type(vectors).__name__}, not a float32 array")
    checked = check_vectors(vectors, 1, dim, who)
    if not np.allclose(checked, vectors, atol=1e-4):
        raise EmbedderBadResponse(f"{who} probe returned rows that are not L2-normalised")
