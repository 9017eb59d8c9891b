"""``mempager.open``: the edge where configuration and the environment are read."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mempager.config import PagerConfig
from mempager.core import Pager
from mempager.hugepages import ADVICE
from mempager.protocols import Embedder
from mempager.store.duckdb import open_store
from mempager.types import AuditEntry


def _choose_embedder(
    config: PagerConfig, actor: str, environ: Mapping[str, str] | None
) -> tuple[Embedder, list[dict[str, str]]]:
    """The chain: gateway → provider → local model → hash, first configured one that probes well."""
    from mempager.embedders import EmbedderSettings, pick_embedder

    settings = EmbedderSettings.from_env(
        environ, actor=actor, force=config.embedder, hash_dim=config.hash_dim, defer_local=config.defer_model_load
    )
    choice = pick_embedder(settings)
    return choice.embedder, choice.as_report()


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
    A failing embedder never stops the store from opening: a forced one that fails at open is
    used *down* (``stats()["embedder_candidates"]`` says why), its memories stay pending, and
    retrieval falls back to the lexical and salience lanes until it answers.
    """
    with ADVICE.off():  # an open builds large arrays: pages without compaction stalls (mempager.hugepages)
        cfg = config or PagerConfig.from_env(environ)
        store: Any
        if isinstance(path, str) and path.startswith(("postgres://", "postgresql://")):
            from mempager.store.pg import open_pg_store  # the server store; needs the `postgres` extra

            store = open_pg_store(path)
        else:
            store = open_store(path)
        try:
            if embedder is None:
                embedder, report = _choose_embedder(cfg, actor, environ)
            else:
                report = [{"name": embedder.name, "status": "active", "reason": "passed to mempager.open"}]
            return Pager(
                store, actor, config=cfg, embedder=embedder, embedder_report=report, on_audit_event=on_audit_event
            )
        except builtins.BaseException:
            store.close()
            raise
