"""The descriptions behind ``settings_table``: one entry per ``MEMPAGER_*`` variable.

Data only (what each setting does, its group, which part of the program reads it); the table,
resolving values and the README block are built from it in ``mempager.settings_table``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

Value = str | int | float | bool | None

START = "<!-- settings-table:start -->"
END = "<!-- settings-table:end -->"
REGENERATE = "python -m mempager.settings_table --write-readme README.md"
HIDDEN = "set (hidden)"

# who reads a variable (``Setting.read_by``)
PAGER = "PagerConfig.from_env"
EMBEDDER = "EmbedderSettings.from_env"
LLM_READER = "LLMSettings.from_env"
CLI = "mempager CLI"
SERVER = "mempager serve (MCP server)"

# The string fields ``PagerConfig.from_env`` reads as they are; every other field it reads is an
# int, float or bool, or an int that may be None (written ``auto``: the value follows from something
# else, as the HNSW search width from the graph's M). Mappings, tuples and callables are set in code only.
PAGER_CHOICES = ("embedder", "memory_mode", "salience_mode", "fusion")
PAGER_TYPES = ("int", "float", "bool", int, float, bool, "int | None")
AUTO = "auto"  # how an ``int | None`` field's None is written: its value follows from something else

DEFAULT_STORE = ".mempager/store.duckdb"  # the CLI's; mempager.cli.main uses the same
LOG_LEVELS = ("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG")

STORE_GROUP = "Store and identity"
BUDGETS = "Page budgets"
RETRIEVAL = "Retrieval and fusion"
PROCEDURAL = "Procedural memory"
GATE = "Encoding gate"
EMBEDDING = "Embedding"
ENDPOINTS = "Embedder endpoints"
HNSW = "Semantic index (HNSW)"
LLM_STEPS = "LLM consolidation"
LOGGING = "Logging"
GROUPS = (STORE_GROUP, BUDGETS, RETRIEVAL, PROCEDURAL, GATE, EMBEDDING, ENDPOINTS, HNSW, LLM_STEPS, LOGGING)


@dataclass(frozen=True)
class Setting:
    """One environment variable and the setting it controls.

    ``name`` is the field or option it sets (``PagerConfig.<name>``, ``EmbedderSettings.<name>``,
    or the CLI/server option); ``default`` is the value used when the variable is unset.
    """

    env: str
    name: str
    default: Value
    description: str
    group: str
    secret: bool = False
    read_by: str = PAGER


class Resolved(NamedTuple):
    """A setting, the value in effect, and where it came from: "default", "environment",
    "command line" (``mempager config --store ...``) or "invalid: <why>".

    A secret's value is ``"set (hidden)"`` or None; an invalid value is shown as given."""

    setting: Setting
    value: Value
    source: str


# PagerConfig fields read from the environment: (group, description). A field missing here shows
# an empty description, which tests/pager/test_settings_table.py rejects.
PAGER_DOCS: dict[str, tuple[str, str]] = {
    "pinned_budget_tokens": (
        BUDGETS,
        "Tokens for the pinned block (identity, rules, constraints, profile, goal), shown on every turn. "
        "Raise it when rules or constraints get cut; `page --explain` reports what was cut.",
    ),
    "continuity_budget_tokens": (
        BUDGETS,
        "Tokens for the continuity (the document the agent's last session wrap saved), pinned in its own "
        "fenced section after the pinned block; lines past the budget are cut with a visible marker.",
    ),
    "retrieval_budget_tokens": (
        BUDGETS,
        "Tokens for retrieved memories, in a page and as the default budget of `retrieve`. "
        "A page gives retrieval at most what pinned and procedures leave of `page_budget_tokens`.",
    ),
    "patterns_budget_tokens": (
        BUDGETS,
        "Tokens for learned procedures (patterns, the menu, anti-patterns) in a page.",
    ),
    "page_budget_tokens": (
        BUDGETS,
        "Tokens for the whole page; pinned is filled first, then procedures, then retrieval. "
        "Set it to the share of the context window memory may take.",
    ),
    "retrieval_top_k": (
        BUDGETS,
        "At most this many retrieved memories per page (and the default `k` of `retrieve`).",
    ),
    "profile_limit": (
        BUDGETS,
        "At most this many user-profile memories in the pinned block, newest first.",
    ),
    "max_text_bytes": (
        BUDGETS,
        "Longest memory, query or goal accepted (UTF-8 bytes); longer text is rejected with `TextTooLong`.",
    ),
    "lane_depth": (
        RETRIEVAL,
        "Candidates each lane (semantic, lexical, salience) returns before fusion, at least; deeper "
        "finds more for a large `k` or budget at some query time.",
    ),
    "fusion": (
        RETRIEVAL,
        "How lanes are merged: `score` (weighted sum of normalised scores, chosen on LoCoMo) or `rrf` "
        "(weighted reciprocal-rank fusion).",
    ),
    "salience_reserve": (
        RETRIEVAL,
        "Places out of `k` kept for the best memories the semantic lane cannot see yet (not embedded), "
        "so a fresh write is recallable at once; 0 turns this off.",
    ),
    "context_window": (
        RETRIEVAL,
        "Neighbours on each side whose text the lexical lane folds into a memory's search keys "
        "(memories of `context_types` in the same episode); the page still shows the memory's own "
        "text. 0 turns it off. Chosen on LoCoMo halves: +0.07 R@10 on each.",
    ),
    "context_decay": (
        RETRIEVAL,
        "Share of its term frequencies a neighbour d steps away adds to a memory's keys: decay**d, in (0, 1].",
    ),
    "episode_gap_seconds": (
        RETRIEVAL,
        "Consecutive memories (by creation time) further apart than this belong to different episodes "
        "and never share keys.",
    ),
    "time_after_days": (
        RETRIEVAL,
        "The time lane counts a memory created up to this many days after a date the query names "
        '("8 May 2023", "May 2023", "in June") as from that date; its weight is '
        '`lane_weights["time"]` (0 turns the lane off).',
    ),
    "context_types": (
        RETRIEVAL,
        "Memory types scored with their episode's neighbours (conversation turns are events).",
    ),
    "semantic_floor": (
        RETRIEVAL,
        "Cosine similarity that counts as no match in `score` fusion: similarity is rescaled from this "
        "floor to 1. Raise it for an embedder whose unrelated texts score high.",
    ),
    "rrf_k": (
        RETRIEVAL,
        "The constant of reciprocal-rank fusion (`fusion=rrf` only): larger flattens the gap between ranks.",
    ),
    "salience_mode": (
        RETRIEVAL,
        "What the salience lane ranks: `unindexed` (only memories not embedded yet: fresh writes, a "
        "failing embedder) or `all` (every memory of the salience types).",
    ),
    "default_half_life_days": (
        RETRIEVAL,
        "Recency half-life (days) of the salience score for memory types without their own half-life.",
    ),
    "min_pattern_successes": (
        PROCEDURAL,
        "Successes a learned pattern needs before pages inject it; below this it stays a candidate.",
    ),
    "success_increment": (
        PROCEDURAL,
        "Confidence a pattern gains per success (0 to 1).",
    ),
    "failure_decrement": (
        PROCEDURAL,
        "Confidence a pattern loses per failure (0 to 1); larger than the gain, so one bug outweighs "
        "several successes.",
    ),
    "confidence_half_life_days": (
        PROCEDURAL,
        "Days for an unused pattern's confidence to halve (applied when read, never written back).",
    ),
    "established_confidence": (
        PROCEDURAL,
        "Confidence a nascent pattern needs (with `established_applications`) to become established.",
    ),
    "established_applications": (
        PROCEDURAL,
        "Applications a nascent pattern needs (with `established_confidence`) to become established.",
    ),
    "proven_confidence": (
        PROCEDURAL,
        "Confidence an established pattern must exceed (with `proven_applications`) to become proven.",
    ),
    "proven_applications": (
        PROCEDURAL,
        "Applications an established pattern needs (with `proven_confidence`) to become proven.",
    ),
    "demote_proven_below": (
        PROCEDURAL,
        "A proven pattern whose confidence falls below this is demoted to established.",
    ),
    "demote_established_below": (
        PROCEDURAL,
        "An established pattern whose confidence falls below this is demoted to nascent (decayed).",
    ),
    "antipattern_min_failures": (
        PROCEDURAL,
        "Failures a pattern needs before an inversion (an anti-pattern) is proposed for review.",
    ),
    "antipattern_failure_ratio": (
        PROCEDURAL,
        "An inversion is proposed once failures exceed this many times the successes.",
    ),
    "min_pattern_relevance": (
        PROCEDURAL,
        "Least relevance to the goal (0 to 1) for a pattern to be shown in a page.",
    ),
    "max_patterns_in_page": (
        PROCEDURAL,
        "Patterns shown in full (with their steps) in a page.",
    ),
    "menu_max_patterns": (
        PROCEDURAL,
        "Further patterns listed by name only (the menu), and at most this many anti-patterns.",
    ),
    "memory_mode": (
        GATE,
        "Memories written by the LLM or by consolidation: `autopilot` stores them, `copilot` stores the "
        "confident ones and queues the rest for `mempager review`, `off` stores none.",
    ),
    "copilot_min_confidence": (
        GATE,
        "In `copilot` mode, the confidence (0 to 1) at which an LLM-written memory is stored without review.",
    ),
    "embedder": (
        EMBEDDING,
        "Which embedder to use: `auto` tries gateway, provider, local model, then hash; any other value "
        "forces that one (the `--embedder` option wins over this).",
    ),
    "hash_dim": (
        EMBEDDING,
        "Width of the hash embedder's vectors (at least 8): the offline fallback with no model.",
    ),
    "embed_workers": (
        EMBEDDING,
        "Background threads embedding new memories; two overlap embedding with storing. 0 embeds "
        "nothing in this process (the CLI's reading commands): new memories wait for one that does.",
    ),
    "defer_model_load": (
        EMBEDDING,
        "`true` loads the local model on its first embed instead of when the store opens (the CLI "
        "always does). Accepts 1/true/yes/on or 0/false/no/off.",
    ),
    "adopt_embedder": (
        EMBEDDING,
        "`true` makes the embedder chosen at open the store's active model and re-embeds every memory "
        "with it (as `mempager model use` does). Unset, a pager whose embedder differs from the store's "
        "model only reads: it never rewrites the store's vectors.",
    ),
    "embed_batch_size": (
        EMBEDDING,
        "Memories embedded per batch by the background workers.",
    ),
    "embed_max_attempts": (
        EMBEDDING,
        "Tries per batch (the first included) before the worker leaves its memories pending with the "
        "error and moves on. The same variable also sets the HTTP embedder's tries per request (below).",
    ),
    "embed_backoff_seconds": (
        EMBEDDING,
        "Wait before a failed batch's second try; doubles per try, up to `embed_max_backoff_seconds`.",
    ),
    "embed_max_backoff_seconds": (
        EMBEDDING,
        "Longest wait between tries and between retry rounds of pending memories, so embedding resumes "
        "by itself soon after the embedder recovers.",
    ),
    "hnsw_m": (
        HNSW,
        "Links per node in the HNSW graph (at least 2): more is better recall, more memory. Fixed when "
        "a graph is built: a saved graph keeps its own until it is rebuilt (past "
        "hnsw_max_deleted_share, or when <store>.index is removed).",
    ),
    "hnsw_ef_construction": (
        HNSW,
        "Search width while building the graph: higher builds slower and recalls better. Like "
        "hnsw_m, a saved graph keeps its own until it is rebuilt.",
    ),
    "hnsw_ef": (
        HNSW,
        "Least search width per query: trades query time for recall. auto (the default): the width "
        "measured for the graph's M (128 at M=16, 96 at M=32: recall@10 0.994 and 0.995 on 100k "
        "MiniLM-like vectors).",
    ),
    "hnsw_ef_per_million": (
        HNSW,
        "Let the search width grow with the graph, to at least this much per million vectors (a graph "
        "recalls less as it grows). auto (the default): the width measured to keep recall@10 >= 0.95 "
        "at 1M for the graph's M (600 at M=16, 240 at M=32). 0 keeps hnsw_ef at any size.",
    ),
    "hnsw_max_deleted_share": (
        HNSW,
        "Rebuild the graph once deleted entries exceed this share of it (between 0 and 1).",
    ),
    "erase_delay_seconds": (
        STORE_GROUP,
        "Seconds after a hard forget before the background pass erases its bytes from the store "
        "file and the saved indexes; forgets meanwhile share the pass. Also erased at close, and at "
        "once with `forget(..., wait=True)` / `erase_now()`. 0 starts the pass at once.",
    ),
    "llm_timeout_seconds": (
        LLM_STEPS,
        "Seconds the consolidation LLM (`MEMPAGER_LLM_URL`) has to answer one request; a timeout skips the "
        "step (merge, replay, reflect, distill, wrap auto) and changes nothing.",
    ),
    "llm_max_attempts": (
        LLM_STEPS,
        "Tries per LLM request (the first included), only after 429, 5xx or a refused connection.",
    ),
    "llm_backoff_seconds": (
        LLM_STEPS,
        "Wait before an LLM request's second try; doubles per try (at most 30 s).",
    ),
    "merge_threshold": (
        LLM_STEPS,
        "`merge` offers a type and scope to the LLM only when it holds more than this many live memories.",
    ),
    "merge_max_memories": (
        LLM_STEPS,
        "At most this many memories (the newest) of one type and scope in one merge request.",
    ),
    "crystal_menu_budget_tokens": (
        BUDGETS,
        "Tokens for the pinned menu of crystals (one line each, after the continuity); the rest are counted.",
    ),
    "crystal_budget_tokens": (
        BUDGETS,
        "Tokens for the crystal bodies a page recalls on cue (their words, or a memory they cite); at most 3.",
    ),
    "spore_budget_tokens": (
        BUDGETS,
        "Tokens for the open spores (intentions) a page shows: those due, or whose cue the query or goal matches.",
    ),
    "spore_retention_days": (
        STORE_GROUP,
        "Days a completed spore is kept before it is deleted (bytes erased) at a spore write; 0: at the next one.",
    ),
    "identity_every_turns": (
        LLM_STEPS,
        "`TurnMemory` asks the LLM for user and identity facts in the background every this many turns; "
        "they go through the encoding gate (copilot: review queue; an identity always waits for a human). 0: never.",
    ),
    "identity_timeout_seconds": (
        LLM_STEPS,
        "An identity extraction whose reply comes later than this is dropped (nothing written); the turn never waits.",
    ),
    "consolidation_lock_seconds": (
        LLM_STEPS,
        "One consolidation step runs per store at a time (others are skipped); a holder that died frees the "
        "lock after this many seconds.",
    ),
}

NUMBER_DOCS: dict[str, str] = {
    "MEMPAGER_EMBED_PROBE_TIMEOUT": "Seconds the gateway or provider has to answer its boot probe before "
    "`auto` moves on to the next embedder.",
    "MEMPAGER_EMBED_LOCAL_PROBE_TIMEOUT": "Seconds the local model has to load and answer its boot probe "
    "(torch and the weights from a cold disk can take tens of seconds).",
    "MEMPAGER_EMBED_CONNECT_TIMEOUT": "Seconds to connect to the gateway or provider.",
    "MEMPAGER_EMBED_READ_TIMEOUT": "Seconds to wait for the gateway's or provider's answer to one request.",
    "MEMPAGER_EMBED_MAX_ATTEMPTS": "Tries per HTTP request (the first included) to the gateway or provider, "
    "with backoff and Retry-After. The same variable also sets the workers' tries per batch (above).",
    "MEMPAGER_QUERY_CACHE_SIZE": "Recent query vectors the local model keeps per pager (keyed by model and "
    "exact text): a repeated query skips the model. 0 disables the cache.",
}

EDGES: tuple[Setting, ...] = (
    Setting(
        "MEMPAGER_STORE",
        "store",
        DEFAULT_STORE,
        "The store the CLI and `mempager serve` open: a DuckDB file, or a `postgresql://` URL "
        "(`mempager config` masks its password). `--store` wins over it.",
        STORE_GROUP,
        read_by=CLI,
    ),
    Setting(
        "MEMPAGER_ACTOR",
        "actor",
        "default",
        "Whose memories the CLI and `mempager serve` read and write (1-128 letters, digits and `._@:+-`). "
        "`--actor` wins over it.",
        STORE_GROUP,
        read_by=CLI,
    ),
    Setting(
        "MEMPAGER_LOG_LEVEL",
        "log_level",
        "INFO",
        "Level of mempager's own log lines from `mempager serve` (always on stderr): DEBUG, INFO, WARNING, "
        "ERROR or CRITICAL; libraries log at WARNING.",
        LOGGING,
        read_by=SERVER,
    ),
    Setting(
        "MEMPAGER_HTTP_TOKEN",
        "http_token",
        None,
        "The bearer token `mempager serve --http` requires (16+ characters of `A-Za-z0-9-._~+/`); unset, one "
        "is generated into `<store>.http-token` (mode 0600) on the first start. Never shown or logged.",
        STORE_GROUP,
        secret=True,
        read_by=SERVER,
    ),
)
