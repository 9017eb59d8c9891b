"""Procedural memory on the Pager: ranking, feedback attribution, sweeps, inversions, review.

Mixed into ``Pager``. Nothing here deletes a memory: deprecation and flags are metadata, and
removal is always an explicit ``forget``.
"""

from __future__ import annotations

import difflib
import logging
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

import numpy as np

from mempager.procedural import lifecycle
from mempager.config import PagerConfig
from mempager.errors import InvalidInput, MemoryNotFound
from mempager.procedural.patterns import Pattern, PatternSpec
from mempager.protocols import Embedder, Store
from mempager.store.journal import Deprecate, ReviewItem
from mempager.types import MemoryType, NewMemory, Scope, Source
from mempager.validate import check_text, parse_time, parse_uri

log = logging.getLogger("mempager.procedural")
_WORD = re.compile(r"[\w][\w.:/@#+-]*[\w]|[\w]")
_STOP = frozenset(
    "a an and are as at be by do for from has have how i in is it me my of on or the to was "
    "what when where which who why with you your".split()
)
OUTCOMES = ("success", "failure")


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.casefold()) if w not in _STOP and len(w) > 1}


class LabelResolved(UserWarning):
    """recall_pattern resolved a misspelt label to the closest existing one."""


class ProceduralMixin:
    store: Store
    actor: str
    config: PagerConfig
    clock: Callable[[], datetime]
    # How pages rank procedures ("confidence" | "thompson"), and the seed of the Thompson draws
    # when no seed is passed (None: fresh entropy). Per pager, so a benchmark or an agent can
    # explore without touching the shared config.
    pattern_ranking: str = "confidence"
    pattern_seed: int | None = None

    def _embedder(self) -> Embedder:  # pragma: no cover - Pager
        raise NotImplementedError

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
        goal_vector = self._embedder().embed([goal], role="query")[0]
        cos = np.clip(self._trigger_vectors(texts) @ goal_vector, 0.0, 1.0)
        goal_words = words(goal)
        lexical = [len(goal_words & words(t)) / max(1, len(words(t))) for t in texts]
        return [0.5 * float(c) + 0.5 * lx for c, lx in zip(cos, lexical, strict=True)]

    def _trigger_vectors(self, texts: Sequence[str]) -> np.ndarray:
        """Trigger embeddings, computed once per text and model (a page must not re-embed them)."""
        embedder = self._embedder()
        cache: dict[tuple[str, str], np.ndarray] = self.__dict__.setdefault("_trigger_cache", {})
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
        ``pattern_seed``). ``rank=None`` is ``pattern_ranking``, which pages use.
        """
        goal = check_text(goal, self.config.max_text_bytes, "goal")
        rank = self.pattern_ranking if rank is None else rank
        if rank not in ("confidence", "thompson"):
            raise InvalidInput(f"rank must be 'confidence' or 'thompson', got {rank!r}")
        pool = [p for p in self.patterns() if not p.anti_pattern and p.successes >= self.config.min_pattern_successes]
        relevance = self._relevance(goal, pool)
        rng = np.random.default_rng(seed) if seed is not None else self._ranking_rng()
        scored = []
        for pattern, rel in zip(pool, relevance, strict=True):
            if rel < self.config.min_pattern_relevance:
                continue
            base = (float(rng.beta(pattern.successes + 1, pattern.failures + 1)) if rank == "thompson"
                    else pattern.decayed_confidence)
            scored.append((base * rel, pattern))
        scored.sort(key=lambda item: (-item[0], item[1].memory.label))
        return [p for _, p in scored]

    def _ranking_rng(self) -> np.random.Generator:
        """One generator per pager and seed: successive pages draw afresh, reproducibly when seeded."""
        held: tuple[int | None, np.random.Generator] | None = self.__dict__.get("_thompson_rng")
        if held is None or held[0] != self.pattern_seed:
            held = (self.pattern_seed, np.random.default_rng(self.pattern_seed))
            self.__dict__["_thompson_rng"] = held
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
    def _apply_evidence(self, pattern: Pattern, outcome: str, spec: PatternSpec | None = None) -> Pattern:
        confidence, meta = lifecycle.apply(pattern, lifecycle.Evidence(outcome, self.clock()), self.config)
        changes: dict[str, Any] = {"confidence": confidence, "metadata": meta}
        if outcome == "success":
            changes["strength"] = pattern.strength + 0.1 * (1.0 - pattern.strength)
        if spec is not None:
            changes["text"] = pattern.spec.merged_with(spec).encode()
        op = "reinforce" if spec is not None else "feedback"
        updated = Pattern.from_memory(self.store.update(self.actor, pattern.memory.id, op=op, **changes))
        if outcome == "failure":
            self._maybe_propose_inversion(updated)
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
            self._apply_evidence(pattern, outcome)
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
                self.store.update(self.actor, pattern.memory.id,
                                  metadata={**meta, "maturity": maturity, "flagged": flag})
            counts["inversions_proposed"] += self._maybe_propose_inversion(pattern)
        return counts

    def _maybe_propose_inversion(self, pattern: Pattern) -> int:
        if pattern.anti_pattern or not lifecycle.inversion_due(pattern.successes, pattern.failures, self.config):
            return 0
        if self.store.review_find(self.actor, "inversion", "uri", pattern.uri) is not None:
            return 0
        self.store.review_add(self.actor, "inversion", {"uri": pattern.uri, "text": lifecycle.inversion_text(pattern)})
        log.info("proposed inversion of %s (%d failures vs %d successes)", pattern.uri, pattern.failures,
                 pattern.successes)
        return 1

    # -- review queue -------------------------------------------------------------------------
    def review(self, status: str | None = "pending") -> list[ReviewItem]:
        return self.store.review_list(self.actor, status)

    def decide(self, review_id: str, accept: bool) -> str | None:
        """Accept or reject a queued item; returns the uri written when accepted.

        Accepting writes the memory (or the anti-pattern, deprecating the original) and closes the
        item in one store transaction: a crash leaves the item pending with nothing written, so
        deciding again cannot duplicate. A decided item keeps no text (see ``store_journal``).
        """
        item = self.store.review_get(self.actor, review_id)
        if item.status != "pending":
            raise InvalidInput(f"review item {review_id!r} was already {item.status}")
        if not accept or item.kind not in ("memory", "inversion"):
            self.store.review_close(self.actor, review_id, "accepted" if accept else "rejected", None)
            return None
        deprecate = None
        if item.kind == "inversion":
            new, deprecate = self._inversion_plan(item)
        else:
            new = queued_memory(self.actor, item.payload)
        result = self.store.review_accept(self.actor, review_id, new, deprecate)
        self._after_write([result])
        return result.memory.uri

    def _after_write(self, results: Sequence[Any]) -> None:  # pragma: no cover - Pager
        raise NotImplementedError

    def _inversion_plan(self, item: ReviewItem) -> tuple[NewMemory, Deprecate]:
        """The anti-pattern to write and how to deprecate the pattern it inverts."""
        _, _, memory_id = parse_uri(item.payload["uri"])
        original = self.store.get(self.actor, memory_id)
        if original is None:
            raise MemoryNotFound(f"the pattern {item.payload['uri']} to invert no longer exists")
        pattern = Pattern.from_memory(original)
        spec = PatternSpec(name=str(item.payload["text"]), trigger=pattern.spec.trigger,
                           steps=pattern.spec.steps, gotchas=pattern.spec.gotchas)
        new = NewMemory(actor=self.actor, type=MemoryType.PATTERN, text=spec.encode(), source=Source.CONSOLIDATION,
                        confidence=0.5, metadata={"anti_pattern": True, "inverted_from": pattern.uri,
                                                  "coverage": 0, "maturity": "nascent"},
                        dedup_key=spec.dedup_key())
        return new, (memory_id, {"confidence": 0.0, "metadata": {**original.metadata, "status": "deprecated"}})

    def _drop_pattern_caches(self) -> None:
        """Forget the trigger embeddings: a forgotten pattern's trigger must not linger in the process."""
        self.__dict__.pop("_trigger_cache", None)


def queued_memory(actor: str, payload: Mapping[str, Any]) -> NewMemory:
    """The memory the encoding gate held back, with every field it was given."""
    created = payload.get("created_at")
    return NewMemory(
        actor=actor, type=MemoryType(payload["type"]), text=payload["text"], source=Source(payload["source"]),
        scope=Scope(payload.get("scope", Scope.GLOBAL.value)), confidence=float(payload["confidence"]),
        importance=float(payload["importance"]), strength=float(payload.get("strength", 0.5)),
        created_at=None if created is None else parse_time(created, "created_at"),
        tags=tuple(payload.get("tags", ())), metadata=dict(payload.get("metadata", {})),
    )


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
