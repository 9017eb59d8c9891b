"""Adapters that turn text into vectors. Import only ``mempager.types/protocols/errors`` from here.

``import mempager.embedders`` never imports torch: ``LocalEmbedder`` imports sentence-transformers when it
is constructed. ``pick_embedder(EmbedderSettings.from_env(os.environ, actor=...))`` runs the
selection chain gateway → provider → local model → hash.

Names load on first use, so a process that only picks the local or hash embedder never imports
httpx, and one that embeds nothing imports neither (the CLI's reading commands).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what a type checker and an IDE see; at run time __getattr__ loads them
    from mempager.embedders.base import check_vectors as check_vectors
    from mempager.embedders.chain import (
        CandidateReport as CandidateReport,
    )
    from mempager.embedders.chain import (
        EmbedderChoice as EmbedderChoice,
    )
    from mempager.embedders.chain import (
        pick_embedder as pick_embedder,
    )
    from mempager.embedders.deferred import DeferredEmbedder as DeferredEmbedder
    from mempager.embedders.down import DownEmbedder as DownEmbedder
    from mempager.embedders.hashing import HashEmbedder as HashEmbedder
    from mempager.embedders.http import HttpEmbedder as HttpEmbedder
    from mempager.embedders.http import HttpOptions as HttpOptions
    from mempager.embedders.local import LocalEmbedder as LocalEmbedder
    from mempager.embedders.settings import EmbedderSettings as EmbedderSettings

_WHERE = {
    "CandidateReport": "chain",
    "DeferredEmbedder": "deferred",
    "DownEmbedder": "down",
    "EmbedderChoice": "chain",
    "EmbedderSettings": "settings",
    "HashEmbedder": "hashing",
    "HttpEmbedder": "http",
    "HttpOptions": "http",
    "LocalEmbedder": "local",
    "check_vectors": "base",
    "pick_embedder": "chain",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"mempager.embedders.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'mempager.embedders' has no attribute {name!r}")
