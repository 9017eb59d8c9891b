"""The HTTP embedder against a real OpenAI-format server on 127.0.0.1 (gateway and provider)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mempager.embedders import HashEmbedder, HttpEmbedder, HttpOptions, LocalEmbedder
from mempager.embedders.http import ACTOR_HEADER
from mempager.embedders.testing import EmbeddingServer, Reply
from mempager.embedders.wire import parse_retry_after
from mempager.errors import ConfigError, DimensionMismatch

from .conftest import MODEL, TOKEN

SENTENCES = ["My dog Rex is three", "The deploy key is 0xdeadbeef", "Zürich 🐍", "a", "b", "c", "d", "e"]


@pytest.mark.slow
def test_gateway_sends_bearer_and_actor_and_returns_the_model_vectors(
    minilm: LocalEmbedder, minilm_server: EmbeddingServer
) -> None:
    gateway = HttpEmbedder.gateway(minilm_server.url, token=TOKEN, actor="neo", model=MODEL)
    vectors = gateway.embed(SENTENCES)
    np.testing.assert_allclose(vectors, minilm.embed(SENTENCES), atol=1e-5)  # shuffled data, reordered
    request = minilm_server.requests[-1]
    assert request.path == "/v1/embeddings"
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert request.headers[ACTOR_HEADER.lower()] == "neo"
    assert request.body == {"model": MODEL, "input": SENTENCES}
    assert gateway.name == f"http:{MODEL}@127.0.0.1" and gateway.dim == 384


@pytest.mark.slow
def test_provider_sends_its_key_and_no_actor(minilm: LocalEmbedder, minilm_server: EmbeddingServer) -> None:
    provider = HttpEmbedder.provider(minilm_server.url, model=MODEL, api_key=TOKEN, dim=384)
    np.testing.assert_allclose(provider.embed(SENTENCES[:2]), minilm.embed(SENTENCES[:2]), atol=1e-5)
    request = minilm_server.requests[-1]
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert ACTOR_HEADER.lower() not in request.headers


@pytest.mark.slow
def test_from_env_builds_gateway_and_provider(minilm_server: EmbeddingServer) -> None:
    env = {
        "MEMPAGER_GATEWAY_URL": minilm_server.url,
        "MEMPAGER_GATEWAY_TOKEN": TOKEN,
        "MEMPAGER_PROVIDER_URL": minilm_server.url + "/v1",
        "MEMPAGER_PROVIDER_API_KEY": TOKEN,
        "MEMPAGER_PROVIDER_MODEL": MODEL,
    }
    gateway = HttpEmbedder.from_env(env, kind="gateway", actor="trinity")
    provider = HttpEmbedder.from_env(env, kind="provider")
    assert gateway.embed(["hi"]).shape == provider.embed(["hi"]).shape == (1, 384)
    assert minilm_server.requests[-2].headers[ACTOR_HEADER.lower()] == "trinity"
    assert provider.url == minilm_server.url + "/v1/embeddings"


def test_keyless_provider_sends_no_authorization() -> None:
    with EmbeddingServer(HashEmbedder(dim=64)) as server:
        provider = HttpEmbedder.provider(server.url, model="anything")
        assert provider.embed(["x"]).shape == (1, 64)
        assert "authorization" not in server.requests[-1].headers


def test_rows_are_put_back_in_input_order_by_index(hash_server: EmbeddingServer) -> None:
    def reverse(payload: dict[str, Any]) -> dict[str, Any]:
        payload["data"].reverse()
        return payload

    hash_server.script(Reply(mutate=reverse))
    got = HttpEmbedder.provider(hash_server.url, model=MODEL, api_key=TOKEN).embed(SENTENCES)
    assert got.tobytes() == HashEmbedder(dim=384).embed(SENTENCES).tobytes()


def test_batches_by_count(hash_server: EmbeddingServer) -> None:
    texts = [f"text {i}" for i in range(130)]
    embedder = HttpEmbedder.provider(hash_server.url, model=MODEL, api_key=TOKEN, options=HttpOptions(batch_size=64))
    got = embedder.embed(texts)
    assert [len(r.body["input"]) for r in hash_server.requests] == [64, 64, 2]
    assert got.tobytes() == HashEmbedder(dim=384).embed(texts).tobytes()


def test_batches_by_bytes_and_sends_an_oversized_text_alone(hash_server: EmbeddingServer) -> None:
    texts = ["x" * 40, "y" * 40, "z" * 40, "big" * 200, "w" * 40]
    options = HttpOptions(batch_size=64, max_batch_bytes=100)
    HttpEmbedder.provider(hash_server.url, model=MODEL, api_key=TOKEN, options=options).embed(texts)
    assert [r.body["input"] for r in hash_server.requests] == [texts[0:2], texts[2:3], texts[3:4], texts[4:5]]


def test_dimension_is_discovered_or_enforced(hash_server: EmbeddingServer) -> None:
    discovered = HttpEmbedder.provider(hash_server.url, model=MODEL, api_key=TOKEN)
    assert discovered.dim == 384 and hash_server.count() == 1
    wrong = HttpEmbedder.provider(hash_server.url, model=MODEL, api_key=TOKEN, dim=128)
    with pytest.raises(DimensionMismatch, match="dimension 384"):
        wrong.embed(["x"])


@pytest.mark.parametrize(
    ("base", "expected"),
    [
        ("http://127.0.0.1:9", "http://127.0.0.1:9/v1/embeddings"),
        ("http://127.0.0.1:9/", "http://127.0.0.1:9/v1/embeddings"),
        ("https://api.example.com/v1", "https://api.example.com/v1/embeddings"),
        ("https://gw.example.com/mempager/", "https://gw.example.com/mempager/v1/embeddings"),
        ("http://[::1]:8080", "http://[::1]:8080/v1/embeddings"),
    ],
)
def test_endpoint_url(base: str, expected: str) -> None:
    assert HttpEmbedder(base, model=MODEL).url == expected


@pytest.mark.parametrize(
    "base", ["ftp://host", "host:8080", "http://user:pa55word@host", "http://host/?key=pa55word", "http://host:x"]
)
def test_bad_urls_are_refused_without_echoing_credentials(base: str) -> None:
    with pytest.raises(ConfigError) as caught:
        HttpEmbedder(base, model=MODEL)
    assert "pa55word" not in str(caught.value)


def test_bad_arguments_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="header"):
        HttpEmbedder("http://h", model=MODEL, actor="neo\r\nX-Evil: 1")
    with pytest.raises(ConfigError, match="dim"):
        HttpEmbedder("http://h", model=MODEL, dim=0)
    with pytest.raises(ConfigError, match="model"):
        HttpEmbedder("http://h", model=" ")
    with pytest.raises(ConfigError, match="max_attempts"):
        HttpOptions(max_attempts=0)
    with pytest.raises(ConfigError, match="read_timeout"):
        HttpOptions(read_timeout=float("inf"))


def test_parse_retry_after() -> None:
    from datetime import datetime, timedelta, timezone
    from email.utils import format_datetime

    now = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(" 1.5 ") == 1.5
    assert parse_retry_after("-2") == 0.0
    assert parse_retry_after(format_datetime(now + timedelta(seconds=7), usegmt=True), now) == 7.0
    assert parse_retry_after(format_datetime(now - timedelta(seconds=7), usegmt=True), now) == 0.0
    for junk in (None, "", "soon", "nan", "inf"):
        assert parse_retry_after(junk) is None
