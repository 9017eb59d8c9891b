"""The selection chain picks the first candidate that works and says why it passed over the others."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import numpy as np
import pytest

from mempager.embedders import DownEmbedder, EmbedderSettings, HashEmbedder, HttpEmbedder, LocalEmbedder, pick_embedder
from mempager.embedders.chain import EmbedderChoice
from mempager.embedders.testing import EmbeddingServer, Reply
from mempager.errors import EmbedderError, EmbedderUnavailable, InvalidInput

from .conftest import MODEL, TOKEN


def _settings(**changes: object) -> EmbedderSettings:
    base = EmbedderSettings(actor="neo", local_enabled=False, max_attempts=1, probe_timeout=5.0)
    return base.with_(**changes)


def _statuses(choice: EmbedderChoice) -> dict[str, str]:
    return {c.kind: c.status for c in choice.candidates}


def _reason(choice: EmbedderChoice, kind: str) -> str:
    return next(c.reason for c in choice.candidates if c.kind == kind)


def test_gateway_up_is_chosen(hash_server: EmbeddingServer) -> None:
    choice = pick_embedder(_settings(gateway_url=hash_server.url, gateway_token=TOKEN, local_enabled=True))
    assert isinstance(choice.embedder, HttpEmbedder) and choice.embedder.name == f"http:{MODEL}@127.0.0.1"
    assert _statuses(choice) == {"gateway": "active", "provider": "skipped", "local": "skipped", "hash": "skipped"}
    probe_request = hash_server.requests[-1]
    assert probe_request.headers["x-mempager-actor"] == "neo"  # the probe is attributed too
    assert "embedder " + choice.embedder.name in choice.summary()


def test_gateway_down_falls_to_provider(hash_server: EmbeddingServer, closed_port: int) -> None:
    choice = pick_embedder(
        _settings(
            gateway_url=f"http://127.0.0.1:{closed_port}",
            gateway_token=TOKEN,
            provider_url=hash_server.url,
            provider_api_key=TOKEN,
            provider_model=MODEL,
        )
    )
    assert isinstance(choice.embedder, HttpEmbedder)
    assert _statuses(choice) == {"gateway": "failed", "provider": "active", "local": "skipped", "hash": "skipped"}
    assert "EmbedderConnectionError" in _reason(choice, "gateway")
    assert "authorization" in hash_server.requests[-1].headers


@pytest.mark.slow
def test_both_down_falls_to_the_local_model(hash_server: EmbeddingServer, minilm: LocalEmbedder) -> None:
    hash_server.script(Reply(status=401), Reply(status=503))
    choice = pick_embedder(
        _settings(
            gateway_url=hash_server.url,
            gateway_token=TOKEN,
            provider_url=hash_server.url,
            provider_model=MODEL,
            local_enabled=True,
        )
    )
    assert choice.embedder.name == "st:all-MiniLM-L6-v2"
    assert _statuses(choice) == {"gateway": "failed", "provider": "failed", "local": "active", "hash": "skipped"}
    assert "EmbedderAuthError" in _reason(choice, "gateway")
    assert "EmbedderServerError" in _reason(choice, "provider")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("local", "why"),
    [({"local_model": "/nonexistent/model-dir"}, "ModelNotFound"), ({"local_sha256": "0" * 64}, "sha256")],
    ids=["bad path", "bad sha256"],
)
def test_local_missing_falls_to_hash(local: dict[str, str], why: str) -> None:
    choice = pick_embedder(_settings(local_enabled=True, **local))
    assert isinstance(choice.embedder, HashEmbedder) and choice.embedder.name == "hash-v2-384"
    assert _statuses(choice) == {
        "gateway": "not configured",
        "provider": "not configured",
        "local": "failed",
        "hash": "active",
    }
    assert why in _reason(choice, "local")


def test_nothing_configured_is_hash_with_reasons(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="mempager.embedders")
    choice = pick_embedder(_settings(gateway_url="http://gw.example", hash_dim=256))
    assert choice.embedder.name == "hash-v2-256"
    assert _reason(choice, "gateway") == "MEMPAGER_GATEWAY_URL is set but MEMPAGER_GATEWAY_TOKEN is not"
    assert _reason(choice, "provider") == "MEMPAGER_PROVIDER_URL is not set"
    assert "disabled" in _reason(choice, "local")
    for kind in ("gateway", "provider", "local", "hash"):
        assert f"embedder candidate {kind}:" in caplog.text
    assert [r["kind"] for r in choice.as_report()] == ["gateway", "provider", "local", "hash"]


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (
            Reply(mutate=lambda p: {**p, "data": [{**p["data"][0], "embedding": [float("nan")] * 384}]}),
            "NonFiniteVector",
        ),
        (Reply(delay=2.0), "EmbedderTimeout"),
    ],
    ids=["nan", "slow"],
)
def test_a_failing_probe_skips_the_gateway(hash_server: EmbeddingServer, reply: Reply, why: str) -> None:
    hash_server.script(reply)
    choice = pick_embedder(_settings(gateway_url=hash_server.url, gateway_token=TOKEN, probe_timeout=0.3))
    assert _statuses(choice)["gateway"] == "failed" and why in _reason(choice, "gateway")
    assert isinstance(choice.embedder, HashEmbedder)


def test_gateway_of_the_wrong_dimension_is_skipped(hash_server: EmbeddingServer) -> None:
    choice = pick_embedder(_settings(gateway_url=hash_server.url, gateway_token=TOKEN, gateway_dim=768))
    assert "DimensionMismatch" in _reason(choice, "gateway") and isinstance(choice.embedder, HashEmbedder)


def test_force_hash_skips_everything_else(hash_server: EmbeddingServer) -> None:
    choice = pick_embedder(_settings(gateway_url=hash_server.url, gateway_token=TOKEN, force="hash"))
    assert isinstance(choice.embedder, HashEmbedder) and hash_server.count() == 0
    assert _reason(choice, "gateway") == "force='hash'"


def test_force_gateway_uses_it(hash_server: EmbeddingServer) -> None:
    choice = pick_embedder(_settings(gateway_url=hash_server.url, gateway_token=TOKEN, force="gateway"))
    assert isinstance(choice.embedder, HttpEmbedder)


def test_a_forced_embedder_that_fails_its_probe_is_chosen_down_not_replaced(
    closed_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mempager.embedders")
    choice = pick_embedder(
        _settings(provider_url=f"http://127.0.0.1:{closed_port}", provider_model=MODEL, force="provider")
    )
    down = choice.embedder
    assert isinstance(down, DownEmbedder) and choice.down and down.recoverable
    assert down.name == f"http:{MODEL}@127.0.0.1"  # its own name: nothing is recorded under another model
    assert _statuses(choice) == {"gateway": "skipped", "provider": "down", "local": "skipped", "hash": "skipped"}
    reason = _reason(choice, "provider")
    assert "EmbedderConnectionError" in reason and "lexical and salience lanes" in reason
    assert "provider: down" in caplog.text and "(down)" in choice.summary()
    with pytest.raises(EmbedderUnavailable, match="width is not known"):
        down.dim  # noqa: B018 - no configured width, and the server is not asked again
    with pytest.raises(EmbedderError, match="Connection refused"):
        down.embed(["still down"])
    with pytest.raises(InvalidInput, match="not one string"):
        down.embed("a bare string")


def test_a_forced_gateway_that_was_down_at_open_recovers(hash_server: EmbeddingServer) -> None:
    hash_server.script(Reply(status=503))  # the boot probe fails; then the server is healthy
    choice = pick_embedder(_settings(gateway_url=hash_server.url, gateway_token=TOKEN, force="gateway"))
    down = choice.embedder
    assert isinstance(down, DownEmbedder) and "EmbedderServerError" in _reason(choice, "gateway")
    assert not down.answered
    vectors = down.embed(["the server is back"], role="query")
    assert vectors.shape == (1, 384) and np.isfinite(vectors).all() and down.answered and down.dim == 384
    np.testing.assert_allclose(vectors, HashEmbedder(384).embed(["the server is back"]), atol=1e-6)
    assert hash_server.requests[-1].headers["x-mempager-actor"] == "neo"


def test_a_forced_gateway_down_at_open_keeps_its_configured_width(closed_port: int) -> None:
    choice = pick_embedder(
        _settings(gateway_url=f"http://127.0.0.1:{closed_port}", gateway_token=TOKEN, gateway_dim=384, force="gateway")
    )
    assert choice.down and choice.embedder.dim == 384


def test_a_forced_embedder_that_is_not_configured_is_loud() -> None:
    with pytest.raises(EmbedderUnavailable, match="forced embedder 'gateway' is not configured"):
        pick_embedder(_settings(force="gateway"))


def test_a_forced_local_model_whose_package_is_missing_is_down_for_good(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # what `import` sees when it is missing
    # torch named: an ONNX export made earlier in the session would serve without sentence-transformers
    choice = pick_embedder(_settings(force="local", local_enabled=True, local_backend="torch"))
    down = choice.embedder
    assert isinstance(down, DownEmbedder) and not down.recoverable
    assert down.name == "st:all-MiniLM-L6-v2"
    reason = _reason(choice, "local")
    assert "MissingExtra" in reason and "mempager[local]" in reason and "cannot recover" in reason
    with pytest.raises(EmbedderUnavailable, match="MissingExtra.*mempager\\[local\\]"):
        down.embed(["anything"])
    with pytest.raises(EmbedderUnavailable, match="width is not known"):
        down.dim  # noqa: B018


@pytest.mark.slow
def test_force_local_with_a_bad_path_is_down(tmp_path: Path) -> None:
    choice = pick_embedder(_settings(force="local", local_enabled=True, local_model=str(tmp_path / "missing")))
    assert isinstance(choice.embedder, DownEmbedder) and choice.embedder.name == "st:missing"
    assert _statuses(choice)["local"] == "down" and "ModelNotFound" in _reason(choice, "local")
    with pytest.raises(EmbedderUnavailable, match="ModelNotFound"):
        choice.embedder.embed(["anything"])
