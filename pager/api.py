"""``pager.open``: the edge where configuration and the environment are read."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping
from pathlib import Path

from .audit import AuditEntry
from .config import PagerConfig
from .core import Pager
from .errors import ConfigError
from .protocols import Embedder
from .store import open_store


def _choose_embedder(config: PagerConfig, actor: str) -> tuple[Embedder, list[dict[str, str]]]:
    from embedders.hashing import HashEmbedder

    if config.embedder not in ("auto", "hash"):
        raise ConfigError(f"embedder {config.embedder!r} is not available in this build")
    embedder = HashEmbedder(dim=config.hash_dim)
    return embedder, [{"name": embedder.name, "status": "active", "reason": "deterministic fallback"}]


def open(  # noqa: A001 - the public name the design asks for
    path: str | Path,
    actor: str,
    *,
    config: PagerConfig | None = None,
    embedder: Embedder | None = None,
    environ: Mapping[str, str] | None = None,
    on_audit_event: Callable[[AuditEntry], None] | None = None,
) -> Pager:
    """Open (creating if needed) the store at ``path`` for ``actor``.

    ``embedder`` overrides the selection chain (gateway → provider → local model → hash).
    """
    if isinstance(path, str) and path.startswith(("postgres://", "postgresql://")):
        raise ConfigError("PostgreSQL stores are not available in this build; use a .duckdb path")
    cfg = config or PagerConfig.from_env(environ)
    store = open_store(path)
    try:
        if embedder is None:
            embedder, report = _choose_embedder(cfg, actor)
        else:
            report = [{"name": embedder.name, "status": "active", "reason": "passed to pager.open"}]
        return Pager(store, actor, config=cfg, embedder=embedder, embedder_report=report,
                     on_audit_event=on_audit_event)
    except builtins.BaseException:
        store.close()
        raise
