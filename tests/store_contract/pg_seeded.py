"""A PostgreSQL pager over texts already written and embedded, its workers off (the PG rank tests)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import mempager
from mempager import PagerConfig
from mempager.embedders import HashEmbedder


def seeded_pager(pg_url: str, texts: Sequence[str]) -> Any:
    """Actor "a" with ``texts`` as events, every vector stored by a first pager, then reopened
    without embedding workers so nothing but the test writes meanwhile. The caller closes it."""
    config = PagerConfig(embedder="hash")
    with mempager.open(pg_url, actor="a", config=config, embedder=HashEmbedder(64)) as p:
        p.remember_many([{"type": "event", "text": t} for t in texts])
        assert p.sync(timeout=60)
    return mempager.open(pg_url, actor="a", config=replace(config, embed_workers=0), embedder=HashEmbedder(64))
