"""What the LLM-step tests share: a pager, a client of the scripted chat server, and the store's content in full."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mempager
from mempager import PagerConfig
from mempager.llm import ChatClient
from mempager.llm.testing import ChatServer


def open_pager(path: Path, **cfg: object) -> mempager.Pager:
    return mempager.open(path, actor="neo", config=PagerConfig(embedder="hash", embed_workers=0, **cfg))  # type: ignore[arg-type]


def scripted_llm(server: ChatServer) -> ChatClient:
    """Fast failure: a short timeout, two attempts, no real sleeping between them."""
    return ChatClient(server.url, "scripted", timeout=0.5, max_attempts=2, backoff=0.01, sleep=lambda s: None)


def snapshot(p: mempager.Pager, path: Path) -> tuple[Any, ...]:
    """The exported rows (every field of every memory), the audit chain, the review queue, the continuity."""
    p.export(path)
    rows = path.read_text(encoding="utf-8")
    audit = [(e.seq, e.op, e.uri, e.content_hash, e.hash) for e in p.audit(limit=1_000_000)]
    review = [(r.id, r.kind, r.status, dict(r.payload)) for r in p.review(None)]
    return rows, audit, review, p.continuity()
