"""The cache of recent query vectors: hits skip the model, LRU eviction, copies, threads, wiring."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import pytest

from mempager.embedders import EmbedderSettings, HashEmbedder, LocalEmbedder, pick_embedder
from mempager.embedders.query_cache import CachedQueryEmbedder, QueryCache
from mempager.errors import ConfigError, InvalidInput
from mempager.protocols import Embedder
from mempager.types import FloatMatrix, Role


class Counting:
    """Forwards to ``inner`` and records every call: a hit must never reach it."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.calls: list[tuple[list[str], str]] = []
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str], role: Role = "document") -> FloatMatrix:
        with self._lock:
            self.calls.append((list(texts), role))
        return self.inner.embed(texts, role=role)

    def texts_embedded(self) -> list[str]:
        return [text for texts, _ in self.calls for text in texts]


@pytest.fixture
def counting() -> Counting:
    return Counting(HashEmbedder(dim=64))


def test_a_repeated_query_is_answered_from_the_cache(counting: Counting) -> None:
    cached = CachedQueryEmbedder(counting, size=8)
    first = cached.embed(["where is the deploy key?"], role="query")
    second = cached.embed(["where is the deploy key?"], role="query")
    assert len(counting.calls) == 1  # the second call never reached the model
    assert first.tobytes() == second.tobytes() and second.dtype == np.float32 and second.shape == (1, 64)
    assert (cached.cache.hits, cached.cache.misses) == (1, 1)
    assert (cached.name, cached.dim) == (counting.name, counting.dim)


def test_documents_are_never_cached(counting: Counting) -> None:
    cached = CachedQueryEmbedder(counting, size=8)
    cached.embed(["a memory"], role="document")
    cached.embed(["a memory"], role="document")
    cached.embed(["a memory"])  # the protocol's default role is document
    assert len(counting.calls) == 3 and len(cached.cache) == 0


def test_the_role_is_part_of_the_key(counting: Counting) -> None:
    cached = CachedQueryEmbedder(counting, size=8)
    cached.embed(["same text"], role="query")
    cached.embed(["same text"], role="document")
    assert counting.calls == [(["same text"], "query"), (["same text"], "document")]


def test_the_model_name_is_part_of_the_key() -> None:
    cache = QueryCache(4)
    vector = np.ones((4,), dtype=np.float32)
    cache.put(("model-a", "q", "query"), vector)
    assert cache.get(("model-b", "q", "query")) is None
    assert cache.get(("model-a", "q", "query")) is not None


def test_the_exact_text_is_the_key(counting: Counting) -> None:
    cached = CachedQueryEmbedder(counting, size=8)
    for text in ("Deploy key?", "deploy key?", "deploy key? ", "deploy key?"):
        cached.embed([text], role="query")
    assert counting.texts_embedded() == ["Deploy key?", "deploy key?", "deploy key? "]


def test_least_recently_used_is_evicted(counting: Counting) -> None:
    cached = CachedQueryEmbedder(counting, size=2)
    cached.embed(["a"], role="query")
    cached.embed(["b"], role="query")
    cached.embed(["a"], role="query")  # a is now the most recent
    cached.embed(["c"], role="query")  # evicts b
    assert len(cached.cache) == 2
    cached.embed(["a"], role="query")
    cached.embed(["c"], role="query")
    assert counting.texts_embedded() == ["a", "b", "c"]
    cached.embed(["b"], role="query")  # was evicted: embedded again
    assert counting.texts_embedded() == ["a", "b", "c", "b"]


def test_size_zero_disables_the_cache(counting: Counting) -> None:
    cached = CachedQueryEmbedder(counting, size=0)
    for _ in range(3):
        cached.embed(["again"], role="query")
    assert len(counting.calls) == 3 and len(cached.cache) == 0


@pytest.mark.parametrize("size", [-1, 1.5, True, "8"])
def test_a_bad_size_is_refused(size: object) -> None:
    with pytest.raises(ConfigError, match="query cache size"):
        QueryCache(size)  # type: ignore[arg-type]


def test_callers_cannot_corrupt_cached_vectors(counting: Counting) -> None:
    cached = CachedQueryEmbedder(counting, size=8)
    first = cached.embed(["fragile"], role="query")
    expected = first.copy()
    first[:] = 0.0  # the vector handed back on a miss
    hit = cached.embed(["fragile"], role="query")
    np.testing.assert_array_equal(hit, expected)
    hit[:] = 7.0  # the vector handed back on a hit
    np.testing.assert_array_equal(cached.embed(["fragile"], role="query"), expected)
    assert len(counting.calls) == 1


def test_the_stored_array_is_read_only_and_gets_return_copies() -> None:
    cache = QueryCache(2)
    source = np.arange(4, dtype=np.float32)
    cache.put(("m", "q", "query"), source)
    source[:] = -1.0  # changing what was put changes nothing stored
    got = cache.get(("m", "q", "query"))
    assert got is not None and got.tolist() == [0.0, 1.0, 2.0, 3.0] and got.flags.writeable
    assert cache._entries[("m", "q", "query")].flags.writeable is False


def test_several_queries_embed_only_the_missing_ones_in_one_call(counting: Counting) -> None:
    cached = CachedQueryEmbedder(counting, size=8)
    cached.embed(["b"], role="query")
    out = cached.embed(["a", "b", "c", "a"], role="query")
    assert counting.calls[-1] == (["a", "c"], "query")  # b from the cache, a embedded once
    np.testing.assert_array_equal(out, counting.inner.embed(["a", "b", "c", "a"], role="query"))
    assert out.shape == (4, 64) and out.dtype == np.float32


def test_input_is_checked_before_the_cache(counting: Counting) -> None:
    cached = CachedQueryEmbedder(counting, size=8)
    with pytest.raises(InvalidInput, match="not one string"):
        cached.embed("a whole sentence", role="query")
    with pytest.raises(InvalidInput, match="role"):
        cached.embed(["x"], role="passage")  # type: ignore[arg-type]
    assert cached.embed([], role="query").shape == (0, 64)


def test_concurrent_queries_get_their_own_correct_vectors(counting: Counting) -> None:
    cached = CachedQueryEmbedder(counting, size=16)  # smaller than the texts: evictions race with hits
    texts = [f"question {i}" for i in range(40)]
    expected = {text: counting.inner.embed([text], role="query") for text in texts}
    errors: list[str] = []

    def worker(seed: int) -> None:
        order = np.random.default_rng(seed).permutation(len(texts))
        for _ in range(5):
            for i in order:
                got = cached.embed([texts[i]], role="query")
                if got.tobytes() != expected[texts[i]].tobytes():
                    errors.append(texts[i])
                got[:] = 0.0  # scribbling on what came back must not reach another thread

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(cached.cache) == 16
    assert cached.cache.hits + cached.cache.misses == 8 * 5 * len(texts)


def test_the_chain_caches_the_local_models_queries_by_default() -> None:
    assert EmbedderSettings(actor="a").query_cache_size == 1024
    settings = EmbedderSettings.from_env({"MEMPAGER_QUERY_CACHE_SIZE": "16"}, actor="a")
    assert settings.query_cache_size == 16
    with pytest.raises(ConfigError, match="query_cache_size"):
        EmbedderSettings.from_env({"MEMPAGER_QUERY_CACHE_SIZE": "-1"}, actor="a")
    with pytest.raises(ConfigError, match="MEMPAGER_QUERY_CACHE_SIZE"):
        EmbedderSettings.from_env({"MEMPAGER_QUERY_CACHE_SIZE": "many"}, actor="a")


@pytest.mark.slow
def test_the_chain_wraps_the_local_model_and_a_hit_skips_it(minilm: LocalEmbedder) -> None:
    choice = pick_embedder(EmbedderSettings(actor="a", local_backend="torch", query_cache_size=32))
    cached = choice.embedder
    assert isinstance(cached, CachedQueryEmbedder) and cached.cache.size == 32
    assert cached.name == "st:all-MiniLM-L6-v2" and cached.dim == 384
    assert "32 recent query vectors cached" in choice.candidates[2].reason
    spy = Counting(cached.inner)
    cached._inner = spy  # watch the model behind the cache
    first = cached.embed(["What pet does the user have?"], role="query")
    again = cached.embed(["What pet does the user have?"], role="query")
    assert len(spy.calls) == 1
    np.testing.assert_array_equal(first, again)
    np.testing.assert_allclose(again, minilm.embed(["What pet does the user have?"], role="query"), atol=1e-6)


@pytest.mark.slow
def test_size_zero_leaves_the_local_model_unwrapped() -> None:
    choice = pick_embedder(EmbedderSettings(actor="a", local_backend="torch", query_cache_size=0))
    assert isinstance(choice.embedder, LocalEmbedder)
