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
        "vector_index": index_health(p.semantic),
    }


def index_health(semantic: Any, sample: int = 32) -> dict[str, Any] | None:
    """The in-process HNSW graph's tombstone share and self-recall, for long-running servers (soak
    benchmark): graph decay under churn shows as a rising share and falling recall before rebuilds.
    Self-recall: the share of ``sample`` live vectors, spread over the labels, that the index's own
    search ranks first for themselves (a graph walk above ``exact_below`` live vectors, an exact
    scan below). None for an index held by a server (pgvector) or not built yet."""
    index: Any = getattr(semantic, "index", None)
    if not callable(getattr(index, "deleted_share", None)):
        return None
    with semantic.lock:  # labels and vectors read as one state: a concurrent forget cannot split them
        labels = index.labels()
        picked = labels[:: max(1, len(labels) // sample)][:sample]
        found = sum(
            bool(hit) and hit[0][0] == label
            for label, vector in zip(picked.tolist(), index.get_vectors(picked), strict=True)
            for hit in [index.search(vector, 1)]
        )
        return {
            "live": len(labels),
            "deleted_share": round(float(index.deleted_share()), 4),
            "self_recall": round(found / len(picked), 4) if len(picked) else None,
        }
