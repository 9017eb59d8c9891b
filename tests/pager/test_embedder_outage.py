"""The pager while its embedder is down: a real HTTP embedder against a real server on 127.0.0.1.

Issues 3 and 4: a failing embedder is never fatal (the store opens, writes stay durable and
pending, retrieval falls back to the lexical and salience lanes), retries are bounded per batch
with the error recorded, nothing invalid reaches the store or the index, and the workers catch up
by themselves once the server answers again. The server is the embedder tests' own fixture.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import mempager
from mempager import PagerConfig
from mempager.core import Pager
from mempager.embedders import HashEmbedder
from mempager.embedders.testing import EmbeddingServer, Reply
from mempager.types import FloatMatrix, Role

from ..cli_helpers import run_cli
from ..embedders.conftest import MODEL, TOKEN, closed_port, hash_server  # noqa: F401 - fixtures reused

N = 6  # one embedding batch (embed_batch_size 8), so one HTTP request per try
NAME = f"http:{MODEL}@127.0.0.1"
FAST = PagerConfig(
    embedder="gateway",
    embed_batch_size=8,
    embed_max_attempts=3,
    embed_backoff_seconds=0.01,
    embed_max_backoff_seconds=0.05,
)


def _nan(payload: dict[str, Any]) -> dict[str, Any]:
    return {**payload, "data": [{**d, "embedding": [float("nan")] * len(d["embedding"])} for d in payload["data"]]}


def _narrow(payload: dict[str, Any]) -> dict[str, Any]:
    return {**payload, "data": [{**d, "embedding": d["embedding"][:100]} for d in payload["data"]]}


FAULTS = {
    "503": (Reply(status=503), "EmbedderServerError"),
    "nan": (Reply(mutate=_nan), "NonFiniteVector"),
    "wrong-dim": (Reply(mutate=_narrow), "DimensionMismatch"),
}


def gateway_env(url: str) -> dict[str, str]:
    return {
        "MEMPAGER_GATEWAY_URL": url,
        "MEMPAGER_GATEWAY_TOKEN": TOKEN,
        "MEMPAGER_LOCAL_MODEL": "off",
        "MEMPAGER_EMBED_MAX_ATTEMPTS": "1",
        "MEMPAGER_EMBED_PROBE_TIMEOUT": "5",
    }


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Poll until ``condition`` holds; the timeout only stops a broken run from hanging."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.01)


def facts(p: Pager, first: int = 0) -> list[str]:
    return p.remember_many(
        [{"type": "fact", "text": f"the rotation code for vault {i} is zq{i}x{i * 7}"} for i in range(first, first + N)]
    )


def memory_texts(server: EmbeddingServer) -> int:
    """Requests that carried memories to embed (not the boot probe, not a query)."""
    return sum(1 for r in server.requests if any("rotation code" in t for t in r.body.get("input", [])))


@pytest.fixture
def opened(store_path: Path, hash_server: EmbeddingServer) -> Iterator[Pager]:  # noqa: F811 - the fixture
    with mempager.open(store_path, actor="neo", config=FAST, environ=gateway_env(hash_server.url)) as p:
        assert p.stats()["embedder"] == NAME, p.stats()["embedder_candidates"]
        yield p


def assert_found_without_the_semantic_lane(p: Pager, uri: str, query: str) -> None:
    hits = {s.uri: s for s in p.retrieve(query, k=5)}
    assert uri in hits, list(hits)
    lanes = set(hits[uri].lanes)
    assert "semantic" not in lanes and lanes & {"lexical", "salience"}, lanes
    page = p.page(query, goal="rotate the vault codes")
    assert uri in [s.uri for s in page.snippets]


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_failing_embedder_leaves_memories_pending_then_the_worker_catches_up(
    opened: Pager,
    hash_server: EmbeddingServer,  # noqa: F811 - the fixture
    fault: str,
) -> None:
    p = opened
    before = facts(p)
    assert p.sync(timeout=60)
    indexed = {p.get(u).label for u in before}
    assert set(p.semantic.index.labels().tolist()) == indexed
    reply, error_type = FAULTS[fault]
    hash_server.break_with(reply)  # the server passed the boot probe; now every answer is bad
    during = facts(p, first=N)
    labels = {p.get(u).label: u for u in during}
    wait_for(lambda: p.stats()["failing_embeddings"] == N, "the failures to be recorded")

    stats = p.stats()
    assert stats["memories"] == 2 * N and stats["pending_embeddings"] == N, stats
    assert error_type in (stats["last_embed_error"] or ""), stats
    pending = p.store.pending("neo", NAME, 100)
    assert {item.label for item in pending} == set(labels)
    assert all(item.attempts >= 1 and error_type in (item.last_error or "") for item in pending), pending
    # nothing of the bad answers reached the store or the index
    assert p.store.vector_models("neo") == {NAME: N}
    assert set(p.store.vector_labels("neo", NAME).tolist()) == indexed
    assert set(p.semantic.index.labels().tolist()) == indexed
    assert not p.sync(timeout=0.2)
    # every memory is still reachable: the new ones by the lexical and salience lanes
    label, uri = next(iter(labels.items()))
    i = during.index(uri) + N
    assert_found_without_the_semantic_lane(p, uri, f"rotation code for vault {i} zq{i}x{i * 7}")
    assert p.get(uri).label == label

    hash_server.heal()
    assert p.sync(timeout=60)
    stats = p.stats()
    assert stats["pending_embeddings"] == 0 and stats["failing_embeddings"] == 0, stats
    assert stats["last_embed_error"] is None and stats["vectors_indexed"] == 2 * N
    everything = indexed | set(labels)
    assert set(p.store.vector_labels("neo", NAME).tolist()) == everything
    assert set(p.semantic.index.labels().tolist()) == everything
    assert p.store.vector_models("neo") == {NAME: 2 * N}
    hits = {s.uri: s for s in p.retrieve(f"rotation code for vault {i} zq{i}x{i * 7}", k=5)}
    assert "semantic" in hits[uri].lanes


def test_retries_are_bounded_per_batch_and_every_round_is_recorded(
    store_path: Path,
    hash_server: EmbeddingServer,  # noqa: F811 - the fixture
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="mempager.worker")
    env = gateway_env(hash_server.url)
    with mempager.open(store_path, actor="neo", config=FAST, environ=env) as p:
        hash_server.break_with(Reply(status=503))
        labels = {p.get(u).label for u in facts(p)}

        def rounds() -> int:
            return min(item.attempts for item in p.store.pending("neo", NAME, 100))

        wait_for(lambda: len(p.store.pending("neo", NAME, 100)) == N and rounds() >= 2, "two failed rounds")
        p.workers.stop()  # the counts below are final from here on
        pending = p.store.pending("neo", NAME, 100)
        tries = memory_texts(hash_server)
    recorded = pending[0].attempts
    assert {item.label for item in pending} == labels and {it.attempts for it in pending} == {recorded}
    # each round made at most embed_max_attempts tries, and only the last can have been cut short
    assert (recorded - 1) * FAST.embed_max_attempts < tries <= recorded * FAST.embed_max_attempts
    assert "failed 3 time(s); they stay pending" in caplog.text
    hash_server.heal()
    with mempager.open(store_path, actor="neo", config=FAST, environ=env) as p:
        assert p.sync(timeout=60)
        assert set(p.store.vector_labels("neo", NAME).tolist()) == labels  # nothing lost


def test_a_forced_embedder_down_at_open_opens_and_catches_up_with_its_own_model(
    store_path: Path,
    hash_server: EmbeddingServer,  # noqa: F811 - the fixture
) -> None:
    hash_server.break_with(Reply(status=503))  # the boot probe fails; no width is configured
    env = gateway_env(hash_server.url)
    with mempager.open(store_path, actor="neo", config=FAST, environ=env) as p:
        stats = p.stats()
        assert stats["embedder"] == NAME
        gateway = next(c for c in stats["embedder_candidates"] if c["kind"] == "gateway")
        assert gateway["status"] == "down" and "EmbedderServerError" in gateway["reason"], gateway
        uris = facts(p)
        wait_for(lambda: p.stats()["failing_embeddings"] == N, "the failures to be recorded")
        assert len(p.semantic) == 0 and p.store.vector_models("neo") == {}
        assert_found_without_the_semantic_lane(p, uris[2], "rotation code for vault 2")
        hash_server.heal()
        assert p.sync(timeout=60)
        # the forced model's vectors, and no other model's: nothing was embedded by a stand-in
        assert p.store.vector_models("neo") == {NAME: N} and len(p.semantic) == N
        assert p.semantic.index.dim == 384
        assert "semantic" in {s.uri: s for s in p.retrieve("rotation code for vault 2", k=5)}[uris[2]].lanes
    with mempager.open(store_path, actor="neo", config=FAST, environ=env) as p:  # the saved index is used
        assert p.semantic.opened_how.startswith("loaded") and len(p.semantic) == N
    hash_server.break_with(Reply(status=503))
    with mempager.open(store_path, actor="neo", config=FAST, environ=env) as p:
        # down again, width unknown to the client: the store's vectors give it, the index is rebuilt
        assert p.semantic.opened_how.startswith("rebuilt") and len(p.semantic) == N
        late = facts(p, first=N)
        wait_for(lambda: p.stats()["failing_embeddings"] == N, "the failures to be recorded")
        hash_server.heal()
        assert p.sync(timeout=60)
        assert p.store.vector_models("neo") == {NAME: 2 * N} and len(p.semantic) == 2 * N
        assert p.get(late[0]).label in p.semantic


def test_a_forced_local_model_whose_package_is_missing_still_opens(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # what `import` sees when it is missing
    config = FAST.with_(embedder="local")
    # the torch backend: a saved ONNX export would serve without sentence-transformers
    environ = {"MEMPAGER_LOCAL_MODEL": "", "MEMPAGER_LOCAL_BACKEND": "torch"}
    with mempager.open(store_path, actor="neo", config=config, environ=environ) as p:
        stats = p.stats()
        local = next(c for c in stats["embedder_candidates"] if c["kind"] == "local")
        assert local["status"] == "down" and "MissingExtra" in local["reason"] and "mempager[local]" in local["reason"]
        uris = facts(p)
        wait_for(lambda: p.stats()["failing_embeddings"] == N, "the failures to be recorded")
        assert "MissingExtra" in (p.stats()["last_embed_error"] or "")
        assert p.store.vector_models("neo") == {}
        assert_found_without_the_semantic_lane(p, uris[4], "rotation code for vault 4")


def test_cli_with_a_forced_gateway_down_warns_once_and_still_works(
    tmp_path: Path,
    closed_port: int,  # noqa: F811 - the fixture
) -> None:
    env = {**gateway_env(f"http://127.0.0.1:{closed_port}"), "MEMPAGER_EMBEDDER": "gateway"}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli(tmp_path, *args, env=env)

    with mempager.open(
        tmp_path / "cli.duckdb", actor="default", config=FAST, environ=gateway_env(f"http://127.0.0.1:{closed_port}")
    ) as p:
        uri = p.remember_fact("the vault rotation code is zq7x49")
    stats = cli("stats", "--json")
    gateway = next(c for c in json.loads(stats.stdout)["embedder_candidates"] if c["kind"] == "gateway")
    assert gateway["status"] == "down" and "EmbedderConnectionError" in gateway["reason"]
    warning = [line for line in stats.stderr.splitlines() if "gateway: down" in line]
    assert len(warning) == 1 and "lexical and salience lanes" in warning[0], stats.stderr
    assert "Traceback" not in stats.stderr
    found = json.loads(cli("retrieve", "vault rotation code", "--json").stdout)
    assert found and found[0]["uri"] == uri
    assert "pending_embeddings: 1" in cli("stats").stdout
    # remember stores and says it is not embedded yet, instead of waiting out its sync timeout
    written = cli("remember", "--type", "fact", "the staging cluster is kestrel-9")
    assert written.stdout.strip().startswith("mem://default/fact/")
    assert "stored, not yet embedded" in written.stderr and "EmbedderConnectionError" in written.stderr
    assert "pending_embeddings: 2" in cli("stats").stdout


class QueriesBreak(HashEmbedder):
    """Documents embed; every query raises a foreign error, as a custom embedder's bug would."""

    def embed(self, texts: Sequence[str], role: Role = "document") -> FloatMatrix:
        if role == "query":
            raise RuntimeError("the query model crashed")
        return super().embed(texts, role)


def test_retrieve_and_page_survive_a_query_embedding_failure(
    store_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with mempager.open(store_path, actor="neo", config=FAST.with_(embedder="hash"), embedder=QueriesBreak(384)) as p:
        uris = facts(p)
        assert p.sync(timeout=60) and len(p.semantic) == N  # the documents are embedded and indexed
        assert_found_without_the_semantic_lane(p, uris[3], "rotation code for vault 3")
    assert "semantic lane skipped for this query" in caplog.text and "RuntimeError" in caplog.text
