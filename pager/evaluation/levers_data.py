"""The levers harness's data: the calls measured, the vectors, the corpus, the knobs, the outcome.

``Knobs()`` is the baseline, the product before issue 19; ``PRODUCT`` is what the product runs
now, read from its own defaults (``product_knobs``). See ``mempager.evaluation.levers``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from mempager.evaluation.evalkit import BUDGETS, KS, Setting
from mempager.evaluation.locomo import Conversation
from mempager.fence import render_line
from mempager.protocols import Embedder
from mempager.tokens import estimate_tokens
from mempager.types import FloatMatrix, MemoryType, NewMemory, Role
from mempager.validate import make_uri

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]

# What retrieve runs (PagerConfig defaults): lane depth, default budget of an R@k call.
LANE_DEPTH = 50
DEFAULT_BUDGET = 6000
MIN_TRUNCATED_TOKENS = 32  # lanes.fusion: below this much room a truncated first snippet is dropped
K1, B = 1.2, 0.5  # index.lexical defaults before issue 19 (the baseline's)


def lane_depth(s: Setting) -> int:
    """``Retriever.depth``: how deep every lane looks for the call ``s``."""
    return max(LANE_DEPTH, 2 * min(s.k, s.budget // 8))


SETTINGS = tuple(Setting("at_k", k, k, DEFAULT_BUDGET) for k in KS) + tuple(
    Setting("at_budget", b, b, b) for b in BUDGETS
)


# -- vectors: computed once with the packaged model, kept in a file --------------------------------


class VectorCache:
    """Vectors by sha256 of the text (MiniLM has no per-role prompt), saved to ``path`` (.npz).

    ``make`` builds the real embedder on the first miss only, so a warm cache never loads torch.
    """

    def __init__(self, path: Path, name: str, make: Callable[[], Embedder] | None = None) -> None:
        self.path, self.name, self._make = path, name, make
        self._embedder: Embedder | None = None
        self._rows: dict[str, int] = {}
        self._vectors = np.zeros((0, 0), np.float32)
        if path.exists():
            with np.load(path, allow_pickle=False) as saved:
                if str(saved["name"]) == name:
                    keys = [str(k) for k in saved["keys"]]
                    self._vectors = np.asarray(saved["vectors"], np.float32)
                    self._rows = {k: i for i, k in enumerate(keys)}

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def get(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        keys = [self.key(t) for t in texts]
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys, strict=True) if k not in self._rows))
        if missing:
            if self._embedder is None:
                if self._make is None:
                    raise KeyError(f"{len(missing)} texts have no cached vector and no embedder was given")
                self._embedder = self._make()
            fresh = np.asarray(self._embedder.embed(missing), np.float32)
            base = len(self._vectors)
            self._vectors = fresh if not base else np.concatenate([self._vectors, fresh])
            self._rows.update({self.key(t): base + i for i, t in enumerate(missing)})
            self.save()
        return self._vectors[[self._rows[k] for k in keys]]

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp.npz")
        keys = sorted(self._rows, key=self._rows.__getitem__)
        np.savez(tmp, name=np.array(self.name), keys=np.array(keys), vectors=self._vectors)
        tmp.replace(self.path)


class CachedEmbedder:
    """An ``Embedder`` answering from a ``VectorCache`` (the real model only for what it lacks)."""

    def __init__(self, cache: VectorCache, dim: int = 384) -> None:
        self.cache, self._dim = cache, dim

    @property
    def name(self) -> str:
        return self.cache.name

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: Sequence[str], role: Role = "document") -> FloatMatrix:
        return self.cache.get(list(texts))


# -- the corpus, per conversation ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Query:
    text: str
    category: int
    evidence: Ints  # turn positions


@dataclass(frozen=True, slots=True)
class Conv:
    """One conversation as the harness sees it: turn i is the memory with the i-th label."""

    sample_id: str
    texts: tuple[str, ...]  # what the page shows (and, by default, what both lanes index)
    session: Ints  # session number of each turn
    created: tuple[datetime, ...]
    cost: Ints  # tokens of each turn's rendered page line
    floor: int  # the cheapest line there can be (``Retriever._floor``)
    prefix: Ints  # tokens of each turn's line with no text (what truncation cannot cut)
    questions: tuple[Query, ...]
    vectors: npt.NDArray[np.float32]  # MiniLM of each text
    qvectors: npt.NDArray[np.float32]  # MiniLM of each question

    @property
    def n(self) -> int:
        return len(self.texts)


def actor_of(sample_id: str) -> str:
    """The actor evalkit opens for a conversation."""
    return "".join(ch if ch.isalnum() else "-" for ch in sample_id) or "conv"


def prepare(conversations: Sequence[Conversation], cache: VectorCache) -> list[Conv]:
    """Turns, sessions, line costs and vectors of every conversation (vectors from the cache)."""
    source = NewMemory.__dataclass_fields__["source"].default.value
    shortest = min(MemoryType, key=lambda t: len(t.value))
    out = []
    for conv in conversations:
        actor = actor_of(conv.sample_id)
        uri = make_uri(actor, MemoryType.EVENT, "0" * 16)  # ids are 16 hex digits: every uri is as long
        texts = tuple(t.memory_text() for t in conv.turns)
        index = {t.dia_id: i for i, t in enumerate(conv.turns)}
        lines = [render_line(t.created_at, source, uri, text) + "\n" for t, text in zip(conv.turns, texts, strict=True)]
        prefix = [render_line(t.created_at, source, uri, "", True) + "\n" for t in conv.turns]
        floor = estimate_tokens(render_line(datetime.min, source, make_uri(actor, shortest, "0" * 16), "") + "\n")
        questions = tuple(
            Query(q.text, q.category, np.array(sorted(index[e] for e in q.evidence), np.int64)) for q in conv.questions
        )
        out.append(
            Conv(
                conv.sample_id,
                texts,
                np.array([int(t.dia_id[1:].split(":")[0]) for t in conv.turns], np.int64),
                tuple(t.created_at for t in conv.turns),
                np.array([estimate_tokens(x) for x in lines], np.int64),
                floor,
                np.array([estimate_tokens(x) for x in prefix], np.int64),
                questions,
                cache.get(texts),
                cache.get([q.text for q in questions]),
            )
        )
    return out


# -- the knobs -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Knobs:
    """One configuration of the lanes, fusion and expansion; the defaults are the baseline (the product
    before issue 19: light stemming, k1 1.2, b 0.5, BM25 over the own text, no time lane)."""

    # lexical lane: what BM25 indexes for a memory
    stem: str = "light"  # "light" (index.tokenize today) | "snowball" (PyStemmer English)
    lex_before: int = 0  # turns of the same session before it folded into its BM25 keys
    lex_after: int = 0  # ... and after it
    lex_decay: float = 1.0  # a neighbour d turns away counts decay**d of its term frequencies
    lex_own_df: bool = False  # idf from the memories' own texts instead of their keys
    # terms held by more than min(max(share * N, 8), 512) own texts score on own text, own df and own
    # average length (index.lexical_context.spread_terms); 1.0: every term on the context keys
    lex_ctx_share: float = 1.0
    date_keys: bool = False  # the session date's words ("8 May 2023") folded into the BM25 keys
    k1: float = K1
    b: float = B
    # lexical lane: pseudo-relevance feedback (RM3)
    prf_docs: int = 0  # feedback documents (0: off)
    prf_terms: int = 10  # expansion terms kept
    prf_weight: float = 0.5  # share of the expansion in the query model
    prf_source: str = "lexical"  # feedback from the lexical ranking, or from the fused one
    # semantic lane: what the vector index holds for a memory
    sem_before: int = 0
    sem_after: int = 0
    sem_alpha: float = 0.0  # v + alpha * sum decay**(d-1) * v_neighbour, renormalised
    sem_decay: float = 1.0
    sem_window_text: float = 0.0  # share of the vector of the window's text (prev + turn + next);
    # when > 0 it replaces the averaging above
    # fusion
    fusion: str = "score"  # score | maxsem | minmax | zscore | mnz | rrf
    w_sem: float = 0.5
    w_lex: float = 0.5
    floor: float = 0.1
    rrf_k: int = 60
    sem_depth: float = 1.0  # each lane's depth, as a multiple of what retrieve searches
    lex_depth: float = 1.0
    # session- and time-aware expansion, after the first stage
    sess_boost: float = 0.0  # + boost * max(f) * S(session) / max S
    sess_top: int = 1  # S = sum of the session's top fused scores (how many)
    sess_tau: float = 0.0  # > 0: S smoothed over sessions by exp(-|days apart| / tau)
    sess_add: int = 0  # every turn of the best N sessions becomes a candidate
    nb_boost: float = 0.0  # + boost * max(f of the turns right before and after, same session)
    # redundancy: a turn with a better-scored turn of its session within dup_window loses
    # dup_penalty * max(f) (neighbour-folded keys make adjacent turns score alike)
    dup_penalty: float = 0.0
    dup_window: int = 1
    # temporal expressions in the query, against memory timestamps
    time_boost: float = 0.0  # + boost * max(f) for a memory inside a resolved date range
    time_abs: float = 0.0  # + this (a fused lane of weight time_abs scoring 1 inside the range)
    time_before: int = 0  # days of slack before the range
    time_after: int = 0  # ... and after it (an event is often told a few days later)
    # the speaker lane (index.speakers): + this for a candidate whose speaker the query names
    speaker: float = 0.0

    def changed(self) -> dict[str, Any]:
        """The knobs that differ from the baseline."""
        base = Knobs()
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != getattr(base, f.name)}

    def lex_key(self) -> tuple[Any, ...]:
        return (
            self.stem,
            self.lex_before,
            self.lex_after,
            self.lex_decay,
            self.date_keys,
            self.k1,
            self.b,
            self.lex_own_df,
            self.lex_ctx_share,
        )

    def sem_key(self) -> tuple[Any, ...]:
        return (self.sem_before, self.sem_after, self.sem_alpha, self.sem_decay, self.sem_window_text)


BASELINE = Knobs()


def product_knobs() -> Knobs:
    """The product's defaults after issue 19, read from the product itself: Snowball stemming,
    BM25 k1/b, context keys (2 neighbours each side of the episode at decay 0.5) for the terms
    at most SPREAD_SHARE of the memories hold, the time lane's absolute weight and slack."""
    from mempager.config import PagerConfig
    from mempager.index.lexical import LexicalIndex
    from mempager.index.lexical_context import SPREAD_SHARE
    from mempager.index.tokenize import TokenizerConfig

    config, index = PagerConfig(), LexicalIndex()
    context = config.context()
    weights = config.lane_weights
    return Knobs(
        stem=TokenizerConfig().stem,
        lex_before=context.window,
        lex_after=context.window,
        lex_decay=context.decay if context.window else 1.0,
        lex_ctx_share=SPREAD_SHARE if context.window else 1.0,
        k1=index.k1,
        b=index.b,
        w_sem=weights["semantic"],
        w_lex=weights["lexical"],
        floor=config.semantic_floor,
        time_abs=weights.get("time", 0.0),
        time_after=config.time_after_days if weights.get("time", 0.0) else 0,
        speaker=weights.get("speaker", 0.0),
    )


PRODUCT = product_knobs()


@dataclass
class Outcome:
    """Per question (all conversations, in order): recall at each of ``SETTINGS``."""

    recall: Floats  # (questions, settings)
    category: Ints
    conv: Ints  # conversation index of each question
    found: list[list[frozenset[int]]] = field(default_factory=list)  # per question, per setting
