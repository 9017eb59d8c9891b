"""``Pager.stats``: what the pager and its store hold, embedding progress and lag, erasure state."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any


def pager_stats(p: Any) -> dict[str, Any]:
    """``p`` is the ``Pager`` (typed loosely: core imports this module, not the reverse)."""
    pending = p.store.pending_stats(p.actor, p.semantic.model)
    lag = None
    if pending.oldest_created_at is not None:
        lag = (datetime.now(timezone.utc) - pending.oldest_created_at).total_seconds()
    counts = p.store.counts(p.actor)
    return {
        "store": p.store.location,
        "actor": p.actor,
        "memories": sum(counts.values()),
        "by_type": counts,
        "embedder": p.semantic.model,
        "active_model": p.migration.active,
        "embedding": "off: reading with another model than the active one"
        if p.migration.reading_only
        else ("on" if p.workers.threads else "off in this process (embed_workers=0)"),
        "embedder_candidates": p.embedder_report,
        "vectors_indexed": len(p.semantic),
        "pending_embeddings": pending.count,
        "failing_embeddings": pending.failing,
        "embedding_lag_seconds": lag,
        "last_embed_error": p.workers.last_error,
        "vector_models": p.store.vector_models(p.actor),
        "patterns_by_stage": p.pattern_stages(),
        "erasure": p.eraser.queue.status(),
    }
