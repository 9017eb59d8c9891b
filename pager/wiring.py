"""How a ``Pager``'s collaborators are built: each gets only the store, lanes and config it needs.

``Pager.__init__`` opens the lanes, then calls ``collaborators`` and keeps what it returns as its
public attributes (``p.retriever``, ``p.writer``, ...). Kept out of ``core.py`` so the facade holds
the public API and the lifecycle, and a newcomer sees the whole graph of collaborators in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from mempager.config import PagerConfig
from mempager.consolidation.crystal import Crystals, matched_labels
from mempager.consolidation.wrap import Consolidator
from mempager.lanes.retrieval import Retriever
from mempager.maintenance.erasure import Eraser
from mempager.maintenance.migration import ModelMigration, resolve_active
from mempager.maintenance.workers import EmbedWorkers
from mempager.paging.assemble import PageAssembler
from mempager.paging.spores import Spores
from mempager.paging.tiers import Tiers
from mempager.procedural.procedures import Procedures
from mempager.procedural.review import ReviewQueue
from mempager.protocols import LexicalLaneLike, SemanticLaneLike, Store
from mempager.types import PutResult
from mempager.writing.build import MemoryBuilder
from mempager.writing.edits import Editor
from mempager.writing.gate import EncodingGate
from mempager.writing.writeback import Writer


@dataclass(frozen=True, slots=True)
class Collaborators:
    workers: EmbedWorkers
    retriever: Retriever
    review_queue: ReviewQueue
    procedures: Procedures
    writer: Writer
    assembler: PageAssembler
    eraser: Eraser
    editor: Editor
    migration: ModelMigration
    consolidation: Consolidator
    build: MemoryBuilder
    tiers: Tiers


def collaborators(
    store: Store,
    actor: str,
    config: PagerConfig,
    *,
    semantic: SemanticLaneLike,
    lexical: LexicalLaneLike,
    clock: Callable[[], datetime],
    after_write: Callable[[Sequence[PutResult]], None],
) -> Collaborators:
    # Only the store's active model is embedded: a pager of another model reads, never rewrites.
    active = resolve_active(store, actor, semantic.model, adopt=config.adopt_embedder)
    workers = EmbedWorkers(
        semantic,
        workers=config.embed_workers if active == semantic.model else 0,
        batch_size=config.embed_batch_size,
        max_attempts=config.embed_max_attempts,
        backoff=config.embed_backoff_seconds,
        max_backoff=config.embed_max_backoff_seconds,
    )
    build = MemoryBuilder(actor, config)
    retriever = Retriever(store, actor, config, clock=clock, semantic=semantic, lexical=lexical)
    review = ReviewQueue(store, actor, config, after_write=after_write)
    procedures = Procedures(
        store,
        actor,
        config,
        clock=clock,
        embedder=lambda: semantic.embedder,  # read at call time: a model switch swaps the lane's embedder
        build=build,
        review=review,
        after_write=after_write,
    )
    writer = Writer(
        store,
        actor,
        config,
        build=build,
        gate=EncodingGate(store, actor, config),
        after_write=after_write,
        feedback=procedures.feedback,
    )
    eraser = Eraser(
        store,
        actor,
        config,
        semantic=semantic,
        lexical=lexical,
        retriever=retriever,
        drop_caches=procedures.drop_caches,
    )
    consolidation = Consolidator(store, actor, config, clock, retriever.associations.invalidate)
    # crystals and spores delete under the Eraser's mark: their bytes leave the files in its pass
    crystals = Crystals(
        store,
        actor,
        consolidation=consolidation,
        clock=clock,
        graph=retriever.associations.graph,
        erasing=eraser.rewriting,
    )
    spores = Spores(store, actor, config, clock=clock, erasing=eraser.rewriting)
    tiers = Tiers(
        store,
        actor,
        crystals=crystals,
        spores=spores,
        review=review,
        matched=lambda query: matched_labels(retriever.retrieve(query)),
        erase_now=eraser.erase_now,
    )
    return Collaborators(
        workers=workers,
        retriever=retriever,
        review_queue=review,
        procedures=procedures,
        writer=writer,
        assembler=PageAssembler(store, actor, config, retriever=retriever, procedures=procedures, tiers=tiers),
        eraser=eraser,
        editor=Editor(
            store, actor, build=build, retriever=retriever, notify=workers.notify, rewriting=eraser.rewriting
        ),
        migration=ModelMigration(store, actor, semantic=semantic, workers=workers, worker_count=config.embed_workers),
        consolidation=consolidation,
        build=build,
        tiers=tiers,
    )
