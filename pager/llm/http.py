"""An OpenAI-compatible chat endpoint over httpx: ``POST {url}/v1/chat/completions``.

With a schema the request asks for structured output (``response_format`` of type
``json_schema``); the reply is still validated by ``llm.base.ask``, since many compatible servers
ignore the field. Retries are bounded (``max_attempts``, the first included) with doubling
backoff, and only for failures that can pass: 429, 5xx, refused or dropped connections. A read
timeout is not retried: the server was reachable and slow, and asking again would multiply the
wait. The API key is sent as a bearer token and removed from every message built from foreign
text, so it never reaches a log line, an exception or a repr.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx

from mempager.errors import ConfigError, LLMHttpError, LLMReplyInvalid, LLMTimeout
from mempager.llm.base import SHOWN, Message

log = logging.getLogger("mempager.llm")
MAX_BACKOFF = 30.0  # seconds: a wait longer than this between tries is an outage, not a blip


class _Retryable(LLMHttpError):
    """A failure worth one more try (429, 5xx, a refused or dropped connection)."""


def endpoint(url: str) -> str:
    """``{url}/v1/chat/completions``, accepting a base URL with or without ``/v1``."""
    base = url.rstrip("/")
    return f"{base}/chat/completions" if base.endswith("/v1") else f"{base}/v1/chat/completions"


class ChatClient:
    """``LLM`` over an OpenAI-compatible chat-completions endpoint (a provider or a local server)."""

    def __init__(
        self,
        url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_attempts: int = 3,
        backoff: float = 0.5,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"the LLM url must start with http:// or https://, got {url!r}")
        if not model or not model.strip():
            raise ConfigError("the LLM model must be named (MEMPAGER_LLM_MODEL)")
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ConfigError(f"max_attempts must be a positive integer, got {max_attempts!r}")
        for name, value in (("timeout", timeout), ("backoff", backoff)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
                raise ConfigError(f"{name} must be a finite number of seconds > 0, got {value!r}")
        self.url = endpoint(url)
        self.model = model.strip()
        self._key = api_key or None
        self.timeout = float(timeout)
        self.max_attempts = max_attempts
        self.backoff = float(backoff)
        self._transport = transport
        self._sleep = sleep

    @property
    def name(self) -> str:
        return f"chat:{self.model}"

    def __repr__(self) -> str:  # the key stays out: a repr ends up in logs and tracebacks
        return f"ChatClient(url={self.url!r}, model={self.model!r}, key={'set' if self._key else 'unset'})"

    def __reduce__(self) -> str | tuple[object, ...]:  # a pickled client must not carry the key to disk
        raise TypeError("a ChatClient holds an API key and cannot be pickled")

    def complete(
        self, messages: Sequence[Message], *, schema: Mapping[str, Any] | None = None, schema_name: str = "reply"
    ) -> str:
        body: dict[str, Any] = {"model": self.model, "messages": [dict(m) for m in messages], "temperature": 0}
        if schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": schema_name, "schema": dict(schema)},
            }
        for attempt in range(1, self.max_attempts + 1):
            try:
                return self._once(body)
            except _Retryable as exc:
                if attempt == self.max_attempts:
                    raise LLMHttpError(f"{exc} (after {attempt} tries)") from exc
                delay = min(self.backoff * 2 ** (attempt - 1), MAX_BACKOFF)
                log.warning("LLM %s: %s; try %d of %d in %.2fs", self.name, exc, attempt + 1, self.max_attempts, delay)
                self._sleep(delay)
        raise AssertionError("unreachable: the last try returns or raises")  # pragma: no cover

    def _once(self, body: Mapping[str, Any]) -> str:
        """One request; every httpx error and status becomes an ``LLMError`` here, and only here."""
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        timeout = httpx.Timeout(self.timeout, connect=min(self.timeout, 10.0))
        try:
            with httpx.Client(transport=self._transport, timeout=timeout) as client:
                response = client.post(self.url, json=body, headers=headers)
        except httpx.TimeoutException as exc:
            if isinstance(exc, httpx.ConnectTimeout):
                raise _Retryable(f"connecting to {self.url} timed out") from exc
            raise LLMTimeout(f"{self.url} did not answer within {self.timeout:g}s") from exc
        except httpx.TransportError as exc:  # refused, reset, DNS: the request may pass next time
            raise _Retryable(f"cannot reach {self.url}: {self._clean(str(exc)) or type(exc).__name__}") from exc
        if response.status_code == 429 or response.status_code >= 500:
            raise _Retryable(f"{self.url} answered HTTP {response.status_code}: {self._snippet(response)}")
        if response.status_code >= 400:
            raise LLMHttpError(f"{self.url} answered HTTP {response.status_code}: {self._snippet(response)}")
        return self._content(response)

    def _content(self, response: httpx.Response) -> str:
        try:
            data = response.json()
            message = data["choices"][0]["message"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise LLMReplyInvalid(f"{self.url} sent no chat completion: {self._snippet(response)}") from exc
        if not isinstance(message, Mapping):
            raise LLMReplyInvalid(f"{self.url} sent a chat completion without a message")
        content = message.get("content")
        if isinstance(content, list):  # content parts: keep the text ones
            content = "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
        if not isinstance(content, str) or not content.strip():
            refusal = message.get("refusal")
            why = f"the model refused: {self._clean(str(refusal))[:SHOWN]}" if refusal else "an empty reply"
            raise LLMReplyInvalid(f"{self.url} sent {why}")
        return content

    def _snippet(self, response: httpx.Response) -> str:
        return self._clean(response.text[:SHOWN].replace("\n", " ")) or "(no body)"

    def _clean(self, text: str) -> str:
        """``text`` without the API key (servers echo it back in 401 messages)."""
        return text.replace(self._key, "***") if self._key else text
