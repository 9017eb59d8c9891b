"""The three seams: Embedder, VectorIndex, Store.

Small, batch-first, one return type each. ``embedders/`` and ``index/`` implement the first two;
``pager.store`` implements the third for DuckDB (a server database plugs in at the same seam).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from mempager.types import AuditReport, FloatMatrix, LabelArray, Memory, MemoryType, NewMemory, PutResult, Role, Source


@runtime_checkable
class Embedder(Protocol):
    """Turns text into L2-normalised, finite float32 rows."""

    @property
    def name(self) -> str:
        """Stable, versioned model name recorded with every vector ("hash-v2-384")."""
        ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str], role: Role = "document") -> FloatMatrix: ...


@runtime_checkable
class VectorIndex(Protocol):
    """Turns a vector into neighbours. Labels are the store's int64 labels, never positions."""

    @property
    def dim(self) -> int: ...

    def add(self, labels: LabelArray, vectors: FloatMatrix) -> None:
        """Insert or replace the vectors for ``labels``."""
        ...

    def remove(self, labels: Iterable[int]) -> None: ...

    def search(self, vector: FloatMatrix, k: int, allow: frozenset[int] | None = None) -> list[tuple[int, float]]:
        """Best first; score is cosine similarity (higher is better). ``allow`` filters labels."""
        ...

    def save(self, directory: Path) -> None: ...

    def load(self, directory: Path) -> None: ...

    def __len__(self) -> int: ...

    def __contains__(self, label: object) -> bool: ...


@dataclass(frozen=True, slots=True)
class PendingItem:
    """A memory that has no vector yet for the active model."""

    label: int
    actor: str
    text: str
    content_hash: str
    attempts: int
    last_error: str | None


@dataclass(frozen=True, slots=True)
class PendingStats:
    count: int
    oldest_created_at: datetime | None
    failing: int  # pending items whose last attempt failed


@dataclass(frozen=True, slots=True)
class SalienceParams:
    """Inputs of the documented salience score (see ``pager.salience``)."""

    now: datetime
    half_life_days: dict[MemoryType, float]
    default_half_life_days: float
    w_recency: float
    w_importance: float
    w_strength: float
    w_access: float


@dataclass(frozen=True, slots=True)
class CandidateAsk:
    """What ranking asks the store about one retrieve's candidates (``Store.candidate_facts``):
    on a server store one round trip answers both parts. An empty part is not asked.

    ``prior``: labels ranked by salience under ``params`` among ``types``, exactly as
    ``salience(actor, types, params, len(prior), prior)``; ``cosine``: labels whose cosine with
    ``vector`` (their stored vector of ``model``) is wanted.
    """

    prior: Sequence[int] = ()
    types: Sequence[MemoryType] = ()
    params: SalienceParams | None = None
    cosine: Sequence[int] = ()
    model: str = ""
    vector: FloatMatrix | None = None


@dataclass(frozen=True, slots=True)
class CandidateFacts:
    """The answers to a ``CandidateAsk``: ``prior`` best first (ties: higher label first), ``cosine``
    by label (labels without a vector left out)."""

    prior: list[tuple[int, float]]
    cosine: dict[int, float]


# -- consolidation (session wraps, continuity, pattern history, associations) ---------------------
@dataclass(frozen=True, slots=True)
class WrapRecord:
    """One session wrap: opened by ``prepare_wrap`` over a frozen snapshot, closed by one save."""

    actor: str
    number: int  # 1, 2, ... per actor
    status: str  # open | saved
    opened_at: datetime
    saved_at: datetime | None
    labels: tuple[int, ...]  # the snapshot: labels of the memories this wrap consolidates
    session_id: str | None
    metrics: Mapping[str, Any]  # what the save measured (for ``mempager diff``); {} while open


@dataclass(frozen=True, slots=True)
class ContinuityVersion:
    version: int
    wrap: int
    text: str
    saved_at: datetime


@dataclass(frozen=True, slots=True)
class PatternRecord:
    """What the immune system remembers of one pattern line across wraps."""

    key: str  # the normalised pattern text
    name: str
    level: int  # 1..3 as last saved
    max_level: int  # the high-water level it ever earned
    grounded_on: date | None  # the last wrap's day that grounded it with valid evidence
    explanations: tuple[str, ...]  # the explanations of that grounding (the rephrase check)
    in_continuity: bool  # present in the latest saved continuity


@dataclass(frozen=True, slots=True)
class AssociationLink:
    """A lateral link between two memories cited together (``a < b``, labels)."""

    a: int
    b: int
    strength: float
    last_wrap: int  # the last wrap that reinforced it
    affect_tag: str | None
    affect_intensity: float | None


@dataclass(frozen=True, slots=True)
class ConsolidationState:
    schema: str | None  # the section schema as JSON; None: the default schema
    citations_seen: bool  # some saved wrap cited evidence (ends the bare-graduation exemption)
    last_label: int  # memories with a label above this are the next wrap's episodes
    wraps: int  # wraps saved so far
    open: WrapRecord | None
    baton: str | None  # the session allowed to consolidate when several are live


@dataclass(frozen=True, slots=True)
class WrapCommit:
    """Everything one save changes, written in one transaction (or not at all)."""

    number: int
    text: str
    patterns: tuple[PatternRecord, ...]  # the actor's whole pattern history after this wrap
    links: tuple[AssociationLink, ...]  # the actor's whole association graph after this wrap
    citations_seen: bool
    metrics: Mapping[str, Any]
    audit: tuple[tuple[str, str, str], ...]  # (op, uri, content_hash) entries besides ``wrap.save``


class ConsolidationStore(Protocol):
    """The persistent side of consolidation; ``Store.consolidation`` of every backend."""

    def state(self, actor: str) -> ConsolidationState: ...

    def open_wrap(self, actor: str, session_id: str | None, limit: int) -> WrapRecord | None:
        """The actor's open wrap, else a new one over (at most ``limit``) memories written since
        the last saved wrap; None when there are none."""
        ...

    def commit_wrap(self, actor: str, commit: WrapCommit) -> int:
        """Save the continuity of open wrap ``commit.number``; the new version. ``WrapNotOpen`` else."""
        ...

    def record_event(self, actor: str, op: str, uri: str, content_hash: str) -> None: ...

    def set_schema(self, actor: str, schema: str) -> None: ...

    def continuity(self, actor: str, limit: int = 1) -> list[ContinuityVersion]:
        """Newest first."""
        ...

    def wraps(self, actor: str, limit: int = 20) -> list[WrapRecord]:
        """Newest first."""
        ...

    def patterns(self, actor: str) -> list[PatternRecord]: ...

    def links(self, actor: str, labels: Sequence[int] | None = None) -> list[AssociationLink]:
        """The actor's links (only those touching ``labels`` when given), strongest first."""
        ...

    def session_seen(self, actor: str, session_id: str, now: datetime) -> None: ...

    def live_sessions(self, actor: str, since: datetime) -> list[str]: ...

    def take_baton(self, actor: str, session_id: str) -> None: ...

    def try_lock(self, name: str, holder: str, now: datetime, ttl_seconds: float) -> bool:
        """Take the store-wide lock ``name`` for ``holder`` unless another holds it unexpired."""
        ...

    def unlock(self, name: str, holder: str) -> None:
        """Let go of ``name`` if ``holder`` holds it (an expired claim may be someone else's now)."""
        ...

    def apply_merge(
        self,
        actor: str,
        originals: Sequence[str],
        *,
        item: NewMemory | None = None,
        by: str | None = None,
        review_id: str | None = None,
    ) -> tuple[str, PutResult | None]:
        """One merge group in one transaction, all or nothing: ``item`` written (or the live memory at
        uri ``by`` kept), each live memory of ``originals`` (ids) superseded by it, and ``review_id``
        closed as accepted. An original gone or superseded meanwhile raises ``MemoryNotFound``.
        Returns the uri now in force and the put result of ``item``."""
        ...


class Store(Protocol):
    """The source of truth: memories, their vectors, and the pending-embedding queue."""

    @property
    def location(self) -> str: ...

    # -- memories -------------------------------------------------------------------------
    def put(self, item: NewMemory) -> PutResult: ...

    def put_many(self, items: Sequence[NewMemory]) -> list[PutResult]: ...

    def get(self, actor: str, memory_id: str) -> Memory | None: ...

    def get_many(self, actor: str, labels: Sequence[int]) -> dict[int, Memory]: ...

    def uris(self, actor: str, labels: Sequence[int]) -> dict[int, str]: ...

    def find(self, actor: str, type_: MemoryType, dedup_key: str) -> Memory | None: ...

    def update(self, actor: str, memory_id: str, op: str = "update", **changes: object) -> Memory: ...

    def delete(self, actor: str, memory_id: str) -> Memory | None: ...

    def delete_many(self, actor: str, memory_ids: Sequence[str]) -> list[Memory]: ...

    def compact(self) -> None:
        """Make deleted memories' bytes disappear from the store's files."""
        ...

    def mark_erasure(self, actor: str) -> None:
        """Durably note, before a hard delete, that ``actor`` has bytes to erase."""
        ...

    def erasure_marks(self) -> dict[str, str]:
        """Actor -> token of its latest hard forget not yet erased."""
        ...

    def clear_erasure(self, actor: str, token: str) -> bool:
        """Drop ``actor``'s mark if it still holds ``token``; True when dropped."""
        ...

    def query(
        self,
        actor: str,
        *,
        types: Sequence[MemoryType] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        sources: Sequence[Source] | None = None,
        tags: Sequence[str] | None = None,
        labels: Sequence[int] | None = None,
        limit: int = 20,
        offset: int = 0,
        order: str = "newest",
    ) -> list[Memory]: ...

    def salience(
        self,
        actor: str,
        types: Sequence[MemoryType],
        params: SalienceParams,
        limit: int,
        only: Sequence[int] | None = None,
    ) -> list[tuple[int, float]]: ...

    def candidate_facts(self, actor: str, ask: CandidateAsk) -> CandidateFacts:
        """``salience`` and stored-vector cosines for one retrieve's candidates, read together: one
        statement (one round trip, one snapshot) on a server store."""
        ...

    def live_labels(self, actor: str) -> LabelArray: ...

    def of_types(
        self, actor: str, types: Sequence[MemoryType], order: str = "newest", limit: int = 1_000_000
    ) -> list[Memory]: ...

    def content_hashes(self, actor: str) -> dict[int, str]: ...

    def texts_since(self, actor: str, rev: int) -> tuple[list[int], list[str]]: ...

    def max_rev(self, actor: str) -> int: ...

    def add_change_listener(self, actor: str, listener: Any) -> None: ...

    def remove_change_listener(self, actor: str, listener: Any) -> None: ...

    def touch(self, actor: str, labels: Sequence[int], when: datetime) -> None: ...

    def counts(self, actor: str) -> dict[str, int]: ...

    # -- vectors --------------------------------------------------------------------------
    def put_vectors(
        self, model: str, labels: LabelArray, vectors: FloatMatrix, content_hashes: Sequence[str]
    ) -> LabelArray:
        """Returns the labels stored (a memory changed or deleted meanwhile is skipped)."""
        ...

    def vectors(self, actor: str, model: str) -> tuple[LabelArray, FloatMatrix]: ...

    def vectors_since(self, actor: str, model: str, seq: int) -> tuple[LabelArray, FloatMatrix]: ...

    def vector_state(self, actor: str, model: str) -> tuple[int, int]: ...

    def vector_labels(self, actor: str, model: str) -> LabelArray: ...

    def vector_models(self, actor: str) -> dict[str, int]: ...

    def drop_vectors(self, actor: str, model: str) -> int: ...

    def pending(self, actor: str, model: str, limit: int) -> list[PendingItem]: ...

    def pending_stats(self, actor: str, model: str) -> PendingStats: ...

    def record_embed_failure(self, model: str, labels: Sequence[int], error: str) -> None: ...

    # -- journal: page injections, feedback, review queue --------------------------------------
    def record_injections(self, actor: str, turn: str, items: Sequence[tuple[str, str]]) -> None: ...

    def injections(self, actor: str, turn: str) -> list[tuple[str, str]]: ...

    def claim_feedback(self, actor: str, turn: str, outcome: str) -> bool: ...

    def review_add(self, actor: str, kind: str, payload: Mapping[str, Any]) -> str: ...

    def review_find(self, actor: str, kind: str, key: str, value: str) -> Any: ...

    def review_list(self, actor: str, status: str | None = "pending") -> list[Any]: ...

    def review_get(self, actor: str, review_id: str) -> Any: ...

    def review_close(self, actor: str, review_id: str, status: str, result_uri: str | None) -> None: ...

    def review_accept(
        self, actor: str, review_id: str, item: NewMemory, deprecate: tuple[str, Mapping[str, Any]] | None = None
    ) -> PutResult:
        """Write ``item`` (and deprecate another memory) and close the item, in one transaction."""
        ...

    def review_purge(self, actor: str, ids: Sequence[str] | None = None) -> int: ...

    def meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str, *, actor: str) -> None: ...

    def audit_entries(
        self, actor: str | None = None, since: datetime | None = None, limit: int = 1000
    ) -> list[Any]: ...

    def verify_audit(self) -> AuditReport: ...

    def add_audit_listener(self, listener: Any) -> None: ...

    def remove_audit_listener(self, listener: Any) -> None: ...

    @property
    def consolidation(self) -> ConsolidationStore:
        """Session wraps, continuity versions, pattern history, associations."""
        ...

    def close(self) -> None: ...


class SemanticLaneLike(Protocol):
    """What the pager and its workers need from a semantic lane (``pager.semantic.SemanticLane``
    for the embedded store; a server store may answer from its own vector index instead)."""

    store: Any
    actor: str
    embedder: Embedder
    lock: Any  # an RLock: workers hold it across put_vectors + add so a forget cannot interleave
    opened_how: str
    added_since_save: int

    @property
    def model(self) -> str: ...

    def open(self) -> str: ...

    def save(self) -> None: ...

    def purge(self) -> None: ...

    def add(self, labels: LabelArray, vectors: FloatMatrix, content_hashes: Sequence[str] = ()) -> None: ...

    def remove(self, labels: Iterable[int]) -> None: ...

    def track(self, upserted: Iterable[Any], removed: Iterable[int]) -> None: ...

    def unembedded_labels(self) -> list[int]: ...

    def embed_query(self, query: str) -> FloatMatrix: ...

    def search_vector(self, vector: FloatMatrix, k: int) -> list[tuple[int, float]]: ...

    def search_snapshot(self, vector: FloatMatrix, k: int) -> tuple[list[tuple[int, float]], list[int]]:
        """The search, and every label without a vector at some moment around it (so a memory the
        search cannot see yet is in the second list, and none falls between the two)."""
        ...

    def scores_for(self, vector: FloatMatrix, labels: Sequence[int]) -> dict[int, float]: ...

    def __contains__(self, label: object) -> bool: ...

    def __len__(self) -> int: ...


class LexicalLaneLike(Protocol):
    """What the pager needs from a lexical lane (``pager.lexical_lane.LexicalLane`` by default)."""

    def open(self) -> str: ...

    def save(self) -> None: ...

    def rebuild(self, why: str) -> str: ...

    def apply(self, upserted: Sequence[Memory], removed: Sequence[int]) -> None: ...

    def search_scored(
        self, query: str, k: int, also: Sequence[int] | Callable[[], Sequence[int]]
    ) -> tuple[list[tuple[int, float]], dict[int, float]]:
        """The top ``k`` and the scores of ``also`` (or of what it returns, called once the top ``k``
        is known: the semantic lane may still be searching in another thread)."""
        ...

    def spoken_by(self, query: str, labels: Iterable[int]) -> list[int]: ...

    def match(self, query: str) -> list[tuple[int, float]]: ...

    def __len__(self) -> int: ...
