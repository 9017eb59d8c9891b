"""``EmbedderSettings``: everything the selection chain needs, read from the environment at one edge.

Variables (all optional; an empty value counts as unset):

    MEMPAGER_GATEWAY_URL  MEMPAGER_GATEWAY_TOKEN  MEMPAGER_GATEWAY_MODEL  MEMPAGER_GATEWAY_DIM
    MEMPAGER_PROVIDER_URL MEMPAGER_PROVIDER_API_KEY MEMPAGER_PROVIDER_MODEL MEMPAGER_PROVIDER_DIM
    MEMPAGER_LOCAL_MODEL  (a directory or cached repo id; "off" disables the local model)
    MEMPAGER_LOCAL_MODEL_SHA256
    MEMPAGER_LOCAL_BACKEND  (auto | torch | onnx | onnx-int8; see ``embedders.local_backend``)
    MEMPAGER_ONNX_CACHE_DIR  (where ONNX exports of the local model are kept)
    MEMPAGER_QUERY_CACHE_SIZE  (recent query vectors kept per embedder; 0 disables)
    MEMPAGER_EMBED_PROBE_TIMEOUT  MEMPAGER_EMBED_LOCAL_PROBE_TIMEOUT
    MEMPAGER_EMBED_CONNECT_TIMEOUT  MEMPAGER_EMBED_READ_TIMEOUT  MEMPAGER_EMBED_MAX_ATTEMPTS

Secrets are ``repr=False`` fields: the settings can be logged or shown in a report safely.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeVar, cast

from mempager.errors import ConfigError

Force = Literal["auto", "gateway", "provider", "local", "hash"]
FORCE_CHOICES: tuple[Force, ...] = ("auto", "gateway", "provider", "local", "hash")
# what serves the local model (``embedders.local_backend``; kept here so settings import nothing)
LocalBackend = Literal["auto", "torch", "onnx", "onnx-int8"]
LOCAL_BACKENDS: tuple[LocalBackend, ...] = ("auto", "torch", "onnx", "onnx-int8")
LOCAL_OFF = frozenset({"off", "none", "0", "false", "no"})
N = TypeVar("N", int, float)


@dataclass(frozen=True, kw_only=True)
class EmbedderSettings:
    actor: str
    force: Force = "auto"
    gateway_url: str | None = None
    gateway_token: str | None = field(default=None, repr=False)
    gateway_model: str = "all-MiniLM-L6-v2"
    gateway_dim: int | None = None
    provider_url: str | None = None
    provider_api_key: str | None = field(default=None, repr=False)
    provider_model: str | None = None
    provider_dim: int | None = None
    local_enabled: bool = True
    local_model: str | None = None  # None: the packaged all-MiniLM-L6-v2
    local_sha256: str | None = None
    local_batch_size: int = 64
    local_device: str = "cpu"
    local_backend: LocalBackend = "auto"
    onnx_cache_dir: str | None = None  # None: $XDG_CACHE_HOME/mempager/onnx or ~/.cache/mempager/onnx
    # recent query vectors kept by the chosen local model (0 disables): a repeated query then
    # costs a dictionary lookup instead of a model call
    query_cache_size: int = 1024
    # build the local model on its first embed (``DeferredEmbedder``) when its name and width can
    # be read from its files; its boot probe then runs at that first embed
    defer_local: bool = False
    hash_dim: int = 384
    probe_timeout: float = 10.0  # seconds for an HTTP candidate's boot probe
    # Loading torch and the weights from a cold disk can take tens of seconds on a small machine.
    local_probe_timeout: float = 120.0
    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    max_attempts: int = 3
    http_batch_size: int = 64
    http_max_batch_bytes: int = 512_000

    def __post_init__(self) -> None:
        if self.force not in FORCE_CHOICES:
            raise ConfigError(f"force must be one of {', '.join(FORCE_CHOICES)}, got {self.force!r}")
        if not isinstance(self.actor, str):
            raise ConfigError(f"actor must be a string, got {type(self.actor).__name__}")
        if self.local_backend not in LOCAL_BACKENDS:
            raise ConfigError(f"local_backend must be one of {', '.join(LOCAL_BACKENDS)}, got {self.local_backend!r}")
        size = self.query_cache_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ConfigError(f"query_cache_size must be an integer >= 0 (0 disables the cache), got {size!r}")
        if self.hash_dim < 8:
            raise ConfigError(f"hash_dim must be an integer >= 8, got {self.hash_dim!r}")
        for name in ("gateway_dim", "provider_dim"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigError(f"{name} must be a positive integer or None, got {value!r}")
        for name in ("local_batch_size", "max_attempts", "http_batch_size", "http_max_batch_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        for name in ("probe_timeout", "local_probe_timeout", "connect_timeout", "read_timeout"):
            value = getattr(self, name)
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < math.inf
            if not ok:
                raise ConfigError(f"{name} must be a finite number of seconds > 0, got {value!r}")

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None,
        *,
        actor: str,
        force: str = "auto",
        hash_dim: int = 384,
        **overrides: Any,
    ) -> EmbedderSettings:
        """Settings from ``MEMPAGER_*`` variables (``os.environ`` when ``environ`` is None).

        ``overrides`` are field values that win over the environment.
        """
        env = os.environ if environ is None else environ

        def text(key: str) -> str | None:
            value = env.get(key, "").strip()
            return value or None

        local = text("MEMPAGER_LOCAL_MODEL")
        values: dict[str, Any] = {
            "gateway_url": text("MEMPAGER_GATEWAY_URL"),
            "gateway_token": text("MEMPAGER_GATEWAY_TOKEN"),
            "gateway_model": text("MEMPAGER_GATEWAY_MODEL") or cls.gateway_model,
            "gateway_dim": _number(text, "MEMPAGER_GATEWAY_DIM", int),
            "provider_url": text("MEMPAGER_PROVIDER_URL"),
            "provider_api_key": text("MEMPAGER_PROVIDER_API_KEY"),
            "provider_model": text("MEMPAGER_PROVIDER_MODEL"),
            "provider_dim": _number(text, "MEMPAGER_PROVIDER_DIM", int),
            "local_enabled": (local or "").lower() not in LOCAL_OFF,
            "local_model": None if (local or "").lower() in LOCAL_OFF else local,
            "local_sha256": text("MEMPAGER_LOCAL_MODEL_SHA256"),
            "local_backend": text("MEMPAGER_LOCAL_BACKEND") or cls.local_backend,
            "onnx_cache_dir": text("MEMPAGER_ONNX_CACHE_DIR"),
        }
        for key, name, kind in _NUMBERS:
            number = _number(text, key, kind)
            if number is not None:
                values[name] = number
        values.update(overrides)
        return cls(actor=actor, force=cast(Force, force), hash_dim=hash_dim, **values)

    def with_(self, **changes: Any) -> EmbedderSettings:
        return replace(self, **changes)


_NUMBERS: tuple[tuple[str, str, type[int] | type[float]], ...] = (
    ("MEMPAGER_EMBED_PROBE_TIMEOUT", "probe_timeout", float),
    ("MEMPAGER_EMBED_LOCAL_PROBE_TIMEOUT", "local_probe_timeout", float),
    ("MEMPAGER_EMBED_CONNECT_TIMEOUT", "connect_timeout", float),
    ("MEMPAGER_EMBED_READ_TIMEOUT", "read_timeout", float),
    ("MEMPAGER_EMBED_MAX_ATTEMPTS", "max_attempts", int),
    ("MEMPAGER_QUERY_CACHE_SIZE", "query_cache_size", int),
)


def _number(text: Callable[[str], str | None], key: str, kind: Callable[[str], N]) -> N | None:
    raw = text(key)
    if raw is None:
        return None
    try:
        return kind(raw)
    except ValueError as exc:
        raise ConfigError(f"{key} must be {'an integer' if kind is int else 'a number'}, got {raw!r}") from exc
