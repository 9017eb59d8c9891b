"""What the LLM-step tests compare before and after a failure: the store's content, in full."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mempager


def snapshot(p: mempager.Pager, path: Path) -> tuple[Any, ...]:
    """The exported rows (every field of every memory), the audit chain, the review queue, the continuity."""
    p.export(path)
    rows = path.read_text(encoding="utf-8")
    audit = [(e.seq, e.op, e.uri, e.content_hash, e.hash) for e in p.audit(limit=1_000_000)]
    review = [(r.id, r.kind, r.status, dict(r.payload)) for r in p.review(None)]
    return rows, audit, review, p.continuity()
