"""One contract, every backend: hash, the real local MiniLM on torch and on ONNX Runtime (fp32 and
int8), the query cache in front of a model, and HTTP against a real local server."""

from __future__ import annotations

import numpy as np
import pytest

from mempager.embedders import HashEmbedder, HttpEmbedder
from mempager.embedders.query_cache import CachedQueryEmbedder
from mempager.errors import InvalidInput
from mempager.protocols import Embedder

from .conftest import MODEL, TOKEN

TEXTS = [
    "The deploy key lives in vault at secret/deploy/0xdeadbeef.",
    "Caroline went to the LGBTQ support group on 7 May 2023.",
    "Zürich, naïve café, 東京タワー, Москва — and an emoji: 🐍🚀",
    "",  # empty text still gets a finite unit vector
    "word " * 3000,  # far past any model's sequence length
]


@pytest.fixture(
    params=[
        pytest.param("hash"),
        pytest.param("cached"),
        pytest.param("local", marks=pytest.mark.slow),
        pytest.param("onnx_fp32", marks=pytest.mark.slow),
        pytest.param("onnx_int8", marks=pytest.mark.slow),
        pytest.param("http", marks=pytest.mark.slow),
    ]
)
def embedder(request: pytest.FixtureRequest) -> Embedder:
    if request.param == "hash":
        return HashEmbedder(dim=384)
    if request.param == "cached":
        return CachedQueryEmbedder(HashEmbedder(dim=384), size=4)
    if request.param in ("local", "onnx_fp32", "onnx_int8"):
        local: Embedder = request.getfixturevalue("minilm" if request.param == "local" else request.param)
        return local
    server = request.getfixturevalue("minilm_server")
    return HttpEmbedder.provider(server.url, model=MODEL, api_key=TOKEN)


def _assert_unit_rows(vectors: np.ndarray, n: int, dim: int) -> None:
    assert vectors.shape == (n, dim)
    assert vectors.dtype == np.float32
    assert np.isfinite(vectors).all()
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_satisfies_the_protocol(embedder: Embedder) -> None:
    assert isinstance(embedder, Embedder)
    assert embedder.name and embedder.dim > 0


def test_rows_are_finite_unit_float32_for_awkward_text(embedder: Embedder) -> None:
    _assert_unit_rows(embedder.embed(TEXTS), len(TEXTS), embedder.dim)


def test_deterministic(embedder: Embedder) -> None:
    first, second = embedder.embed(TEXTS[:3]), embedder.embed(TEXTS[:3])
    if isinstance(embedder, HashEmbedder):
        assert first.tobytes() == second.tobytes()
    else:
        np.testing.assert_allclose(first, second, atol=1e-6)


def test_batch_of_one(embedder: Embedder) -> None:
    _assert_unit_rows(embedder.embed(["just one"]), 1, embedder.dim)


def test_batch_crossing_the_batch_size_keeps_order(embedder: Embedder) -> None:
    texts = [f"memory number {i}: the {'blue' if i % 2 else 'red'} door {i * 7}" for i in range(130)]
    vectors = embedder.embed(texts)
    _assert_unit_rows(vectors, 130, embedder.dim)
    for i in (0, 63, 64, 127, 129):  # first, both sides of each 64-boundary, last
        alone = embedder.embed([texts[i]])[0]
        np.testing.assert_allclose(vectors[i], alone, atol=1e-4)


def test_query_and_document_roles_accepted(embedder: Embedder) -> None:
    for role in ("query", "document"):
        _assert_unit_rows(embedder.embed(["where is the deploy key?"], role=role), 1, embedder.dim)


def test_empty_input_gives_empty_matrix(embedder: Embedder) -> None:
    out = embedder.embed([])
    assert out.shape == (0, embedder.dim) and out.dtype == np.float32


def test_refuses_a_bare_string_a_non_string_and_a_bad_role(embedder: Embedder) -> None:
    with pytest.raises(InvalidInput, match="not one string"):
        embedder.embed("a whole sentence")  # would otherwise embed each character
    with pytest.raises(InvalidInput, match=r"texts\[1\] must be a str"):
        embedder.embed(["fine", 7])  # type: ignore[list-item]
    with pytest.raises(InvalidInput, match="role"):
        embedder.embed(["x"], role="passage")  # type: ignore[arg-type]
