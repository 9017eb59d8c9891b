"""Fixtures for the embedder tests: the real MiniLM (loaded once), its ONNX exports (made once, in a
temporary directory) and real servers on 127.0.0.1."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from mempager.embedders import HashEmbedder, LocalEmbedder
from mempager.embedders.local_backend import load_local
from mempager.embedders.onnx_embedder import OnnxEmbedder
from mempager.embedders.testing import EmbeddingServer

TOKEN = "gw-token-for-tests"
MODEL = "all-MiniLM-L6-v2"


@pytest.fixture(scope="session")
def minilm() -> LocalEmbedder:
    """The packaged all-MiniLM-L6-v2, loaded once per session (sha256 verified on load)."""
    return LocalEmbedder()


@pytest.fixture(scope="session")
def onnx_cache(onnx_cache_dir: Path) -> Path:
    """The session's shared exports (tests/conftest.py); a test that damages one uses its own."""
    return onnx_cache_dir


@pytest.fixture(scope="session")
def onnx_fp32(onnx_cache: Path, minilm: LocalEmbedder) -> OnnxEmbedder:
    """The packaged MiniLM exported to fp32 ONNX (torch already loaded by ``minilm``)."""
    embedder = load_local(backend="onnx", cache_dir=onnx_cache)
    assert isinstance(embedder, OnnxEmbedder)
    return embedder


@pytest.fixture(scope="session")
def onnx_int8(onnx_cache: Path, minilm: LocalEmbedder) -> OnnxEmbedder:
    embedder = load_local(backend="onnx-int8", cache_dir=onnx_cache)
    assert isinstance(embedder, OnnxEmbedder)
    return embedder


@pytest.fixture(scope="session")
def minilm_server(minilm: LocalEmbedder) -> Iterator[EmbeddingServer]:
    """The real model behind a real OpenAI-format server; shared, so never scripted."""
    with EmbeddingServer(minilm, token=TOKEN, model=MODEL) as server:
        yield server


@pytest.fixture
def hash_server() -> Iterator[EmbeddingServer]:
    """A fresh server per test for fault injection: the hash model keeps it fast and torch-free."""
    with EmbeddingServer(HashEmbedder(dim=384), token=TOKEN, model=MODEL) as server:
        yield server


@pytest.fixture
def closed_port() -> int:
    """A loopback port with nothing listening: connecting to it is refused at once."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


class SleepRecorder:
    """Stands in for ``time.sleep`` so retry tests assert the delays without waiting them out."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.fixture
def sleeps() -> SleepRecorder:
    return SleepRecorder()
