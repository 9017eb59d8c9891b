"""Pager configuration: a frozen, keyword-only dataclass validated on construction.

The environment is read only at the edges (``PagerConfig.from_env`` is called by ``mempager.open``
and the CLI); everything below takes explicit values.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from mempager.errors import ConfigError, InvalidInput
from mempager.tokens import estimate_tokens
from mempager.types import MemoryType

if TYPE_CHECKING:
    from mempager.index.episodes import ContextConfig

# Half-lives (days) of the recency term of the salience score. Events fade fastest; what the
# user told us about themselves fades slowest. Decay only re-orders: see pager.salience.
DEFAULT_HALF_LIVES: Mapping[str, float] = MappingProxyType(
    {
        "event": 30.0,
        "outcome": 30.0,
        "goal": 14.0,
        "fact": 180.0,
        "belief": 90.0,
        "pattern": 90.0,
        "preference": 365.0,
        "profile": 365.0,
    }
)

EMBEDDER_CHOICES = ("auto", "gateway", "provider", "local", "hash")
MEMORY_MODES = ("autopilot", "copilot", "off")


def _frozen(mapping: Mapping[str, float]) -> Mapping[str, float]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True, kw_only=True)
class PagerConfig:
    # budgets (tokens, estimated by ``token_estimator``)
    pinned_budget_tokens: int = 2000
    retrieval_budget_tokens: int = 6000
    patterns_budget_tokens: int = 1000
    page_budget_tokens: int = 8000  # the whole page; retrieval gets what pinned and procedures leave
    # the continuity (the agent's own compressed session memory, consolidation/) is pinned too, in
    # its own fenced section under this budget, on top of pinned_budget_tokens
    continuity_budget_tokens: int = 1500
    retrieval_top_k: int = 8
    profile_limit: int = 12
    # writes
    max_text_bytes: int = 1_000_000
    # procedural memory
    min_pattern_successes: int = 3
    # lanes and fusion
    lane_depth: int = 50
    # Fusion: "score" sums each lane's normalised score with these weights (chosen on LoCoMo,
    # see README "Recall at a budget"); "rrf" is weighted reciprocal-rank fusion with rrf_k.
    # "time": memories created on a date the query names (lanes.when, chosen on LoCoMo halves);
    # "prior": salience's recency and importance among the memories that matched the content
    # (a constant on LoCoMo, whose turns are years old and alike; measured on the generated
    # knowledge-update workload: benchmarks/results/longmemeval_updates.md).
    # "association": memories a wrap's patterns cited together with the best candidates (lanes.association;
    # benchmarks/results/locomo_associations.md).
    # "speaker": candidates whose speaker prefix ("Caroline: ...") the query names (index.speakers);
    # 0.2 chosen on each LoCoMo half alone (benchmarks/results/locomo_levers.md).
    fusion: str = "score"
    lane_weights: Mapping[str, float] = field(
        default_factory=lambda: _frozen(
            {
                "semantic": 0.5,
                "lexical": 0.5,
                "salience": 0.2,
                "time": 0.4,
                "prior": 0.1,
                "association": 0.2,
                "speaker": 0.2,
            }
        )
    )
    # the best memories the semantic lane cannot see yet (not embedded) always get this many of
    # the k places: a fresh write is recallable even when weak matches outscore it
    salience_reserve: int = 2
    semantic_floor: float = 0.1
    rrf_k: int = 60
    # The lexical lane scores a memory of the context types as its text plus its episode's
    # neighbours (index.episodes): context_window on each side, the one d steps away counting
    # context_decay**d. An episode: consecutive memories at most episode_gap_seconds apart.
    # Chosen on LoCoMo halves (benchmarks/results/locomo_levers.md); 0 turns it off.
    context_window: int = 2
    context_decay: float = 0.5
    episode_gap_seconds: float = 1800.0
    context_types: tuple[MemoryType, ...] = (MemoryType.EVENT,)
    # The time lane (lanes.when): a memory created up to this many days after a date the query
    # names still counts as from that date (events are told after they happen). LoCoMo halves.
    time_after_days: int = 3
    # "unindexed": salience ranks only what the semantic lane cannot see yet (fresh writes, a
    # failing embedder); "all": every memory of the salience types. Chosen on LoCoMo, see README.
    salience_mode: str = "unindexed"
    salience_types: tuple[MemoryType, ...] = (
        MemoryType.FACT,
        MemoryType.EVENT,
        MemoryType.PATTERN,
        MemoryType.PREFERENCE,
        MemoryType.GOAL,
    )
    half_life_days: Mapping[str, float] = field(default_factory=lambda: DEFAULT_HALF_LIVES)
    default_half_life_days: float = 90.0
    salience_weights: Mapping[str, float] = field(
        default_factory=lambda: _frozen({"recency": 0.4, "importance": 0.25, "strength": 0.25, "access": 0.1})
    )
    # procedural lifecycle (seed 002: playbook confidence, maturity, anti-patterns)
    success_increment: float = 0.05
    failure_decrement: float = 0.20
    confidence_half_life_days: float = 90.0
    established_confidence: float = 0.5
    established_applications: int = 3
    proven_confidence: float = 0.8
    proven_applications: int = 10
    demote_proven_below: float = 0.5
    demote_established_below: float = 0.3
    antipattern_min_failures: int = 3
    antipattern_failure_ratio: float = 2.0
    min_pattern_relevance: float = 0.1
    max_patterns_in_page: int = 3
    menu_max_patterns: int = 10
    # encoding gate for memories written by an LLM or by consolidation
    memory_mode: str = "autopilot"
    copilot_min_confidence: float = 0.7
    # embedding
    embedder: str = "auto"
    hash_dim: int = 384
    # two: one batch is embedded while the previous one is stored and indexed (benchmarks/results/
    # workers.md: 0.92 of direct `encode` throughput against 0.75 with one worker, MiniLM on 2 cores)
    # 0: no background embedding in this process (a short-lived command that only reads); new
    # memories stay pending until a process with workers (a server, the library) embeds them
    embed_workers: int = 2
    # load the local model on its first embed instead of at open (the CLI does: `stats` or
    # `recall` never pay for torch); a model that then fails to load is reported down, not replaced
    defer_model_load: bool = False
    # make the embedder chosen at open the store's active model (starting a re-embedding), as
    # `mempager model use` does; without it a pager of another model only reads (never rewrites)
    adopt_embedder: bool = False
    embed_batch_size: int = 64
    # tries per batch (the first included) before its memories are left pending with the error
    # recorded; the worker then moves on and retries them after a pause that doubles per failed
    # round up to embed_max_backoff_seconds, so it recovers by itself when the embedder does
    embed_max_attempts: int = 5
    embed_backoff_seconds: float = 0.1  # wait before the 2nd try; doubles per try
    embed_max_backoff_seconds: float = 30.0  # cap on any wait, between tries and between rounds
    # the semantic lane's HNSW graph (index.hnsw): M and ef_construction are fixed when a graph
    # is built; a saved graph keeps its own until it is rebuilt (tombstones past
    # hnsw_max_deleted_share, or its <store>.index removed), so a changed M never costs a rebuild
    # at open. M=32 recalls 0.964@10 at 1M where M=16 recalls 0.958 in 1.35x the retrieve time, for
    # 128 more bytes of graph a vector (benchmarks/results/hnsw_m_before_after.md).
    hnsw_m: int = 32
    hnsw_ef_construction: int = 200
    # ef, the search width, trades query time for recall: the least one, and how much it grows per
    # million live vectors (a graph of fixed M recalls less as it grows: M=16 at ef 128 0.99 at
    # 100k, 0.84 at 1M). None: the width measured for the graph's own M
    # (index.hnsw_graph.MEASURED_WIDTH: 128 + 600 per million at M=16, 96 + 240 at M=32).
    # hnsw_ef_per_million 0: ef stays at its least at any size.
    hnsw_ef: int | None = None
    hnsw_ef_per_million: int | None = None
    hnsw_max_deleted_share: float = 0.2  # rebuild the graph once tombstones exceed this share
    # erasure: a hard forget takes the memory out of every lane at once; the bytes left in the
    # files (store file, saved indexes) are erased by a background pass this many seconds after
    # the first forget not yet erased, so forgets arriving meanwhile share one pass (the store
    # file is rewritten once, not once per forget). Bytes are gone within this delay plus the
    # pass itself (about 2 s at 100k memories; benchmarks/results/erasure.md); also at close(),
    # and at once with forget(..., wait=True) or erase_now(). 0: a pass starts right away.
    erase_delay_seconds: float = 20.0
    # LLM consolidation steps (consolidation/merge.py, replay.py, reflection.py, auto_wrap.py): the
    # chat endpoint is LLMSettings (MEMPAGER_LLM_URL/_MODEL/_API_KEY); these bound every call
    llm_timeout_seconds: float = 60.0
    llm_max_attempts: int = 3  # tries per request (the first included); 429, 5xx and refused connections only
    llm_backoff_seconds: float = 1.0  # wait before the 2nd try; doubles per try
    # a type/scope holding more than this many live memories is offered to the LLM for merging
    # (seed 000's compaction threshold); at most merge_max_memories of them per call (the newest)
    merge_threshold: int = 20
    merge_max_memories: int = 200
    # one consolidation per store at a time; a holder that died frees the lock after this long
    consolidation_lock_seconds: float = 900.0
    # TurnMemory (turns.py) asks the LLM for user/identity facts in the background every this many
    # turns (seed 000: every 5), through the encoding gate; 0: never. One extraction in flight per
    # pager; a reply later than identity_timeout_seconds is dropped (nothing written)
    identity_every_turns: int = 5
    identity_timeout_seconds: float = 120.0
    # the crystallized tier (consolidation/crystal.py): a pinned menu of one line per crystal under
    # crystal_menu_budget_tokens; bodies come into a page on cue under crystal_budget_tokens.
    # Spores (paging/spores.py): cued or due ones in a page under spore_budget_tokens; completed
    # ones are deleted (and erased) spore_retention_days after completion.
    crystal_menu_budget_tokens: int = 200
    crystal_budget_tokens: int = 600
    spore_budget_tokens: int = 300
    spore_retention_days: float = 30.0
    token_estimator: Callable[[str], int] = estimate_tokens

    def __post_init__(self) -> None:
        for name in (
            "pinned_budget_tokens",
            "continuity_budget_tokens",
            "retrieval_budget_tokens",
            "retrieval_top_k",
            "profile_limit",
            "max_text_bytes",
            "lane_depth",
            "rrf_k",
            "hash_dim",
            "embed_batch_size",
            "embed_max_attempts",
            "hnsw_ef_construction",
            "established_applications",
            "proven_applications",
            "antipattern_min_failures",
            "max_patterns_in_page",
            "patterns_budget_tokens",
            "page_budget_tokens",
            "menu_max_patterns",
            "llm_max_attempts",
            "merge_threshold",
            "merge_max_memories",
            "crystal_menu_budget_tokens",
            "crystal_budget_tokens",
            "spore_budget_tokens",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        every = self.identity_every_turns
        if isinstance(every, bool) or not isinstance(every, int) or every < 0:
            raise ConfigError(f"identity_every_turns must be an integer >= 0 (0: never), got {every!r}")
        if self.hnsw_ef is not None and (
            isinstance(self.hnsw_ef, bool) or not isinstance(self.hnsw_ef, int) or self.hnsw_ef < 1
        ):
            raise ConfigError(
                f"hnsw_ef must be a positive integer or None (as measured for the graph's M), got {self.hnsw_ef!r}"
            )
        per_million = self.hnsw_ef_per_million
        if per_million is not None and (
            isinstance(per_million, bool) or not isinstance(per_million, int) or per_million < 0
        ):
            raise ConfigError(
                "hnsw_ef_per_million must be an integer >= 0 (0: a fixed ef) or None (as measured for "
                f"the graph's M), got {per_million!r}"
            )
        if isinstance(self.embed_workers, bool) or not isinstance(self.embed_workers, int) or self.embed_workers < 0:
            raise ConfigError(f"embed_workers must be an integer >= 0, got {self.embed_workers!r}")
        for flag in ("defer_model_load", "adopt_embedder"):
            if not isinstance(getattr(self, flag), bool):
                raise ConfigError(f"{flag} must be True or False, got {getattr(self, flag)!r}")
        if not isinstance(self.min_pattern_successes, int) or self.min_pattern_successes < 0:
            raise ConfigError(f"min_pattern_successes must be an integer >= 0, got {self.min_pattern_successes!r}")
        if (
            isinstance(self.salience_reserve, bool)
            or not isinstance(self.salience_reserve, int)
            or self.salience_reserve < 0
        ):
            raise ConfigError(f"salience_reserve must be an integer >= 0, got {self.salience_reserve!r}")
        self._check_embedding()
        if self.fusion not in ("score", "rrf"):
            raise ConfigError(f"fusion must be 'score' or 'rrf', got {self.fusion!r}")
        if not -1.0 <= self.semantic_floor < 1.0:
            raise ConfigError(f"semantic_floor must be in [-1, 1), got {self.semantic_floor!r}")
        if self.salience_mode not in ("unindexed", "all"):
            raise ConfigError(f"salience_mode must be 'unindexed' or 'all', got {self.salience_mode!r}")
        if self.memory_mode not in MEMORY_MODES:
            raise ConfigError(f"memory_mode must be one of {', '.join(MEMORY_MODES)}, got {self.memory_mode!r}")
        for name in (
            "success_increment",
            "failure_decrement",
            "established_confidence",
            "proven_confidence",
            "demote_proven_below",
            "demote_established_below",
            "min_pattern_relevance",
            "copilot_min_confidence",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise ConfigError(f"{name} must be a number in [0, 1], got {value!r}")
        retention = self.spore_retention_days
        if isinstance(retention, bool) or not isinstance(retention, (int, float)) or not 0.0 <= retention < math.inf:
            raise ConfigError(f"spore_retention_days must be a finite number of days >= 0, got {retention!r}")
        if self.confidence_half_life_days <= 0 or self.antipattern_failure_ratio <= 0:
            raise ConfigError("confidence_half_life_days and antipattern_failure_ratio must be > 0")
        if self.embedder not in EMBEDDER_CHOICES:
            raise ConfigError(f"embedder must be one of {', '.join(EMBEDDER_CHOICES)}, got {self.embedder!r}")
        self._check_weights("lane_weights", self.lane_weights)
        self._check_weights("salience_weights", self.salience_weights)
        self._check_weights("half_life_days", self.half_life_days, positive=True)
        if self.default_half_life_days <= 0:
            raise ConfigError(f"default_half_life_days must be > 0, got {self.default_half_life_days!r}")
        bad = [t for t in self.half_life_days if t not in MemoryType._value2member_map_]
        if bad:
            raise ConfigError(f"half_life_days has unknown memory types {bad!r}")
        object.__setattr__(self, "lane_weights", _frozen(self.lane_weights))
        object.__setattr__(self, "salience_weights", _frozen(self.salience_weights))
        object.__setattr__(self, "half_life_days", _frozen(self.half_life_days))
        object.__setattr__(self, "salience_types", tuple(MemoryType(t) for t in self.salience_types))
        object.__setattr__(self, "context_types", tuple(MemoryType(t) for t in self.context_types))
        self.context()  # ContextConfig checks its own ranges
        after = self.time_after_days
        if isinstance(after, bool) or not isinstance(after, int) or not 0 <= after <= 366:
            raise ConfigError(f"time_after_days must be a whole number of days in 0..366, got {after!r}")

    def context(self) -> ContextConfig:
        """What the lexical lane folds into a memory's keys (index.episodes)."""
        from mempager.index.episodes import ContextConfig  # lazily: numpy stays out of `import mempager`

        try:
            return ContextConfig(self.context_window, self.context_decay, self.episode_gap_seconds)
        except InvalidInput as exc:
            raise ConfigError(f"{exc}; set context_window / context_decay / episode_gap_seconds") from exc

    def _check_embedding(self) -> None:
        if isinstance(self.hnsw_m, bool) or not isinstance(self.hnsw_m, int) or self.hnsw_m < 2:
            raise ConfigError(f"hnsw_m must be an integer >= 2, got {self.hnsw_m!r}")
        share = self.hnsw_max_deleted_share
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 < share < 1.0:
            raise ConfigError(f"hnsw_max_deleted_share must be a number in (0, 1), got {share!r}")
        delay = self.erase_delay_seconds
        if isinstance(delay, bool) or not isinstance(delay, (int, float)) or not 0.0 <= delay < math.inf:
            raise ConfigError(f"erase_delay_seconds must be a finite number of seconds >= 0, got {delay!r}")
        for name in (
            "embed_backoff_seconds",
            "embed_max_backoff_seconds",
            "llm_timeout_seconds",
            "llm_backoff_seconds",
            "consolidation_lock_seconds",
            "identity_timeout_seconds",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value < math.inf:
                raise ConfigError(f"{name} must be a finite number of seconds > 0, got {value!r}")
        if self.embed_max_backoff_seconds < self.embed_backoff_seconds:
            raise ConfigError(
                f"embed_max_backoff_seconds ({self.embed_max_backoff_seconds!r}) must be >= "
                f"embed_backoff_seconds ({self.embed_backoff_seconds!r})"
            )

    @staticmethod
    def _check_weights(name: str, weights: Mapping[str, float], positive: bool = False) -> None:
        for key, value in weights.items():
            ok = isinstance(value, (int, float)) and value == value and value >= 0
            if not ok or (positive and value <= 0):
                raise ConfigError(f"{name}[{key!r}] must be a finite number >= 0, got {value!r}")

    def with_(self, **changes: Any) -> PagerConfig:
        return replace(self, **changes)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> PagerConfig:
        """Read ``MEMPAGER_<FIELD>`` numbers and the embedder choice from the environment."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(f"MEMPAGER_{f.name.upper()}")
            if raw is None:
                continue
            if f.name in ("embedder", "memory_mode", "salience_mode", "fusion"):
                values[f.name] = raw.strip()
            elif f.type in ("bool", bool):
                values[f.name] = _flag(f"MEMPAGER_{f.name.upper()}", raw)
            elif f.type in ("int | None",) and raw.strip().lower() in ("", "auto"):
                values[f.name] = None
            elif f.type in ("int", int, "int | None"):
                try:
                    values[f.name] = int(raw)
                except ValueError as exc:
                    extra = " or 'auto'" if f.type == "int | None" else ""
                    raise ConfigError(f"MEMPAGER_{f.name.upper()} must be an integer{extra}, got {raw!r}") from exc
            elif f.type in ("float", float):
                try:
                    values[f.name] = float(raw)
                except ValueError as exc:
                    raise ConfigError(f"MEMPAGER_{f.name.upper()} must be a number, got {raw!r}") from exc
        values.update(overrides)
        return cls(**values)


def _flag(key: str, raw: str) -> bool:
    word = raw.strip().lower()
    if word in ("1", "true", "yes", "on"):
        return True
    if word in ("0", "false", "no", "off", ""):
        return False
    raise ConfigError(f"{key} must be 1/true/yes/on or 0/false/no/off, got {raw!r}")
