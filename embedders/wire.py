"""The OpenAI embeddings wire format, both directions, with nothing trusted on the way in.

Also the two pieces of HTTP plumbing the client needs: the endpoint URL and ``Retry-After``.

Request: ``{"model": m, "input": [texts]}``. Response: ``{"data": [{"index": i, "embedding": [...]}]}``
in any order. Decoding insists on exactly one embedding per input, matched by ``index``: a
response with a missing, duplicate or out-of-range index could pair a vector with the wrong
memory, which is worse than no vector at all.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from mempager.embedders.base import check_vectors
from mempager.embedders.errors import EmbedderBadResponse
from mempager.errors import ConfigError, DimensionMismatch
from mempager.types import FloatMatrix

Redact = Callable[[str], str]


def request_body(model: str, texts: Sequence[str]) -> dict[str, Any]:
    return {"model": model, "input": list(texts)}


def snippet(body: bytes, redact: Redact, limit: int = 160) -> str:
    """The start of a body for an error message: one line, bounded, credentials removed."""
    text = " ".join(body[: limit * 4].decode("utf-8", errors="replace").split())
    text = redact(text)
    return repr(text[:limit] + ("…" if len(text) > limit else ""))


def parse_json(body: bytes, content_type: str, who: str, redact: Redact) -> Any:
    text_start = body[:64].lstrip()
    if "html" in content_type.lower() or text_start.startswith(b"<"):
        raise EmbedderBadResponse(
            f"{who} answered with an HTML page, not JSON: {snippet(body, redact)}; check that the URL is the "
            "root of an OpenAI-compatible API (a proxy or login page may be in the way)"
        )
    try:
        return json.loads(body)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        raise EmbedderBadResponse(
            f"{who} answered with invalid or truncated JSON ({len(body)} bytes, {exc}): {snippet(body, redact)}"
        ) from exc


def error_message(payload: Any) -> str | None:
    """The human message of an OpenAI-style ``{"error": {"message": ...}}`` body, if any."""
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
    return None


def rows_by_index(payload: Any, n: int, who: str, redact: Redact) -> list[list[Any]]:
    """The ``embedding`` lists of ``payload`` put back in input order by their ``index``."""
    if not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
        message = error_message(payload)
        detail = f"an error: {redact(message)!r}" if message else "no 'data' list"
        raise EmbedderBadResponse(f"{who} answered 200 with {detail}; expected OpenAI embeddings JSON")
    data: list[Any] = payload["data"]
    if len(data) != n:
        raise EmbedderBadResponse(
            f"{who} returned {len(data)} embeddings for {n} inputs; refusing to guess which is which"
        )
    rows: list[list[Any] | None] = [None] * n
    for pos, item in enumerate(data):
        if not isinstance(item, dict) or "embedding" not in item:
            raise EmbedderBadResponse(f"{who}: data[{pos}] has no 'embedding'")
        index = item.get("index")
        if isinstance(index, bool) or not isinstance(index, int):
            raise EmbedderBadResponse(
                f"{who}: data[{pos}] has no integer 'index' (got {index!r}); cannot tell which input it embeds"
            )
        if not 0 <= index < n:
            raise EmbedderBadResponse(f"{who}: data[{pos}] has index {index}, outside 0..{n - 1}")
        if rows[index] is not None:
            raise EmbedderBadResponse(f"{who}: index {index} appears twice in the response")
        embedding = item["embedding"]
        if not isinstance(embedding, list):
            raise EmbedderBadResponse(
                f"{who}: data[{pos}].embedding is {type(embedding).__name__}, expected a list of floats "
                "(base64 encoding is not supported)"
            )
        rows[index] = embedding
    return [row for row in rows if row is not None]  # complete: n distinct in-range indexes


def decode_vectors(payload: Any, n: int, dim: int | None, who: str, redact: Redact) -> FloatMatrix:
    """Validated ``(n, dim)`` unit rows; ``dim=None`` accepts the width the first row has."""
    rows = rows_by_index(payload, n, who, redact)
    width = dim if dim is not None else len(rows[0])
    for i, row in enumerate(rows):
        if len(row) != width:
            raise DimensionMismatch(
                f"{who} returned a vector of dimension {len(row)} for input {i}, expected {width}; "
                "set the configured dim to the model's width, or point at the model you meant"
            )
    return check_vectors(rows, n, width, who)


def response_body(vectors: FloatMatrix, model: str, order: Sequence[int]) -> dict[str, Any]:
    """An OpenAI-format response listing ``vectors`` in ``order`` (each tagged with its index)."""
    return {
        "object": "list",
        "model": model,
        "data": [{"object": "embedding", "index": int(i), "embedding": [float(x) for x in vectors[i]]} for i in order],
        "usage": {"prompt_tokens": 0, "total_tokens": 0},
    }


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP date; None if absent/bad."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds: float = float(text)
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        seconds = (when - (now or datetime.now(timezone.utc))).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None


def endpoint(base_url: str) -> tuple[str, str, str]:
    """(``…/v1/embeddings`` URL, host for the name, origin for messages) from a base URL."""
    if not isinstance(base_url, str):
        raise ConfigError(f"embedder URL must be a string, got {type(base_url).__name__}")
    parts = urlsplit(base_url.strip())
    shown = f"{parts.scheme}://{parts.hostname or '?'}{parts.path}"  # never userinfo or query
    try:
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"embedder URL {shown!r} has an invalid port") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"embedder URL must look like https://host[:port][/path], got {shown!r}")
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
        raise ConfigError(
            f"embedder URL {shown!r} must not carry credentials, a query or a fragment; "
            "pass the token or API key through its own setting"
        )
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):  # "https://api.example.com/v1" is how OpenAI spells a base URL
        path = path[: -len("/v1")]
    netloc = parts.hostname if port is None else f"{parts.hostname}:{port}"
    if ":" in parts.hostname:  # IPv6 literal
        netloc = f"[{parts.hostname}]" + ("" if port is None else f":{port}")
    url = urlunsplit((parts.scheme, netloc, f"{path}/v1/embeddings", "", ""))
    return url, parts.hostname, f"{parts.scheme}://{netloc}"
