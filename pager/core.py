"""The Pager: pins, page-faults, writes back. It owns no data; the store does.

``Pager`` is a facade over explicit collaborators, each built with only the store, lanes and
config it needs (``wiring.collaborators`` builds them all):

    Writer          writing/writeback.py      remember*, record_outcome, identity/goal/rules/constraints
    Editor          writing/edits.py          update
    Retriever       lanes/retrieval.py        retrieve, recall, get
    PageAssembler   paging/assemble.py        pinned, page
    Procedures      procedural/procedures.py  patterns, ranking, feedback, sweep
    ReviewQueue     procedural/review.py      review, decide
    Eraser          maintenance/erasure.py    forget, erase_now (and its background pass)
    ModelMigration  maintenance/migration.py  reembed, finalize_migration
    Transfer        maintenance/transfer.py   export, import_memories, backup
    EmbedWorkers    maintenance/workers.py    background embedding
    Consolidator    consolidation/wrap.py     prepare_wrap, save_continuity, continuity
    Tiers           paging/tiers.py           crystals (consolidation/crystal.py), spores (paging/spores.py)
    LLM steps       consolidation/llm_steps   merge, replay, reflect, distill, auto_wrap (built per call)

The public methods stay here and delegate; this module also owns the lifecycle (open the
lanes, listen to the store, close and save) and ``stats``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mempager.clock import Clock
from mempager.config import PagerConfig
from mempager.consolidation import llm_steps
from mempager.consolidation.report import SaveResult, Wrap
from mempager.consolidation.schema import SectionSchema
from mempager.lanes.filters import where_of
from mempager.lanes.opening import open_lanes
from mempager.maintenance.audit_log import for_actor, history
from mempager.paging.assemble import page_arguments
from mempager.paging.page import Page
from mempager.paging.pinned import PinnedBlock
from mempager.paging.tiers import SCHEMES
from mempager.patterns import Pattern, PatternSpec
from mempager.protocols import Embedder, Store
from mempager.shutdown import closing, track
from mempager.status import pager_stats
from mempager.store.base import translate
from mempager.store.journal import ReviewItem
from mempager.types import AuditEntry, AuditReport, Memory, MemoryType, PutResult, Snippet
from mempager.validate import check_actor, parse_since
from mempager.wiring import collaborators

if TYPE_CHECKING:
    from mempager.consolidation.auto_wrap import AutoWrapResult
    from mempager.consolidation.crystal import CrystalHit
    from mempager.consolidation.distill import DistillResult
    from mempager.consolidation.merge import MergeResult
    from mempager.consolidation.reflection import ReflectResult
    from mempager.consolidation.replay import ReplayResult
    from mempager.maintenance.transfer import ImportReport, Target, Transfer
    from mempager.store.tier_types import Crystal, Spore

log = logging.getLogger("mempager")


class Pager:
    def __init__(
        self,
        store: Store,
        actor: str,
        *,
        config: PagerConfig,
        embedder: Embedder,
        embedder_report: Sequence[dict[str, str]] = (),
        owns_store: bool = True,
        on_audit_event: Callable[[AuditEntry], None] | None = None,
    ) -> None:
        self.store = store
        self.actor = actor = check_actor(actor)
        self.config = config
        self.embedder_report = list(embedder_report)
        self._owns_store = owns_store
        self._clock = Clock()
        self.semantic, self.lexical = open_lanes(store, actor, config, embedder)
        store.add_change_listener(actor, self._on_change)
        self._closed = False
        # registered before anything below writes, so the callback sees every entry of this open
        self._audit_listener = None if on_audit_event is None else for_actor(actor, on_audit_event)
        if self._audit_listener is not None:
            store.add_audit_listener(self._audit_listener)
        c = collaborators(  # wiring.py: each collaborator gets only what it needs
            store,
            actor,
            config,
            semantic=self.semantic,
            lexical=self.lexical,
            clock=self._clock,
            after_write=self._after_write,
        )
        self.workers, self.retriever, self.review_queue = c.workers, c.retriever, c.review_queue
        self.procedures, self.writer, self.assembler = c.procedures, c.writer, c.assembler
        self.eraser, self.editor, self.migration = c.eraser, c.editor, c.migration
        self.consolidation, self._build, self.tiers = c.consolidation, c.build, c.tiers
        try:  # killed between a forget and its erasure: finish the erasure before serving
            self.eraser.recover()
        except BaseException:
            self._release()
            raise
        track(self)  # closed at interpreter exit if still open then, SIGTERM included (shutdown.py)

    # -- lifecycle ----------------------------------------------------------------------------
    def __enter__(self) -> Pager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the workers, erase what hard forgets left in files, save the indexes, close."""
        if self._closed:
            return
        self._closed = True
        with closing(self):  # no longer closed at exit; a SIGTERM in the main thread waits for the end
            self.workers.stop()
            try:  # a failed pass is raised after the store is let go of; its mark makes the next open erase
                self.eraser.close()
            finally:
                self._release()

    def _release(self) -> None:
        """Let go of the store: listeners off, index caches saved, the store closed if ours."""
        self.workers.stop()
        self.retriever.close()
        self.eraser.queue.stop()
        self.store.remove_change_listener(self.actor, self._on_change)
        if self._audit_listener is not None:
            self.store.remove_audit_listener(self._audit_listener)
        failed: OSError | None = None
        try:  # the indexes are caches: a failed save is rebuilt or caught up on the next open
            self.semantic.save()
            self.lexical.save()
        except OSError as exc:
            failed = exc
            log.error("could not save the index caches of %s (they will be rebuilt on open): %s", self.actor, exc)
        finally:
            if self._owns_store:
                self.store.close()
        if failed is not None:
            raise translate(failed, self.store.location) from failed

    def sync(self, timeout: float | None = None) -> bool:
        """Wait until every memory has an active-model vector (False on timeout; at once if this embeds nothing)."""
        return self.workers.wait_until_done(self._pending, timeout)

    @property
    def clock(self) -> Callable[[], datetime]:
        """ "Now" for every collaborator (lifecycle decay, salience recency); assignable, e.g. to freeze time."""
        return self._clock

    @clock.setter
    def clock(self, source: Callable[[], datetime]) -> None:
        self._clock.source = source

    @property
    def pattern_ranking(self) -> str:
        """How pages rank procedures: "confidence" or "thompson" (per pager)."""
        return self.procedures.ranking

    @pattern_ranking.setter
    def pattern_ranking(self, value: str) -> None:
        self.procedures.ranking = value

    @property
    def pattern_seed(self) -> int | None:
        """The seed of the Thompson draws when a call passes none (None: fresh entropy)."""
        return self.procedures.seed

    @pattern_seed.setter
    def pattern_seed(self, value: int | None) -> None:
        self.procedures.seed = value

    def _pending(self) -> int:
        hint = getattr(self.semantic, "pending_hint", None)  # the embedded lane knows without SQL
        return int(hint()) if hint is not None else self.store.pending_stats(self.actor, self.semantic.model).count

    def _after_write(self, results: Sequence[PutResult]) -> None:
        if results:
            self.workers.notify()

    def _on_change(self, upserted: Sequence[Memory], removed: Sequence[int]) -> None:
        """Every committed change to this actor's memories, whoever made it (store write lock held)."""
        self.lexical.apply(upserted, removed)
        self.semantic.track(upserted, removed)

    # -- writes (Writer, Editor) -----------------------------------------------------------------
    def remember(self, type: str | MemoryType, text: str, **fields: Any) -> str:
        """Store any memory type; returns its uri (an existing uri when deduplicated)."""
        return self.writer.remember(type, text, **fields)

    def remember_fact(self, text: str, **fields: Any) -> str:
        return self.writer.remember_fact(text, **fields)

    def remember_user_fact(self, text: str, **fields: Any) -> str:
        """A durable fact about the user: pinned in the profile section, deduped by statement."""
        return self.writer.remember_user_fact(text, **fields)

    def remember_many(self, items: Sequence[Mapping[str, Any]]) -> list[str]:
        """Batch write; every item is validated before anything is stored."""
        return self.writer.remember_many(items)

    def record_outcome(
        self,
        summary: str,
        outcome: str,
        intent_ref: str | None = None,
        *,
        turn: str | None = None,
        used: Sequence[str] | None = None,
        **fields: Any,
    ) -> str:
        """An episodic outcome; with ``turn``, success/failure also feeds back to that turn's patterns."""
        return self.writer.record_outcome(summary, outcome, intent_ref, turn=turn, used=used, **fields)

    def set_identity(self, text: str) -> str:
        return self.writer.set_identity(text)

    def set_goal(self, text: str) -> str:
        return self.writer.set_goal(text)

    def add_rule(self, text: str) -> str:
        return self.writer.add_rule(text)

    def add_constraint(self, text: str, strength: str = "hard") -> str:
        return self.writer.add_constraint(text, strength)

    def update(self, uri: str, **changes: Any) -> Memory:
        """Correct a memory in place: text, tags, importance, confidence, metadata, valid_until."""
        return self.editor.update(uri, **changes)

    # -- reads (Retriever, PageAssembler) -------------------------------------------------------
    def retrieve(
        self,
        query: str,
        k: int | None = None,
        *,
        budget: int | None = None,
        tags: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> list[Snippet]:
        """Page fault: the few memories this turn needs, fused from every lane (only those with
        every one of ``tags`` and exactly the ``metadata`` values, when given)."""
        return self.retriever.retrieve(query, k, budget=budget, where=where_of(tags, metadata))

    def recall(
        self,
        query: str | None = None,
        types: Sequence[str | MemoryType] | None = None,
        since: Any = None,
        until: Any = None,
        limit: int = 20,
        offset: int = 0,
        *,
        source: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> list[Memory]:
        """Deliberate look-up: newest first, or every match of the lexical query syntax, best first."""
        return self.retriever.recall(
            query, types, since, until, limit, offset, source=source, tags=tags, metadata=metadata
        )

    def get(self, uri: str) -> Memory:
        return self.retriever.get(uri)

    def pinned(self, goal: str | None = None) -> str:
        return self.assembler.pinned_block(goal).text

    def pinned_block(self, goal: str | None = None, *, budget: int | None = None) -> PinnedBlock:
        """The pinned block within ``budget`` tokens (default ``pinned_budget_tokens``)."""
        return self.assembler.pinned_block(goal, budget=budget)

    def page(
        self,
        query: str | None = None,
        _old_query: str | None = None,
        *,
        goal: str | None = None,
        turn: str | None = None,
        tags: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Page:
        """The whole per-turn context for ``query``: pinned block, procedures for ``goal``, cued spores and
        crystals, retrieved memories (``tags``/``metadata`` filter those as in ``retrieve``). With ``turn``,
        what was injected is recorded for feedback. The old form ``page(goal, query)`` warns."""
        query, goal = page_arguments(query, _old_query, goal)
        return self.assembler.page(goal, query, turn=turn, where=where_of(tags, metadata))

    # -- procedural (Procedures, ReviewQueue) ---------------------------------------------------
    def write_pattern(
        self, spec: PatternSpec, strength: float = 0.5, coverage: int = 1, derived_from: Sequence[str] = ()
    ) -> str:
        return self.procedures.write_pattern(spec, strength, coverage, derived_from)

    def reinforce_pattern(self, spec: PatternSpec, derived_from: Sequence[str] = ()) -> str:
        """Another success: coverage +1, confidence up, strength nudged up."""
        return self.procedures.reinforce_pattern(spec, derived_from)

    def learn_rule(self, text: str, derived_from: Sequence[str] = ()) -> str:
        """A rule that came from experience: a one-step pattern (``add_rule`` is for the user's rules)."""
        return self.procedures.learn_rule(text, derived_from)

    def patterns(self, include_inactive: bool = False) -> list[Pattern]:
        return self.procedures.patterns(include_inactive)

    def pattern_stages(self) -> dict[str, int]:
        return self.procedures.pattern_stages()

    def procedural(
        self, goal: str, *, rank: str | None = None, seed: int | None = None, include_menu: bool = False
    ) -> list[Pattern]:
        """Injectable patterns matching ``goal``, best first."""
        return self.procedures.procedural(goal, rank=rank, seed=seed, include_menu=include_menu)

    def anti_patterns(self, goal: str) -> list[Pattern]:
        return self.procedures.anti_patterns(goal)

    def recall_pattern(self, label: str) -> Pattern:
        """One pattern in full by label; a typo resolves to the closest label, with a warning."""
        return self.procedures.recall_pattern(label)

    def feedback(self, turn: str, outcome: str, *, used: Sequence[str] | None = None) -> int:
        """Apply success/failure to the patterns the page injected for ``turn``."""
        return self.procedures.feedback(turn, outcome, used=used)

    def sweep(self) -> dict[str, int]:
        """Decay, promote/demote one level, flag removal candidates, propose inversions."""
        return self.procedures.sweep()

    def review(self, status: str | None = "pending") -> list[ReviewItem]:
        return self.review_queue.review(status)

    def decide(self, review_id: str, accept: bool) -> str | None:
        """Accept or reject a queued item; returns the uri written when accepted."""
        return self.tiers.decide(review_id, accept)  # a crystal proposal, else ReviewQueue.decide

    # -- transfer (Transfer) ----------------------------------------------------------------------
    @functools.cached_property
    def transfer(self) -> Transfer:
        """Built on first use: export, import and backup are rare, and their module is not light."""
        from mempager.maintenance.transfer import Transfer

        return Transfer(self.store, self.actor, build=self._build, semantic=self.semantic, clock=self._clock)

    def export(self, target: Target, *, vectors: bool = False) -> int:
        """This actor's memories as ``mempager.export.v1`` JSON lines (a path or a stream); the count."""
        return self.transfer.export(target, vectors=vectors)

    def import_memories(
        self, source: Target, *, keep_actor: bool = False, progress: Callable[[int, int], None] | None = None
    ) -> ImportReport:
        """Write an export's memories here (idempotent: what the store holds is skipped)."""
        return self.transfer.import_memories(source, keep_actor=keep_actor, progress=progress)

    def backup(self, dest: str | Path) -> Path:
        """A consistent copy of the store file at ``dest``, taken while it is in use (DuckDB only)."""
        return self.transfer.backup(dest)

    # -- maintenance (Eraser, ModelMigration) ---------------------------------------------------
    def forget(
        self,
        uri: str | None = None,
        *,
        actor: str | None = None,
        where: Mapping[str, Any] | None = None,
        hard: bool = True,
        wait: bool = False,
    ) -> int:
        """Forget one memory (or ``crystal://`` / ``spore://`` item) by uri, or every memory of ``actor``
        matching ``where`` (empty: its crystals and spores too): out of every lane, page and result at once.
        Hard by default: the bytes leave every file of the store within ``erase_delay_seconds`` (plus the
        pass), at ``close()``, or before returning with ``wait=True``."""
        if uri is not None and uri.startswith(SCHEMES):
            return self.tiers.forget(uri, wait=wait)
        gone = self.eraser.forget(uri, actor=actor, where=where, hard=hard, wait=wait)
        return gone + (self.tiers.forget_all(wait=wait) if uri is None and not where else 0)

    def erase_now(self) -> None:
        """Erase every forgotten memory's bytes from every file of the store before returning."""
        self.eraser.erase_now()

    def compact(self) -> None:
        """Erase deleted memories' bytes (soft forgets' too): ``erase_now``."""
        self.eraser.erase_now()

    def reembed(self, progress: Callable[[int, int], None] | None = None, timeout: float | None = None) -> bool:
        """Wait while the workers give every memory a vector of the active model."""
        return self.migration.reembed(progress, timeout)

    def use_model(self) -> dict[str, object]:
        """Make this pager's model the actor's active one; re-embed all (old vectors stay till finalize_migration)."""
        return self.migration.use_model()

    def finalize_migration(self) -> dict[str, int]:
        """Drop other models' vectors (and their saved indexes) once the active model covers all."""
        return self.migration.finalize_migration()

    def audit(self, since: Any = None, limit: int = 1000) -> list[AuditEntry]:
        """This actor's audit entries, oldest first (``since``: a time, or "7d" / "12h" / "30m")."""
        return self.store.audit_entries(self.actor, parse_since(since) if since is not None else None, limit)

    def history(self, uri: str) -> list[AuditEntry]:
        """Every audit event of one memory, crystal or spore, oldest first (maintenance/audit_log.py)."""
        return history(self.store, self.actor, uri)

    def verify_audit(self) -> AuditReport:
        return self.store.verify_audit()

    def stats(self) -> dict[str, Any]:
        """Counts, embedding progress and lag, vector models, pattern stages, erasure (pager/status.py)."""
        return pager_stats(self)

    # -- consolidation (Consolidator) ------------------------------------------------------------
    def prepare_wrap(self, *, session_id: str | None = None) -> Wrap:
        """Open this actor's session wrap (or the open one): its frozen episodes and the LLM's ``package``."""
        return self.consolidation.prepare_wrap(session_id=session_id)

    def save_continuity(
        self, text: str, *, affect: object = None, allow_shrink: object = False, session_id: str | None = None
    ) -> SaveResult:
        """Validate the LLM's compressed ``text`` and save it as the continuity (consolidation/wrap.py)."""
        return self.consolidation.save_continuity(text, affect=affect, allow_shrink=allow_shrink, session_id=session_id)

    def continuity(self) -> str:
        """The current continuity document ("" before the first wrap); it is pinned in every page."""
        return self.consolidation.continuity()

    def set_section_schema(self, schema: SectionSchema | str) -> None:
        """The continuity's sections: a ``SectionSchema`` or a preset ("default", "partnership")."""
        self.consolidation.set_section_schema(schema)

    # -- LLM consolidation (consolidation/llm_steps.py; each step optional, bounded, skipped on failure) --------
    def merge(
        self, type: str | MemoryType | None = None, scope: str | None = None, *, dry_run: bool = False, llm: Any = None
    ) -> MergeResult:
        """LLM merge of restatements, duplicates and superseded entries where a type/scope holds more than
        ``merge_threshold``; originals are superseded (never deleted), the merged memory derived_from them."""
        return llm_steps.merger(self, llm).merge(type=type, scope=scope, dry_run=dry_run)

    def replay(self, events: Sequence[object], *, force: bool = False, llm: object = None) -> ReplayResult:
        """Sleep replay of a session's steps (seed 000 heuristics) into rules and lessons, through the gate."""
        return llm_steps.replayer(self, llm).replay(events, force=force)

    def reflect(
        self, transcript: object, *, status: str | None = None, tags: Sequence[str] = (), llm: object = None
    ) -> ReflectResult:
        """A finished task's transcript as a diary entry (seed 002 reflection)."""
        return llm_steps.reflector(self, llm).reflect(transcript, status=status, tags=tags)

    def distill(self, *, llm: object = None) -> DistillResult:
        """Learnings recurring across diary entries become nascent patterns waiting in the review queue."""
        return llm_steps.distiller(self, llm).distill()

    def auto_wrap(
        self, *, session_id: str | None = None, affect: object = None, allow_shrink: object = False, llm: object = None
    ) -> AutoWrapResult:
        """prepare_wrap -> the configured LLM -> save_continuity; the immune system's verdicts unchanged."""
        return llm_steps.auto_wrapper(self, llm).auto_wrap(
            session_id=session_id, affect=affect, allow_shrink=allow_shrink
        )

    # -- the crystallized tier and spores (Tiers: consolidation/crystal.py, paging/spores.py) -----------
    def spore(self, text: str, cue: str | None = None, due: object = None) -> Spore:
        """An intention: shown in a page while open, when ``due`` (a time or "2h"/"3d") comes or ``cue`` matches."""
        return self.tiers.spores.add(text, cue, due)

    def spores(self, status: str | None = "open") -> list[Spore]:
        """Open spores (default), ``"done"`` or ``"all"``, oldest first."""
        return self.tiers.spores.find(status)

    def complete_spore(self, spore_id: str) -> Spore:
        """Done: out of pages now, deleted ``spore_retention_days`` later."""
        return self.tiers.spores.complete(spore_id)

    def drop_spore(self, spore_id: str) -> Spore:
        """Delete a spore now (its bytes are erased like a hard forget's)."""
        return self.tiers.spores.drop(spore_id)

    def crystals(self) -> list[Crystal]:
        """The crystallized tier: proven patterns held out of the pinned block (a menu of them is pinned)."""
        return self.tiers.crystals.all()

    def crystal_recall(self, query: str, k: int = 3) -> list[CrystalHit]:
        """Crystals ``query`` cues: by their words, or an evidence edge to a memory it retrieves."""
        return self.tiers.recall(query, k)

    def crystallize(self, name: str | None = None) -> list[str]:
        """Propose the continuity's 3x pattern ``name`` (all when None) for the tier; review item ids."""
        return self.tiers.crystals.crystallize(name)
