"""EmbedderSettings: environment read at one edge, validated, secrets kept out of its repr."""

from __future__ import annotations

import pytest

from mempager.embedders import EmbedderSettings
from mempager.errors import ConfigError

ENV = {
    "MEMPAGER_GATEWAY_URL": "https://gw.example",
    "MEMPAGER_GATEWAY_TOKEN": "gw-secret-123",
    "MEMPAGER_GATEWAY_MODEL": "text-embedding-3-small",
    "MEMPAGER_GATEWAY_DIM": "1536",
    "MEMPAGER_PROVIDER_URL": "https://api.example/v1",
    "MEMPAGER_PROVIDER_API_KEY": "sk-provider-456",
    "MEMPAGER_PROVIDER_MODEL": "nomic-embed",
    "MEMPAGER_LOCAL_MODEL": "/models/bge-small",
    "MEMPAGER_EMBED_PROBE_TIMEOUT": "2.5",
    "MEMPAGER_EMBED_MAX_ATTEMPTS": "5",
}


def test_from_env_reads_every_variable() -> None:
    s = EmbedderSettings.from_env(ENV, actor="neo", force="provider", hash_dim=256)
    assert (s.gateway_url, s.gateway_token, s.gateway_model, s.gateway_dim) == (
        "https://gw.example",
        "gw-secret-123",
        "text-embedding-3-small",
        1536,
    )
    assert (s.provider_url, s.provider_api_key, s.provider_model) == (
        "https://api.example/v1",
        "sk-provider-456",
        "nomic-embed",
    )
    assert s.local_model == "/models/bge-small" and s.local_enabled
    assert (s.probe_timeout, s.max_attempts, s.force, s.hash_dim, s.actor) == (2.5, 5, "provider", 256, "neo")


def test_secrets_stay_out_of_repr() -> None:
    s = EmbedderSettings.from_env(ENV, actor="neo")
    for text in (repr(s), str(s)):
        assert "gw-secret-123" not in text and "sk-provider-456" not in text
        assert "gw.example" in text  # the rest is still there to debug with


def test_empty_values_count_as_unset_and_defaults_apply() -> None:
    s = EmbedderSettings.from_env({"MEMPAGER_GATEWAY_URL": "  ", "MEMPAGER_GATEWAY_MODEL": ""}, actor="neo")
    assert s.gateway_url is None and s.gateway_model == "all-MiniLM-L6-v2"
    assert s.local_enabled and s.local_model is None and s.force == "auto"


def test_local_can_be_switched_off() -> None:
    s = EmbedderSettings.from_env({"MEMPAGER_LOCAL_MODEL": "off"}, actor="neo")
    assert not s.local_enabled and s.local_model is None


def test_overrides_win() -> None:
    s = EmbedderSettings.from_env(ENV, actor="neo", max_attempts=1, local_enabled=False)
    assert s.max_attempts == 1 and not s.local_enabled


@pytest.mark.parametrize(
    ("env", "quoted"),
    [
        ({"MEMPAGER_GATEWAY_DIM": "big"}, "'big'"),
        ({"MEMPAGER_EMBED_PROBE_TIMEOUT": "soon"}, "'soon'"),
        ({"MEMPAGER_EMBED_PROBE_TIMEOUT": "-1"}, "-1"),
        ({"MEMPAGER_EMBED_READ_TIMEOUT": "inf"}, "inf"),
        ({"MEMPAGER_PROVIDER_DIM": "0"}, "0"),
    ],
)
def test_bad_values_are_config_errors_quoting_the_value(env: dict[str, str], quoted: str) -> None:
    with pytest.raises(ConfigError, match=quoted):
        EmbedderSettings.from_env(env, actor="neo")


def test_bad_force_and_hash_dim() -> None:
    with pytest.raises(ConfigError, match="'fastest'"):
        EmbedderSettings.from_env({}, actor="neo", force="fastest")
    with pytest.raises(ConfigError, match="hash_dim"):
        EmbedderSettings(actor="neo", hash_dim=4)
