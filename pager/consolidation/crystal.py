"""The crystallized tier (seed 003): proven patterns held out of the always-loaded context.

A pattern the continuity carries at 3x can *crystallize*: it leaves the pinned continuity, a
one-line menu entry is pinned instead (``crystal_menu_budget_tokens``), and its body comes into
a page only on cue (``recall``): the query shares its distinctive words, or the query matched a
memory the pattern was grounded in (an evidence edge), directly or through one strong
association link (consolidation/associations.py). So the body of proven knowledge can grow
while the always-loaded part stays small.

The continuity is LLM-written, so crystallizing a pattern from it only *proposes*: the proposal
waits in the review queue (kind ``crystal``) until a human accepts it (issue 21 item 9). A human
may also write a crystal directly (``add``, source ``user``). Crystals are per actor, audited
(``crystallize`` / ``forget``), and a forget erases their bytes like a hard forget of a memory.
Words the LLM quoted into a crystal's body stay there when a memory it cites is forgotten, as they
do in a continuity version: forget the crystal too.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime

from mempager.consolidation.cues import terms
from mempager.consolidation.lines import MAX_LEVEL, pattern_key
from mempager.consolidation.validator import previous_patterns
from mempager.consolidation.wrap import Consolidator
from mempager.errors import InvalidInput, MemoryNotFound
from mempager.protocols import Store
from mempager.store.tier_types import Crystal, Evidence, tiers_of
from mempager.types import Snippet
from mempager.validate import check_text

MAX_NAME_BYTES = 1_000
MAX_BODY_BYTES = 20_000
EVIDENCE_VERSIONS = 20  # continuity versions searched for a pattern's citations
DIRECT, LINKED = 2.0, 1.0  # what an evidence edge adds to a crystal's cue score (one hop: less)
# A retrieved memory counts as *matched* by the query (an evidence-edge cue) when the lexical lane
# found it, or the semantic lane at this raw cosine: a page always fills its k places (salience,
# nearest neighbours of anything), and a filler must not cue a crystal.
MATCH_COSINE = 0.5
Graph = Mapping[int, Sequence[tuple[int, float]]]


@dataclass(frozen=True, slots=True)
class CrystalHit:
    crystal: Crystal
    score: float
    why: str  # "words", "evidence" or "association" (the strongest reason)


def matched_labels(snippets: Iterable[Snippet]) -> list[int]:
    """The labels of the snippets the query matched by content (see ``MATCH_COSINE``)."""
    out = []
    for s in snippets:
        semantic = s.lanes.get("semantic")
        if "lexical" in s.lanes or (semantic is not None and semantic.score >= MATCH_COSINE):
            out.append(s.label)
    return out


class Crystals:
    def __init__(
        self,
        store: Store,
        actor: str,
        *,
        consolidation: Consolidator,
        clock: Callable[[], datetime],
        graph: Callable[[], Graph],
        erasing: Callable[[], AbstractContextManager[None]],
    ) -> None:
        self.store = store
        self.tiers = tiers_of(store)
        self.actor = actor
        self.consolidation = consolidation  # the continuity, its schema and the pattern history
        self.clock = clock
        self.graph = graph  # the association lane's links (label -> neighbours), cached there
        self.erasing = erasing  # the Eraser's mark + pass around a delete

    def all(self) -> list[Crystal]:
        return self.tiers.crystals(self.actor)

    # -- crystallizing ---------------------------------------------------------------------------
    def eligible(self) -> list[str]:
        """Names of the continuity's 3x patterns not crystallized yet."""
        done = {c.key for c in self.all()}
        return [
            r.name
            for r in self.consolidation.cstore.patterns(self.actor)
            if r.in_continuity and r.level >= MAX_LEVEL and r.key not in done
        ]

    def crystallize(self, name: str | None = None) -> list[str]:
        """Propose a 3x pattern of the continuity (every eligible one when ``name`` is None) for the
        crystallized tier; the review item ids (one per pattern; a pending proposal is reused)."""
        history = {r.key: r for r in self.consolidation.cstore.patterns(self.actor)}
        done = {c.key for c in self.all()}
        if name is None:
            keys = [pattern_key(n) for n in self.eligible()]
        else:
            key = pattern_key(check_text(name, MAX_NAME_BYTES, "name"))
            record = history.get(key)
            if key in done:
                raise InvalidInput(f"the pattern {name!r} is crystallized already; `mempager crystal list` shows it")
            if record is None or not record.in_continuity or record.level < MAX_LEVEL:
                ready = "; ".join(self.eligible()) or "none yet"
                raise InvalidInput(
                    f"{name!r} is not a 3x pattern of the continuity (only those crystallize); ready: {ready}"
                )
            keys = [key]
        ids = []
        for key in keys:
            record = history[key]
            pending = self.store.review_find(self.actor, "crystal", "key", key)
            if pending is not None:
                ids.append(str(pending.id))
                continue
            body = record.name
            if record.explanations:
                body += ". Grounded in: " + "; ".join(record.explanations)
            payload = {
                "type": "crystal",
                "source": "consolidation",
                "name": record.name,
                "key": key,
                "text": body,
                "evidence": [{"id": e.id, "label": e.label} for e in self._evidence(key)],
            }
            ids.append(self.store.review_add(self.actor, "crystal", payload))
        return ids

    def _evidence(self, key: str) -> list[Evidence]:
        """The memories the pattern cited in recent continuity versions that still exist."""
        schema = self.consolidation.schema()
        cited: dict[str, None] = {}
        for version in self.consolidation.versions(EVIDENCE_VERSIONS):
            line = previous_patterns(version.text, schema).get(key)
            for citation in line.citations if line is not None else ():
                cited.setdefault(citation.id)
        found = [(i, self.store.get(self.actor, i)) for i in cited]
        return [Evidence(i, m.label) for i, m in found if m is not None]

    def accept(self, review_id: str, payload: Mapping[str, object]) -> str:
        """A human accepted a ``crystal`` proposal: the crystal is written and the item closed at once."""
        evidence = payload.get("evidence")
        crystal = Crystal(
            actor=self.actor,
            id=secrets.token_hex(6),
            key=str(payload["key"]),
            name=str(payload["name"]),
            body=str(payload["text"]),
            evidence=tuple(Evidence(str(e["id"]), int(e["label"])) for e in evidence)
            if isinstance(evidence, list)
            else (),
            source="consolidation",
            created_at=self.clock(),
        )
        return self.tiers.add_crystal(crystal, review_id).uri

    def add(self, name: str, body: str | None = None) -> Crystal:
        """A crystal written by a human (source ``user``): no review, no evidence."""
        name = check_text(name, MAX_NAME_BYTES, "name")
        text = name if body is None else check_text(body, MAX_BODY_BYTES, "body")
        crystal = Crystal(self.actor, secrets.token_hex(6), pattern_key(name), name, text, (), "user", self.clock())
        return self.tiers.add_crystal(crystal)

    def forget(self, which: str | None) -> list[Crystal]:
        """Delete one crystal (by id, uri or name), or every one of the actor's (None), under the erasure mark."""
        if which is None:
            ids = None
        else:
            wanted = which.strip().rsplit("/", 1)[-1] if which.startswith("crystal://") else which.strip()
            key = pattern_key(wanted)
            ids = [c.id for c in self.all() if c.id == wanted or c.key == key]
            if not ids:
                raise MemoryNotFound(
                    f"no crystal {which!r} for actor {self.actor!r}; `mempager crystal list` shows them"
                )
        with self.erasing():
            return self.tiers.delete_crystals(self.actor, ids)

    # -- recall on cue ----------------------------------------------------------------------------
    def recall(self, query: str, k: int = 3, matched: Iterable[int] = ()) -> list[CrystalHit]:
        """Crystals ``query`` cues, best first: by its distinctive words (idf over this actor's
        crystals, so a word every crystal shares counts for little), and by evidence edges to the
        memories the query matched (``matched``: their labels), directly or one link away."""
        crystals = self.all()
        if not crystals or k <= 0:
            return []
        docs = [(c, terms(c.name), terms(f"{c.name} {c.body}")) for c in crystals]
        n = len(docs)
        df: dict[str, int] = {}
        for _, _, words in docs:
            for t in words:
                df[t] = df.get(t, 0) + 1
        wanted = terms(query)
        seeds = set(matched)
        near = {other for label in seeds for other, _ in self.graph().get(label, ())} - seeds if seeds else set()
        hits = []
        for crystal, name_terms, words in docs:
            shared = wanted & words
            score = sum(math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in shared)
            lexical = len(shared & name_terms) >= min(2, len(name_terms)) > 0 or len(shared) >= 3
            labels = {e.label for e in crystal.evidence}
            why = "words" if lexical else ""
            if labels & seeds:
                score, why = score + DIRECT, why or "evidence"
            elif labels & near:
                score, why = score + LINKED, why or "association"
            if why:
                hits.append(CrystalHit(crystal, round(score, 6), why))
        hits.sort(key=lambda h: (-h.score, h.crystal.created_at, h.crystal.id))
        return hits[:k]
