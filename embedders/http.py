"""An OpenAI-compatible embeddings endpoint over HTTP (httpx): a gateway or a direct provider.

``POST {base_url}/v1/embeddings``. The gateway flavour sends a bearer token and the actor id in
``X-Mempager-Actor`` so spend is attributed per actor; the provider flavour sends an API key.
Every httpx error and every HTTP status is translated into a typed ``EmbedderError`` in one place
(``_post_once``). Retries are bounded and only for failures that can pass: 429, 5xx, connect
errors and dropped connections. A read timeout is not retried: the server was reachable and
slow, and asking again would multiply the wait the caller sees.

The credential is held in a ``Secret`` and removed from every message built from foreign text,
so it never reaches a log line, an exception or a repr.
"""

from __future__ import annotations

import json
import logging
import math
import random
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import httpx
import numpy as np

from mempager.embedders.base import check_role, check_texts
from mempager.embedders.errors import (
    EmbedderAuthError,
    EmbedderBadResponse,
    EmbedderConnectionError,
    EmbedderConnectTimeout,
    EmbedderRateLimited,
    EmbedderRejected,
    EmbedderServerError,
    EmbedderTimeout,
)
from mempager.embedders.settings import EmbedderSettings
from mempager.embedders.wire import (
    decode_vectors,
    endpoint,
    error_message,
    parse_json,
    parse_retry_after,
    request_body,
    snippet,
)
from mempager.errors import ConfigError, DimensionMismatch, EmbedderError, EmbedderUnavailable
from mempager.types import FloatMatrix, Role

logger = logging.getLogger("mempager.embedders")

ACTOR_HEADER = "X-Mempager-Actor"
DEFAULT_GATEWAY_MODEL = "all-MiniLM-L6-v2"
_HEADER_VALUE = re.compile(r"[\x21-\x7e]{1,256}")
_RETRYABLE = (EmbedderRateLimited, EmbedderServerError, EmbedderConnectionError)


class Secret:
    """A credential that prints as ``***``; ``reveal()`` is the only way to read it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __reduce__(self) -> str | tuple[object, ...]:  # a pickled embedder must not carry the key to disk
        raise TypeError("a Secret cannot be pickled")


@dataclass(frozen=True, kw_only=True)
class HttpOptions:
    """Timeouts (seconds), retry policy and batching limits of one ``HttpEmbedder``."""

    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    max_attempts: int = 3  # total tries per batch, the first included
    backoff_base: float = 0.25  # first retry waits ~base, doubling up to backoff_cap
    backoff_cap: float = 8.0
    retry_after_cap: float = 30.0  # never sleep longer than this, whatever Retry-After says
    batch_size: int = 64
    max_batch_bytes: int = 512_000  # UTF-8 bytes of input text per request

    def __post_init__(self) -> None:
        for name in ("connect_timeout", "read_timeout", "backoff_cap", "retry_after_cap"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
                raise ConfigError(f"{name} must be a finite number > 0, got {value!r}")
        if isinstance(self.backoff_base, bool) or not 0 <= self.backoff_base < math.inf:
            raise ConfigError(f"backoff_base must be a number >= 0, got {self.backoff_base!r}")
        for name in ("max_attempts", "batch_size", "max_batch_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")


class HttpEmbedder:
    """``name`` is ``http:<model>@<host>``; ``dim`` is configured or learnt from the first answer."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        api_key: str | None = None,
        actor: str | None = None,
        dim: int | None = None,
        options: HttpOptions | None = None,
        client: httpx.Client | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigError(f"HTTP embedder model must be a non-empty string, got {model!r}")
        if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or dim < 1):
            raise ConfigError(f"HTTP embedder dim must be a positive integer or None, got {dim!r}")
        if actor is not None and not _HEADER_VALUE.fullmatch(actor):
            raise ConfigError(f"actor {actor!r} cannot be sent in the {ACTOR_HEADER} header (visible ASCII only)")
        if client is not None and transport is not None:
            raise ConfigError("pass either client or transport to HttpEmbedder, not both")
        self._url, self._host, self._origin = endpoint(base_url)
        self._model = model
        self._key = Secret(api_key) if api_key else None
        self._actor = actor
        self._dim = dim
        self._dim_lock = threading.Lock()
        self._options = options or HttpOptions()
        self._owns_client = client is None
        self._client = client or httpx.Client(transport=transport, follow_redirects=False)
        self._sleep = sleep
        self._timeout = httpx.Timeout(
            self._options.read_timeout, connect=self._options.connect_timeout, pool=self._options.connect_timeout
        )

    @classmethod
    def gateway(
        cls,
        url: str,
        *,
        token: str,
        actor: str,
        model: str = DEFAULT_GATEWAY_MODEL,
        dim: int | None = None,
        options: HttpOptions | None = None,
        client: httpx.Client | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> HttpEmbedder:
        """The mempager gateway: bearer ``token`` plus the actor header for spend attribution."""
        if not token:
            raise ConfigError("the gateway needs a token (MEMPAGER_GATEWAY_TOKEN)")
        return cls(
            url, model=model, api_key=token, actor=actor, dim=dim, options=options, client=client, transport=transport
        )

    @classmethod
    def provider(
        cls,
        url: str,
        *,
        model: str,
        api_key: str | None = None,
        dim: int | None = None,
        options: HttpOptions | None = None,
        client: httpx.Client | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> HttpEmbedder:
        """A direct OpenAI-compatible provider; ``api_key`` may be None for a keyless local server."""
        return cls(url, model=model, api_key=api_key, dim=dim, options=options, client=client, transport=transport)

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None,
        *,
        kind: str,
        actor: str = "",
        transport: httpx.BaseTransport | None = None,
    ) -> HttpEmbedder:
        """The gateway (``kind="gateway"``) or provider described by ``MEMPAGER_*`` variables."""
        settings = EmbedderSettings.from_env(environ, actor=actor)
        return build_http(settings, kind, transport=transport)

    @property
    def name(self) -> str:
        return f"http:{self._model}@{self._host}"

    @property
    def model(self) -> str:
        return self._model

    @property
    def url(self) -> str:
        return self._url

    @property
    def known_dim(self) -> int | None:
        """The width if configured or already learnt; None, without asking the server, if not."""
        return self._dim

    @property
    def dim(self) -> int:
        if self._dim is None:
            self.embed(["mempager dimension probe"], role="query")  # learns the width
        assert self._dim is not None
        return self._dim

    def __repr__(self) -> str:
        auth = "***" if self._key is not None else None
        return f"HttpEmbedder(name={self.name!r}, url={self._url!r}, dim={self._dim}, auth={auth!r})"

    def close(self) -> None:
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> HttpEmbedder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def embed(self, texts: Sequence[str], role: Role = "document") -> FloatMatrix:
        items = check_texts(texts)
        check_role(role)  # OpenAI-style APIs have no role; validated so a typo still fails loudly
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [self._post_with_retries(batch) for batch in self._batches(items)]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    # -- internals ------------------------------------------------------------------------
    def _batches(self, texts: list[str]) -> Iterator[list[str]]:
        """Consecutive batches bounded by count and by UTF-8 bytes; an oversized text goes alone."""
        batch: list[str] = []
        size = 0
        for text in texts:
            cost = len(text.encode("utf-8", "surrogatepass"))
            if batch and (len(batch) >= self._options.batch_size or size + cost > self._options.max_batch_bytes):
                yield batch
                batch, size = [], 0
            batch.append(text)
            size += cost
        if batch:
            yield batch

    def _post_with_retries(self, texts: list[str]) -> FloatMatrix:
        attempt = 1
        while True:
            try:
                vectors = self._post_once(texts, attempt)
            except _RETRYABLE as exc:
                if attempt >= self._options.max_attempts:
                    raise
                delay = self._delay(attempt, getattr(exc, "retry_after", None))
                logger.info("%s; retrying in %.2fs", exc, delay)
                self._sleep(delay)
                attempt += 1
                continue
            return self._learn_dim(vectors)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self._options.retry_after_cap)
        ceiling = min(self._options.backoff_cap, self._options.backoff_base * 2.0 ** (attempt - 1))
        # "Equal jitter": at least half the backoff, so retries from many clients spread out.
        return ceiling / 2 + random.uniform(0.0, ceiling / 2)

    def _learn_dim(self, vectors: FloatMatrix) -> FloatMatrix:
        width = int(vectors.shape[1])
        with self._dim_lock:
            if self._dim is None:
                self._dim = width
            elif width != self._dim:  # a concurrent first call learnt another width
                raise DimensionMismatch(f"{self.name} returned dimension {width}, earlier {self._dim}")
        return vectors

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._key is not None:
            headers["Authorization"] = f"Bearer {self._key.reveal()}"
        if self._actor is not None:
            headers[ACTOR_HEADER] = self._actor
        return headers

    def _redact(self, text: str) -> str:
        if self._key is not None and self._key.reveal():
            text = text.replace(self._key.reveal(), "***")
        return text

    def _post_once(self, texts: list[str], attempt: int) -> FloatMatrix:
        """One request, every failure translated to a typed EmbedderError (the one place)."""
        tag = f"attempt {attempt}/{self._options.max_attempts}"
        # ensure_ascii: a stray lone surrogate is escaped instead of failing to encode.
        body = json.dumps(request_body(self._model, texts), ensure_ascii=True).encode("ascii")
        try:
            response = self._client.post(self._url, content=body, headers=self._headers(), timeout=self._timeout)
        except (httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            raise EmbedderConnectTimeout(
                f"{self.name}: connecting to {self._origin} timed out after "
                f"{self._options.connect_timeout:g}s ({tag}); is the server up and the URL right?"
            ) from exc
        except httpx.TimeoutException as exc:
            raise EmbedderTimeout(
                f"{self.name}: {self._origin} did not answer within the {self._options.read_timeout:g}s "
                f"read timeout ({tag}, {len(texts)} texts); raise read_timeout or lower the batch size"
            ) from exc
        except httpx.TransportError as exc:
            raise EmbedderConnectionError(
                f"{self.name}: could not talk to {self._origin}: {type(exc).__name__}: "
                f"{self._redact(str(exc))} ({tag}); is the server up and the URL right?"
            ) from exc
        except httpx.HTTPError as exc:
            raise EmbedderBadResponse(
                f"{self.name}: unreadable answer from {self._origin}: {type(exc).__name__}: {self._redact(str(exc))}"
            ) from exc
        return self._decode(response, len(texts), tag)

    def _decode(self, response: httpx.Response, n: int, tag: str) -> FloatMatrix:
        status = response.status_code
        if status < 200 or status >= 300:
            raise self._status_error(response, tag)
        payload = parse_json(response.content, response.headers.get("content-type", ""), self.name, self._redact)
        return decode_vectors(payload, n, self._dim, self.name, self._redact)

    def _status_error(self, response: httpx.Response, tag: str) -> EmbedderError:
        status = response.status_code
        said = self._server_says(response)
        where = f"{self.name}: {self._origin} answered HTTP {status}"
        if status in (401, 403):
            return EmbedderAuthError(
                f"{where} ({said}); the token or API key was refused: check it and its permissions", status=status
            )
        retry_after = parse_retry_after(response.headers.get("retry-after"))
        if status == 429:
            return EmbedderRateLimited(
                f"{where}: rate limited ({said}, {tag}); slow down or raise the quota",
                status=status,
                retry_after=retry_after,
            )
        if status >= 500:
            return EmbedderServerError(
                f"{where}: server error ({said}, {tag}); usually transient", status=status, retry_after=retry_after
            )
        if 300 <= status < 400:
            location = self._redact(response.headers.get("location", "?"))
            return EmbedderRejected(
                f"{where}: redirect to {location!r}; set the URL to the final API root", status=status
            )
        return EmbedderRejected(
            f"{where}: request refused ({said}); check the model name {self._model!r} and input size", status=status
        )

    def _server_says(self, response: httpx.Response) -> str:
        try:
            message = error_message(json.loads(response.content))
        except ValueError:  # not JSON: quote the start of whatever it was
            message = None
        if message:
            return f"server says {self._redact(message)!r}"
        return f"body {snippet(response.content, self._redact)}"


def build_http(settings: EmbedderSettings, kind: str, *, transport: httpx.BaseTransport | None = None) -> HttpEmbedder:
    """The gateway or provider embedder that ``settings`` describe (not yet probed)."""
    options = HttpOptions(
        connect_timeout=settings.connect_timeout,
        read_timeout=settings.read_timeout,
        max_attempts=settings.max_attempts,
        batch_size=settings.http_batch_size,
        max_batch_bytes=settings.http_max_batch_bytes,
    )
    if kind == "gateway":
        if settings.gateway_url is None or settings.gateway_token is None:
            raise EmbedderUnavailable("the gateway needs MEMPAGER_GATEWAY_URL and MEMPAGER_GATEWAY_TOKEN")
        return HttpEmbedder.gateway(
            settings.gateway_url,
            token=settings.gateway_token,
            actor=settings.actor,
            model=settings.gateway_model,
            dim=settings.gateway_dim,
            options=options,
            transport=transport,
        )
    if kind == "provider":
        if settings.provider_url is None or settings.provider_model is None:
            raise EmbedderUnavailable("the provider needs MEMPAGER_PROVIDER_URL and MEMPAGER_PROVIDER_MODEL")
        return HttpEmbedder.provider(
            settings.provider_url,
            model=settings.provider_model,
            api_key=settings.provider_api_key,
            dim=settings.provider_dim,
            options=options,
            transport=transport,
        )
    raise ValueError(f"kind must be 'gateway' or 'provider', got {kind!r}")
