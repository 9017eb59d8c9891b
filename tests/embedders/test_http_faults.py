"""Every way an embeddings server can misbehave becomes a typed error, and retries stay bounded.

Faults are scripted on a real server on 127.0.0.1; the two a loopback server cannot produce on
demand (a connect timeout, a dropped connection) come from ``httpx.MockTransport``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from typing import Any

import httpx
import pytest

from mempager.embedders import HashEmbedder, HttpEmbedder, HttpOptions
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
from mempager.embedders.testing import EmbeddingServer, Reply
from mempager.embedders.wire import response_body
from mempager.errors import DimensionMismatch, EmbedderError, EmbedderUnavailable, NonFiniteVector

from .conftest import MODEL, TOKEN, SleepRecorder

TEXTS = ["first text", "second text", "third text"]
Payload = dict[str, Any]


def _embedder(url: str, sleeps: SleepRecorder, **options: Any) -> HttpEmbedder:
    opts = HttpOptions(**{"max_attempts": 3, "read_timeout": 5.0, **options})
    return HttpEmbedder(url, model=MODEL, api_key=TOKEN, dim=384, options=opts, sleep=sleeps)


def _edit(change: Callable[[Payload], object]) -> Callable[[Payload], Payload]:
    def mutate(payload: Payload) -> Payload:
        change(payload)
        return payload

    return mutate


def _set_value(value: float) -> Callable[[Payload], Payload]:
    return _edit(lambda p: p["data"][1]["embedding"].__setitem__(5, value))


BAD_PAYLOADS: list[tuple[str, Callable[[Payload], Any], type[EmbedderError], str]] = [
    ("nan", _set_value(float("nan")), NonFiniteVector, "NaN"),
    ("infinity", _set_value(float("inf")), NonFiniteVector, "infinite"),
    (
        "wrong dim",
        _edit(lambda p: [d.__setitem__("embedding", d["embedding"][:100]) for d in p["data"]]),
        DimensionMismatch,
        "dimension 100",
    ),
    (
        "one row short",
        _edit(lambda p: p["data"][1].__setitem__("embedding", p["data"][1]["embedding"][:-1])),
        DimensionMismatch,
        "383",
    ),
    ("fewer", _edit(lambda p: p["data"].pop()), EmbedderBadResponse, "2 embeddings for 3 inputs"),
    (
        "more",
        _edit(lambda p: p["data"].append({**copy.deepcopy(p["data"][0]), "index": 3})),
        EmbedderBadResponse,
        "4 embeddings for 3 inputs",
    ),
    ("empty list", _edit(lambda p: p["data"].clear()), EmbedderBadResponse, "0 embeddings"),
    (
        "duplicate index",
        _edit(lambda p: p["data"][1].__setitem__("index", p["data"][0]["index"])),
        EmbedderBadResponse,
        "appears twice",
    ),
    ("missing index", _edit(lambda p: p["data"][0].pop("index")), EmbedderBadResponse, "no integer 'index'"),
    ("index out of range", _edit(lambda p: p["data"][0].__setitem__("index", 7)), EmbedderBadResponse, "outside"),
    (
        "string values",
        _edit(lambda p: p["data"][0].__setitem__("embedding", ["a"] * 384)),
        EmbedderBadResponse,
        "not arrays of numbers",
    ),
    ("base64", _edit(lambda p: p["data"][0].__setitem__("embedding", "AAAA")), EmbedderBadResponse, "base64"),
    (
        "zero vector",
        _edit(lambda p: p["data"][0].__setitem__("embedding", [0.0] * 384)),
        EmbedderBadResponse,
        "all-zero",
    ),
    ("error object", lambda p: {"error": {"message": "quota exhausted"}}, EmbedderBadResponse, "quota exhausted"),
    ("not an object", lambda p: [1, 2, 3], EmbedderBadResponse, "no 'data' list"),
]


@pytest.mark.parametrize(("mutate", "error", "match"), [c[1:] for c in BAD_PAYLOADS], ids=[c[0] for c in BAD_PAYLOADS])
def test_bad_payloads_are_typed_errors_and_never_vectors(
    hash_server: EmbeddingServer,
    sleeps: SleepRecorder,
    mutate: Callable[[Payload], Any],
    error: type[EmbedderError],
    match: str,
) -> None:
    hash_server.script(Reply(mutate=mutate))
    with pytest.raises(error, match=match):
        _embedder(hash_server.url, sleeps).embed(TEXTS)
    assert hash_server.count() == 1  # a malformed answer is not retried: it would come back the same


CANNED = [
    (
        "html page",
        Reply(status=200, body=b"<!doctype html><html><body>Sign in</body></html>", content_type="text/html"),
        EmbedderBadResponse,
        "HTML page",
    ),
    (
        "truncated json",
        Reply(status=200, body=b'{"data": [{"index": 0, "embedding": [0.1, 0.2'),
        EmbedderBadResponse,
        "invalid or truncated JSON",
    ),
    ("empty body", Reply(status=200, body=b""), EmbedderBadResponse, "truncated JSON"),
    (
        "unknown model",
        Reply(status=404, body=b'{"error": {"message": "model nope does not exist"}}'),
        EmbedderRejected,
        "model nope does not exist",
    ),
    (
        "too large",
        Reply(status=413, body=b"payload too large", content_type="text/plain"),
        EmbedderRejected,
        "HTTP 413",
    ),
    (
        "redirect",
        Reply(status=301, headers={"Location": "https://elsewhere.example/v1/embeddings"}),
        EmbedderRejected,
        "redirect",
    ),
]


@pytest.mark.parametrize(("reply", "error", "match"), [c[1:] for c in CANNED], ids=[c[0] for c in CANNED])
def test_bad_answers_are_typed_errors(
    hash_server: EmbeddingServer, sleeps: SleepRecorder, reply: Reply, error: type[EmbedderError], match: str
) -> None:
    hash_server.script(reply)
    with pytest.raises(error, match=match):
        _embedder(hash_server.url, sleeps).embed(TEXTS)
    assert hash_server.count() == 1 and sleeps.delays == []


@pytest.mark.parametrize("status", [401, 403])
def test_refused_credentials_are_not_retried(hash_server: EmbeddingServer, sleeps: SleepRecorder, status: int) -> None:
    hash_server.script(Reply(status=status))
    with pytest.raises(EmbedderAuthError, match=f"HTTP {status}") as caught:
        _embedder(hash_server.url, sleeps).embed(TEXTS)
    assert isinstance(caught.value, EmbedderUnavailable) and caught.value.status == status
    assert hash_server.count() == 1


def test_wrong_token_is_an_auth_error(hash_server: EmbeddingServer, sleeps: SleepRecorder) -> None:
    wrong = HttpEmbedder(hash_server.url, model=MODEL, api_key="not-the-token", sleep=sleeps)
    with pytest.raises(EmbedderAuthError, match="refused"):
        wrong.embed(TEXTS)


def test_read_timeout_is_typed_and_not_retried(hash_server: EmbeddingServer, sleeps: SleepRecorder) -> None:
    hash_server.script(Reply(delay=1.0))
    with pytest.raises(EmbedderTimeout, match="read timeout") as caught:
        _embedder(hash_server.url, sleeps, read_timeout=0.2).embed(TEXTS)
    assert not isinstance(caught.value, EmbedderConnectionError)
    assert hash_server.count() == 1 and sleeps.delays == []


def test_429_honours_retry_after_seconds_then_succeeds(hash_server: EmbeddingServer, sleeps: SleepRecorder) -> None:
    hash_server.script(Reply(status=429, headers={"Retry-After": "2"}))
    got = _embedder(hash_server.url, sleeps).embed(TEXTS)
    assert got.tobytes() == HashEmbedder(dim=384).embed(TEXTS).tobytes()
    assert hash_server.count() == 2 and sleeps.delays == [2.0]


def test_retry_after_http_date_and_cap(hash_server: EmbeddingServer, sleeps: SleepRecorder) -> None:
    when = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=20), usegmt=True)
    hash_server.script(
        Reply(status=503, headers={"Retry-After": when}), Reply(status=429, headers={"Retry-After": "3600"})
    )
    _embedder(hash_server.url, sleeps, retry_after_cap=30.0).embed(TEXTS)
    assert 17.0 < sleeps.delays[0] <= 20.0
    assert sleeps.delays[1] == 30.0  # an hour was asked for; the cap wins
    assert hash_server.count() == 3


def test_5xx_backs_off_exponentially_with_jitter(hash_server: EmbeddingServer, sleeps: SleepRecorder) -> None:
    hash_server.script(Reply(status=500), Reply(status=503), Reply(status=502))
    _embedder(hash_server.url, sleeps, max_attempts=4, backoff_base=1.0, backoff_cap=3.0).embed(TEXTS)
    first, second, third = sleeps.delays
    assert 0.5 <= first <= 1.0 and 1.0 <= second <= 2.0 and 1.5 <= third <= 3.0  # 1, 2, then capped at 3
    assert hash_server.count() == 4


@pytest.mark.parametrize(("status", "error"), [(429, EmbedderRateLimited), (503, EmbedderServerError)])
def test_retries_are_bounded(
    hash_server: EmbeddingServer, sleeps: SleepRecorder, status: int, error: type[EmbedderError]
) -> None:
    hash_server.script(*[Reply(status=status, headers={"Retry-After": "1"})] * 10)
    with pytest.raises(error, match="attempt 3/3") as caught:
        _embedder(hash_server.url, sleeps).embed(TEXTS)
    assert hash_server.count() == 3 and sleeps.delays == [1.0, 1.0]
    assert caught.value.retry_after == 1.0  # type: ignore[attr-defined]


def test_html_error_page_from_a_proxy_is_a_server_error(hash_server: EmbeddingServer, sleeps: SleepRecorder) -> None:
    page = Reply(status=502, body=b"<html><h1>502 Bad Gateway</h1></html>", content_type="text/html")
    hash_server.script(page, page, page)
    with pytest.raises(EmbedderServerError, match="502 Bad Gateway"):
        _embedder(hash_server.url, sleeps).embed(TEXTS)


def test_connection_refused_is_retried_then_typed(closed_port: int, sleeps: SleepRecorder) -> None:
    with pytest.raises(EmbedderConnectionError, match="could not talk to") as caught:
        _embedder(f"http://127.0.0.1:{closed_port}", sleeps).embed(TEXTS)
    assert len(sleeps.delays) == 2 and isinstance(caught.value.__cause__, httpx.ConnectError)


def _transport(failures: list[Exception]) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    calls: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if failures:
            raise failures.pop(0)
        texts = json.loads(request.content)["input"]
        body = response_body(HashEmbedder(dim=384).embed(texts), MODEL, range(len(texts)))
        return httpx.Response(200, json=body)

    return httpx.MockTransport(handle), calls


def test_connect_timeout_is_retried_and_is_both_timeout_and_connection_error(sleeps: SleepRecorder) -> None:
    transport, calls = _transport([httpx.ConnectTimeout("timed out")] * 5)
    embedder = HttpEmbedder("http://gw.invalid", model=MODEL, transport=transport, sleep=sleeps)
    with pytest.raises(EmbedderConnectTimeout) as caught:
        embedder.embed(TEXTS)
    assert isinstance(caught.value, EmbedderTimeout) and isinstance(caught.value, EmbedderConnectionError)
    assert len(calls) == 3


def test_dropped_connection_is_retried(sleeps: SleepRecorder) -> None:
    transport, calls = _transport([httpx.RemoteProtocolError("peer closed connection without a response")])
    embedder = HttpEmbedder("http://gw.invalid", model=MODEL, transport=transport, sleep=sleeps)
    assert embedder.embed(TEXTS).shape == (3, 384)
    assert len(calls) == 2 and len(sleeps.delays) == 1


def test_client_and_transport_are_exclusive() -> None:
    from mempager.errors import ConfigError

    transport = httpx.MockTransport(lambda request: httpx.Response(200))
    with httpx.Client() as client, pytest.raises(ConfigError, match="either"):
        HttpEmbedder("http://h", model=MODEL, client=client, transport=transport)
