"""Opening one actor's semantic and lexical lanes, for the Pager.

A server store (PostgreSQL) answers both lanes itself; the embedded store gets per-process
caches derived from it (an HNSW index and a BM25 index), saved beside the store file.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mempager.config import PagerConfig
from mempager.lanes.lexical import LexicalLane
from mempager.lanes.semantic import SemanticLane, slug
from mempager.protocols import Embedder, LexicalLaneLike, SemanticLaneLike, Store


def actor_index_dir(store: Store, actor: str) -> Path | None:
    """Where the embedded store keeps ``actor``'s saved indexes (every model's, and BM25's);
    None for a server store, whose lanes keep no files here."""
    if getattr(store, "native_lanes", None) is not None:
        return None
    return Path(store.location + ".index") / slug(actor)


def open_lanes(
    store: Store, actor: str, config: PagerConfig, embedder: Embedder
) -> tuple[SemanticLaneLike, LexicalLaneLike]:
    semantic: SemanticLaneLike
    lexical: LexicalLaneLike
    native = getattr(store, "native_lanes", None)
    if native is not None:  # a server store that answers both lanes itself (many processes)
        semantic, lexical = native(actor, embedder, config.context(), config.context_types)
    else:  # the embedded store: per-process caches derived from the store, saved beside it
        index_dir = Path(store.location + ".index")
        store_id = getattr(store, "store_id")  # noqa: B009 - only the embedded store has one
        semantic = SemanticLane(
            store,
            actor,
            embedder,
            index_dir,
            store_id=store_id,
            M=config.hnsw_m,
            ef_construction=config.hnsw_ef_construction,
            ef=config.hnsw_ef,
            ef_per_million=config.hnsw_ef_per_million,
            max_deleted_share=config.hnsw_max_deleted_share,
        )
        lexical = LexicalLane(  # actor_index_dir
            store,
            actor,
            index_dir / slug(actor) / "lexical",
            store_id=store_id,
            context=config.context(),
            context_types=config.context_types,
        )
    # Two caches from two sets of files, and the store's in-process mirror (both lanes need it):
    # loaded side by side (file reads, checksums, DuckDB and numpy release the GIL), so opening
    # costs about the slowest of the three, not their sum. The mirror starts at once: the HNSW
    # graph's checksum pass is mostly disk time it can use.
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="mempager-open") as pool:
        mirrored = pool.submit(store.live_labels, actor) if native is None else None
        lexical_opened = pool.submit(lexical.open)
        semantic.open()
        lexical_opened.result()
        if mirrored is not None:
            mirrored.result()
    release = getattr(store, "release_cache", None)  # the embedded store: DuckDB's read cache
    if release is not None:
        release()
    return semantic, lexical
