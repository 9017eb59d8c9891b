"""Procedural memory: pattern writes, ranking, feedback attribution and the lifecycle sweep.

Nothing here deletes a memory: deprecation and flags are metadata, and removal is always an
explicit ``forget``. Inversions are proposed to the ``ReviewQueue``, never applied silently.
"""

from __future__ import annotations

import difflib
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

import numpy as np

from mempager.config import PagerConfig
from mempager.errors import InvalidInput, MemoryNotFound
from mempager.patterns import Pattern, PatternSpec
from mempager.procedural import lifecycle
from mempager.procedural.review import ReviewQueue
from mempager.protocols import Embedder, Store
from mempager.types import Memory, MemoryType, NewMemory, PutResult
from mempager.validate import check_text, parse_uri
from mempager.writing.build import MemoryBuilder, fields_of

_WORD = re.compile(r"[\w][\w.:/@#+-]*[\w]|[\w]")
_STOP = frozenset(
    "a an and are as at be by do for from has have how i in is it me my of on or the to was "
    "what when where which who why with you your".split()
)
OUTCOMES = ("success", "failure")
RANKINGS = ("confidence", "thompson")


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.casefold()) if w not in _STOP and len(w) > 1}


class LabelResolved(UserWarning):
    """recall_pattern resolved a misspelt label to the closest existing one."""


class Procedures:
    """This actor's learned procedures. ``ranking`` is how pages rank them ("confidence" |
    "thompson") and ``seed`` seeds the Thompson draws (None: fresh entropy); both per pager, so a
    benchmark or an agent can explore without touching the shared config."""

    def __init__(
        self,
        store: Store,
        actor: str,
        config: PagerConfig,
        *,
        clock: Callable[[], datetime],
        embedder: Callable[[], Embedder],
        build: MemoryBuilder,
        review: ReviewQueue,
        after_write: Callable[[Sequence[PutResult]], None],
    ) -> None:
        self.store = store
        self.actor = actor
        self.config = config
        self.clock = clock
        self.embedder = embedder  # the semantic lane's current embedder (it may change while open)
        self.build = build
        self.review = review
        self.after_write = after_write
        self.ranking = "confidence"
        self.seed: int | None = None
        self._trigger_cache: dict[tuple[str, str], np.ndarray] = {}
        self._rng: tuple[int | None, np.random.Generator] | None = None

    # -- procedural -------------------------------------------------------------------------
    def write_pattern(
        self, spec: PatternSpec, strength: float = 0.5, coverage: int = 1, derived_from: Sequence[str] = ()
    ) -> str:
        if not isinstance(spec, PatternSpec):
            raise InvalidInput(f"spec must be a PatternSpec, got {type(spec).__name__}")
        if isinstance(coverage, bool) or not isinstance(coverage, int) or coverage < 0:
            raise InvalidInput(f"coverage must be an integer >= 0, got {coverage!r}")
        maturity = "nascent"
        for _ in range(2):  # an explicit state may already be established or proven
            maturity = lifecycle.next_maturity(maturity, strength, coverage, self.config)
        item = self.build(
            MemoryType.PATTERN,
            spec.encode(),
            strength=strength,
            confidence=strength,
            metadata={
                "coverage": coverage,
                "applications": coverage,
                "failures": 0,
                "maturity": maturity,
                "derived_from": list(derived_from),
                "status": "active",
                "last_applied_at": self.clock().isoformat() if coverage else None,
            },
        )
        result = self.store.put(NewMemory(**{**fields_of(item), "dedup_key": spec.dedup_key()}))
        if not result.created:  # an explicit write states the pattern as given
            self.store.update(
                self.actor,
                result.memory.id,
                text=spec.encode(),
                strength=item.strength,
                confidence=item.confidence,
                metadata=item.metadata,
            )
        self.after_write([result])
        return result.memory.uri

    def reinforce_pattern(self, spec: PatternSpec, derived_from: Sequence[str] = ()) -> str:
        """Another success: coverage +1, confidence +success_increment, strength nudged up.

        Dedup by name → trigger → steps; fields the new spec leaves empty keep their values.
        """
        if not isinstance(spec, PatternSpec):
            raise InvalidInput(f"spec must be a PatternSpec, got {type(spec).__name__}")
        existing = self.find_pattern(spec)
        if existing is None:
            return self.write_pattern(spec, strength=0.5, coverage=1, derived_from=derived_from)
        pattern = Pattern.from_memory(existing)
        if derived_from:
            meta = dict(existing.metadata)
            meta["derived_from"] = sorted(set(meta.get("derived_from", [])) | set(derived_from))
            pattern = Pattern.from_memory(self.store.update(self.actor, existing.id, metadata=meta))
        updated = self.apply_evidence(pattern, "success", spec)
        self.after_write([PutResult(updated.memory, created=False)])
        return updated.uri

    def learn_rule(self, text: str, derived_from: Sequence[str] = ()) -> str:
        """A rule that came from experience: a one-step pattern with the same lifecycle.

        (Rules the user states are inviolable and pinned: use ``add_rule`` for those.)
        """
        body = check_text(text, self.config.max_text_bytes, "rule")
        return self.reinforce_pattern(PatternSpec(name=body.strip()[:120], steps=[body.strip()]), derived_from)

    def find_pattern(self, spec: PatternSpec) -> Memory | None:
        return self.store.find(self.actor, MemoryType.PATTERN, spec.dedup_key())

    # -- reading ------------------------------------------------------------------------------
    def patterns(self, include_inactive: bool = False) -> list[Pattern]:
        """Every pattern of this actor with its decayed confidence as of now."""
        now = self.clock()
        out = []
        for memory in self.store.of_types(self.actor, [MemoryType.PATTERN], "oldest"):
            pattern = Pattern.from_memory(memory)
            pattern = replace(pattern, decayed_confidence=lifecycle.decayed_confidence(pattern, now, self.config))
            pattern = replace(pattern, stage=lifecycle.stage(pattern, self.config))
            if include_inactive or pattern.status == "active":
                out.append(pattern)
        return out

    def pattern_stages(self) -> dict[str, int]:
        """How many of this actor's patterns are at each lifecycle stage (``stats()`` shows it)."""
        counts = dict.fromkeys(lifecycle.STAGES, 0)
        for pattern in self.patterns(include_inactive=True):
            counts[pattern.stage] += 1
        return counts

    def _relevance(self, goal: str, candidates: Sequence[Pattern]) -> list[float]:
        """Half semantic (cosine of goal and trigger), half lexical (trigger words in the goal)."""
        if not candidates:
            return []
        texts = [f"{p.spec.name}. {p.spec.trigger}".strip() for p in candidates]
        goal_vector = self.embedder().embed([goal], role="query")[0]
        cos = np.clip(self._trigger_vectors(texts) @ goal_vector, 0.0, 1.0)
        goal_words = words(goal)
        lexical = [len(goal_words & words(t)) / max(1, len(words(t))) for t in texts]
        return [0.5 * float(c) + 0.5 * lx for c, lx in zip(cos, lexical, strict=True)]

    def _trigger_vectors(self, texts: Sequence[str]) -> np.ndarray:
        """Trigger embeddings, computed once per text and model (a page must not re-embed them)."""
        embedder = self.embedder()
        cache = self._trigger_cache
        missing = [t for t in dict.fromkeys(texts) if (embedder.name, t) not in cache]
        if missing:
            for text, vector in zip(missing, embedder.embed(missing, role="document"), strict=True):
                cache[(embedder.name, text)] = vector
        return np.stack([cache[(embedder.name, t)] for t in texts])

    def procedural(
        self, goal: str, *, rank: str | None = None, seed: int | None = None, include_menu: bool = False
    ) -> list[Pattern]:
        """Injectable patterns (≥ min_pattern_successes successes) matching ``goal``, best first.

        ``rank="confidence"`` orders by decayed confidence × relevance; ``rank="thompson"`` by a
        draw from Beta(successes + 1, failures + 1) × relevance (``seed`` makes one call
        reproducible; without it the draws come from the pager's generator, seeded by
        ``seed``). ``rank=None`` is ``ranking``, which pages use.
        """
        goal = check_text(goal, self.config.max_text_bytes, "goal")
        rank = self.ranking if rank is None else rank
        if rank not in RANKINGS:
            raise InvalidInput(f"rank must be 'confidence' or 'thompson', got {rank!r}")
        pool = [p for p in self.patterns() if not p.anti_pattern and p.successes >= self.config.min_pattern_successes]
        relevance = self._relevance(goal, pool)
        rng = np.random.default_rng(seed) if seed is not None else self._ranking_rng()
        scored = []
        for pattern, rel in zip(pool, relevance, strict=True):
            if rel < self.config.min_pattern_relevance:
                continue
            base = (
                float(rng.beta(pattern.successes + 1, pattern.failures + 1))
                if rank == "thompson"
                else pattern.decayed_confidence
            )
            scored.append((base * rel, pattern))
        scored.sort(key=lambda item: (-item[0], item[1].memory.label))
        return [p for _, p in scored]

    def _ranking_rng(self) -> np.random.Generator:
        """One generator per pager and seed: successive pages draw afresh, reproducibly when seeded."""
        held = self._rng
        if held is None or held[0] != self.seed:
            held = self._rng = (self.seed, np.random.default_rng(self.seed))
        return held[1]

    def anti_patterns(self, goal: str) -> list[Pattern]:
        pool = [p for p in self.patterns() if p.anti_pattern]
        relevance = self._relevance(goal, pool)
        hits = [(rel, p) for p, rel in zip(pool, relevance, strict=True) if rel >= self.config.min_pattern_relevance]
        return [p for _, p in sorted(hits, key=lambda item: (-item[0], item[1].memory.label))]

    def recall_pattern(self, label: str) -> Pattern:
        """One pattern in full by label; a typo resolves to the closest label, with a warning."""
        label = check_text(label, 10_000, "label")
        patterns = self.patterns(include_inactive=True)
        by_label = {p.label.casefold(): p for p in reversed(patterns)}
        wanted = " ".join(label.split()).casefold()
        if wanted in by_label:
            return by_label[wanted]
        close = difflib.get_close_matches(wanted, list(by_label), n=1, cutoff=0.6)
        if not close:
            known = ", ".join(sorted(p.label for p in patterns)[:20]) or "none yet"
            raise MemoryNotFound(f"no pattern labelled {label!r}; known labels: {known}")
        resolved = by_label[close[0]]
        note = f"no pattern labelled {label!r}; resolved to the closest label {resolved.label!r}"
        warnings.warn(note, LabelResolved, stacklevel=2)
        return replace(resolved, note=note)

    # -- evidence -----------------------------------------------------------------------------
    def apply_evidence(self, pattern: Pattern, outcome: str, spec: PatternSpec | None = None) -> Pattern:
        confidence, meta = lifecycle.apply(pattern, lifecycle.Evidence(outcome, self.clock()), self.config)
        changes: dict[str, Any] = {"confidence": confidence, "metadata": meta}
        if outcome == "success":
            changes["strength"] = pattern.strength + 0.1 * (1.0 - pattern.strength)
        if spec is not None:
            changes["text"] = pattern.spec.merged_with(spec).encode()
        op = "reinforce" if spec is not None else "feedback"
        updated = Pattern.from_memory(self.store.update(self.actor, pattern.memory.id, op=op, **changes))
        if outcome == "failure":
            self.review.propose_inversion(updated)
        return updated

    def feedback(self, turn: str, outcome: str, *, used: Sequence[str] | None = None) -> int:
        """Apply success/failure to the patterns the page injected for ``turn``.

        ``used`` (labels or uris) narrows the credit to the injected procedures the agent actually
        followed, so a procedure shown beside the one that worked (or failed) is not credited with
        its outcome; by default every injected pattern is. Idempotent: the same feedback for the
        same turn twice changes nothing the second time. Returns how many patterns were updated.
        """
        turn = check_text(turn, 1_000, "turn")
        if outcome not in OUTCOMES:
            raise InvalidInput(f"feedback outcome must be 'success' or 'failure', got {outcome!r}")
        injected: list[Pattern] = []
        for uri, kind in self.store.injections(self.actor, turn):
            if kind != "pattern":
                continue
            memory = self.store.get(self.actor, parse_uri(uri)[2])
            if memory is not None:  # a pattern forgotten since the turn has nothing to credit
                injected.append(Pattern.from_memory(memory))
        chosen = injected if used is None else _followed(injected, used, turn)
        if not self.store.claim_feedback(self.actor, turn, outcome):
            return 0
        for pattern in chosen:
            self.apply_evidence(pattern, outcome)
        return len(chosen)

    # -- maintenance --------------------------------------------------------------------------
    def sweep(self) -> dict[str, int]:
        """Decay, promote/demote one level, flag removal candidates, propose inversions."""
        counts = {"promoted": 0, "demoted": 0, "flagged_for_removal": 0, "inversions_proposed": 0}
        order = {"nascent": 0, "established": 1, "proven": 2}
        for pattern in self.patterns():
            if pattern.anti_pattern:
                continue
            decayed = pattern.decayed_confidence
            maturity = lifecycle.next_maturity(pattern.maturity, decayed, pattern.applications, self.config)
            flag = None
            if decayed < 0.1 and pattern.failures > pattern.successes:
                flag = "removal"
                counts["flagged_for_removal"] += 1
            elif decayed < 0.2:
                flag = "demotion"
            meta = pattern.memory.metadata
            if maturity != pattern.maturity or flag != meta.get("flagged"):
                key = "promoted" if order[maturity] > order[pattern.maturity] else "demoted"
                if maturity != pattern.maturity:
                    counts[key] += 1
                self.store.update(
                    self.actor, pattern.memory.id, metadata={**meta, "maturity": maturity, "flagged": flag}
                )
            counts["inversions_proposed"] += self.review.propose_inversion(pattern)
        return counts

    def drop_caches(self) -> None:
        """Forget the trigger embeddings: a forgotten pattern's trigger must not linger in the process."""
        self._trigger_cache = {}


def _followed(injected: Sequence[Pattern], used: Sequence[str], turn: str) -> list[Pattern]:
    """The injected patterns named in ``used`` (by uri or label); InvalidInput naming any other."""
    if isinstance(used, str) or not all(isinstance(u, str) for u in used):
        raise InvalidInput("used must be a list of pattern labels or uris, e.g. used=['cut a release']")
    by_name = {p.uri: p for p in injected} | {p.label.casefold(): p for p in injected}
    unknown = [u for u in used if u not in by_name and u.casefold() not in by_name]
    if unknown:
        offered = ", ".join(sorted(p.label for p in injected)) or "none"
        raise InvalidInput(f"used names {unknown} that turn {turn!r}'s page did not inject (it injected: {offered})")
    chosen = {id(p): p for u in used for p in [by_name.get(u) or by_name[u.casefold()]]}
    return list(chosen.values())
