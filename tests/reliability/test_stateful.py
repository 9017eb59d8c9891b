"""Stateful model test: random sequences of pager operations against a plain-Python model.

The model is a dict per actor of uri -> (type, text). Texts are built from a small lowercase word
pool joined by single spaces, so the store's dedup normalisation (case, whitespace, trailing
punctuation) is the identity on them and "same type and same text" is exactly "deduplicated".
After every step the current actor's memories equal its model (read from the in-process mirror,
which every lane serves from; through recall's SQL on every recall step, actor switch, reopen and
at the end of each example), nothing any read returns belongs to another actor, and no forgotten
uri is ever returned by retrieve, recall or get. Every example runs exactly ``STEPS`` rule steps
after opening (counted and asserted).
"""

from __future__ import annotations

import os
import random
import re
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import mempager
from mempager import InvalidInput, MemoryNotFound, PatternSpec
from mempager.embedders.hashing import HashEmbedder
from mempager.types import MemoryType

from .conftest import HASH, assert_index_consistent, record, timed

MAX_EXAMPLES = int(os.environ.get("MEMPAGER_STATEFUL_EXAMPLES", 200))  # the minimum per CI run
STEPS = 30  # rule steps per example, after the initial open: every example runs exactly this many
MAX_REOPENS = 2  # reopen + reembed per example (each closes and opens both pagers: the costliest step)
# Shrinking a 30-step failure costs up to five minutes here; CI reports the failing sequence as found.
# MEMPAGER_SHRINK=1 shrinks it to a minimal reproduction.
PHASES = tuple(Phase) if os.environ.get("MEMPAGER_SHRINK") == "1" else tuple(p for p in Phase if p != Phase.shrink)
ACTORS = ("alice", "c.d@e:f+g-h")
EMBEDDERS = (HashEmbedder(dim=64), HashEmbedder(dim=32))  # small: every open allocates and loads the index
WORDS = ("amber", "basil", "cedar", "delta", "ember", "fjord", "gamma", "heron", "iris", "juniper")
TYPES = ("fact", "event", "preference")
PATTERN_NAMES = ("cut a release", "rotate a key")
EVERYTHING = 1_000_000_000

texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join)
ks = st.sampled_from([1, 3, 8, 50, 10_000])


def spec(name: str) -> PatternSpec:
    return PatternSpec(name=name, trigger=f"when asked to {name}", steps=["look", "act", "check"])


ALL_TYPES = list(MemoryType)


class PagerMachine(RuleBasedStateMachine):
    base: Path = Path(tempfile.gettempdir())  # replaced by the test (tmpfs: see conftest.scratch_dir)
    runs = {"examples": 0, "steps": 0, "updates": 0}

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(dir=self.base))
        self.path = self.dir / "agent.duckdb"
        self.embedder = 0
        self.pagers: dict[str, mempager.Pager] = {}
        self.model: dict[str, dict[str, tuple[str, str]]] = {a: {} for a in ACTORS}
        # Draws pick by position, so every list drawn from keeps insertion order: uris are random,
        # and sorting them would make a replayed example pick different memories.
        self.deleted: dict[str, None] = {}
        self.seen: set[str] = set()  # every uri ever returned
        self.actor = ACTORS[0]
        self.reopens = 0
        self.steps = -1  # the invariant runs after the initial open too; that is not a rule step

    @initialize()
    def open_all(self) -> None:
        for actor in ACTORS:
            # switching models is an explicit act: this machine adopts each embedder it opens with
            adopt = HASH.with_(adopt_embedder=True)
            self.pagers[actor] = mempager.open(self.path, actor=actor, config=adopt, embedder=EMBEDDERS[self.embedder])

    def teardown(self) -> None:
        try:
            if self.pagers:
                for actor in ACTORS:
                    self._check_contents(actor)
                # hypothesis also starts examples it then abandons (an overrun draw): those are not counted
                PagerMachine.runs["examples"] += self.steps == STEPS
                PagerMachine.runs["steps"] += self.steps
        finally:
            for p in self.pagers.values():
                p.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def p(self) -> mempager.Pager:
        return self.pagers[self.actor]

    def _fresh_or_same(self, uri: str, mtype: str, text: str) -> None:
        same = [u for u, v in self.model[self.actor].items() if v == (mtype, text)]
        if same:
            assert uri == same[0], f"dedup should return {same[0]}, got {uri}"
        else:
            assert uri not in self.seen, f"a new memory reused the uri {uri} (deleted: {uri in self.deleted})"
            self.model[self.actor][uri] = (mtype, text)
        self.seen.add(uri)

    # -- writes ---------------------------------------------------------------------------------
    @rule(mtype=st.sampled_from(TYPES), text=texts)
    def remember(self, mtype: str, text: str) -> None:
        self._fresh_or_same(self.p.remember(mtype, text), mtype, text)

    @precondition(lambda self: any(t != "pattern" for t, _ in self.model[self.actor].values()))
    @rule(data=st.data())
    def rewrite(self, data: st.DataObject) -> None:
        """An update: writing the same text again reinforces the memory it repeats."""
        uri = data.draw(st.sampled_from([u for u, (t, _) in self.model[self.actor].items() if t != "pattern"]))
        mtype, text = self.model[self.actor][uri]
        before = self.p.get(uri)
        assert self.p.remember(mtype, text) == uri
        after = self.p.get(uri)
        assert after.text == before.text
        assert after.strength >= before.strength and after.access_count == before.access_count + 1

    @precondition(lambda self: any(t != "pattern" for t, _ in self.model[self.actor].values()))
    @rule(data=st.data(), text=texts)
    def update(self, data: st.DataObject, text: str) -> None:
        """A correction in place: same uri, new text; the old vectors stop answering at once."""
        mine = self.model[self.actor]
        uri = data.draw(st.sampled_from([u for u, (t, _) in mine.items() if t != "pattern"]))
        mtype, old = mine[uri]
        other = [u for u, v in mine.items() if v == (mtype, text) and u != uri]
        if other:  # two memories may not say the same thing: the store would dedup onto either
            with pytest.raises(InvalidInput, match=re.escape(other[0])):
                self.p.update(uri, text=text)
            return
        label = self.p.get(uri).label
        updated = self.p.update(uri, text=text)
        assert (updated.uri, updated.text, updated.label) == (uri, text, label)
        mine[uri] = (mtype, text)
        PagerMachine.runs["updates"] += 1
        if text != old:  # any vector of the label now must be of the new text (re-embedded already)
            with self.p.semantic.lock:
                labels, vectors = self.p.store.vectors(self.actor, self.p.semantic.model)
            rows = np.flatnonzero(np.asarray(labels) == label)
            if len(rows):
                want = EMBEDDERS[self.embedder].embed([text], role="document")[0]
                assert np.array_equal(vectors[rows[0]], want), f"{uri} kept the vector of {old!r}"

    @precondition(lambda self: self.model[self.actor])
    @rule(data=st.data(), importance=st.floats(0, 1), tags=st.lists(st.sampled_from(WORDS), max_size=2))
    def update_fields(self, data: st.DataObject, importance: float, tags: list[str]) -> None:
        """An update that leaves the text alone keeps the memory's vector and its dedup."""
        uri = data.draw(st.sampled_from(list(self.model[self.actor])))
        before = self.p.get(uri)
        with self.p.semantic.lock:
            had = before.label in set(np.asarray(self.p.store.vector_labels(self.actor, self.p.semantic.model)))
            updated = self.p.update(uri, importance=importance, tags=tags)
            has = before.label in set(np.asarray(self.p.store.vector_labels(self.actor, self.p.semantic.model)))
        assert (updated.text, updated.importance, list(updated.tags)) == (before.text, importance, tags)
        assert has or not had, f"{uri} lost its vector to an update that kept its text"
        PagerMachine.runs["updates"] += 1

    @rule(name=st.sampled_from(PATTERN_NAMES))
    def reinforce(self, name: str) -> None:
        uri = self.p.reinforce_pattern(spec(name))
        self._fresh_or_same(uri, "pattern", spec(name).encode())

    @rule(items=st.lists(st.tuples(st.sampled_from(TYPES), texts), min_size=1, max_size=5))
    def remember_many(self, items: list[tuple[str, str]]) -> None:
        uris = self.p.remember_many([{"type": t, "text": x} for t, x in items])
        assert len(uris) == len(items)
        for uri, (mtype, text) in zip(uris, items, strict=True):
            self._fresh_or_same(uri, mtype, text)

    # -- forgetting -----------------------------------------------------------------------------
    @precondition(lambda self: self.model[self.actor])
    @rule(data=st.data(), hard=st.sampled_from([False] * 9 + [True]))  # hard rewrites the file: keep rare
    def forget(self, data: st.DataObject, hard: bool) -> None:
        uri = data.draw(st.sampled_from(list(self.model[self.actor])))
        assert self.p.forget(uri, hard=hard) == 1
        del self.model[self.actor][uri]
        self.deleted[uri] = None

    @rule(mtype=st.sampled_from(TYPES), hard=st.sampled_from([False] * 9 + [True]))
    def forget_where(self, mtype: str, hard: bool) -> None:
        doomed = [u for u, (t, _) in self.model[self.actor].items() if t == mtype]
        assert self.p.forget(actor=self.actor, where={"types": [mtype]}, hard=hard) == len(doomed)
        for uri in doomed:
            del self.model[self.actor][uri]
        self.deleted.update(dict.fromkeys(doomed))

    @precondition(lambda self: self.deleted)
    @rule(data=st.data())
    def forget_again(self, data: st.DataObject) -> None:
        uri = data.draw(st.sampled_from(list(self.deleted)))
        with pytest.raises(MemoryNotFound):
            self.p.forget(uri)

    @rule(data=st.data())
    def forget_someone_elses(self, data: st.DataObject) -> None:
        """Another actor's uri is not found here, and asking does not delete it."""
        theirs = [u for a in ACTORS if a != self.actor for u in self.model[a]]
        if not theirs:
            return
        uri = data.draw(st.sampled_from(theirs))
        with pytest.raises(MemoryNotFound):
            self.p.forget(uri)
        with pytest.raises(MemoryNotFound):
            self.p.get(uri)

    # -- reads ----------------------------------------------------------------------------------
    @rule(query=texts, k=ks)
    def retrieve(self, query: str, k: int) -> None:
        mine = self.model[self.actor]
        got = self.p.retrieve(query, k=k, budget=10**7)
        for s in got:
            self._check_uri(s.uri)
            mtype, text = mine[s.uri]
            # a pattern is stored encoded and shown rendered
            shown = PatternSpec.decode(text).render() if mtype == "pattern" else text
            assert s.text == shown, f"snippet text differs from the stored text for {s.uri}"
        assert len(got) <= k and len({s.uri for s in got}) == len(got)
        # Retrieval cuts what no lane scores above its floor, so not everything comes back; but a
        # memory whose text is the query scores in every lane, embedded or not.
        if k >= len(mine):
            exact = {u for u, (t, x) in mine.items() if t != "pattern" and x == query}
            assert exact <= {s.uri for s in got}, f"retrieve({query!r}) missed the exact matches {exact}"

    @rule(mtype=st.none() | st.sampled_from((*TYPES, "pattern")), limit=st.integers(1, 40), offset=st.integers(0, 40))
    def recall(self, mtype: str | None, limit: int, offset: int) -> None:
        got = self.p.recall(types=[mtype] if mtype else None, limit=limit, offset=offset)
        for m in got:
            self._check_uri(m.uri)
            assert m.actor == self.actor
        wanted = [u for u, (t, _) in self.model[self.actor].items() if mtype is None or t == mtype]
        assert len(got) == max(0, min(limit, len(wanted) - offset))
        everything = {(m.uri, m.text) for m in self.p.recall(types=[mtype] if mtype else None, limit=EVERYTHING)}
        mine = self.model[self.actor]
        assert everything == {(u, mine[u][1]) for u in wanted}, f"recall(types={mtype!r}) differs from the model"

    @rule(word=st.sampled_from(WORDS))
    def recall_query(self, word: str) -> None:
        got = {m.uri for m in self.p.recall(word, limit=EVERYTHING)}
        for uri in got:
            self._check_uri(uri)
        wanted = {u for u, (t, x) in self.model[self.actor].items() if t != "pattern" and word in x.split()}
        assert wanted <= got, f"recall({word!r}) missed {sorted(wanted - got)}"

    @rule(data=st.data())
    def get(self, data: st.DataObject) -> None:
        everyone = [u for a in ACTORS for u in self.model[a]] + list(self.deleted)
        if not everyone:
            return
        uri = data.draw(st.sampled_from(everyone))
        if uri in self.model[self.actor]:
            assert self.p.get(uri).text == self.model[self.actor][uri][1]
        else:
            with pytest.raises(MemoryNotFound):
                self.p.get(uri)

    def _check_uri(self, uri: str) -> None:
        assert uri not in self.deleted, f"a forgotten memory came back: {uri}"
        assert uri in self.model[self.actor], f"{uri} is not one of {self.actor}'s memories" + (
            " (it belongs to another actor)" if any(uri in m for m in self.model.values()) else ""
        )

    # -- lifecycle ------------------------------------------------------------------------------
    @rule(actor=st.sampled_from(ACTORS))
    def switch_actor(self, actor: str) -> None:
        self.actor = actor
        self._check_contents(actor)  # through SQL: the other actor's file rows, not just its mirror

    # Reopening closes and opens every actor's pager (~0.2 s); hypothesis picks rules about evenly,
    # so without a cap reopen and reembed would take most of the wall time.
    @precondition(lambda self: self.reopens < MAX_REOPENS)
    @rule()
    def reopen(self) -> None:
        self._reopen()

    @precondition(lambda self: self.reopens < MAX_REOPENS)
    @rule()
    def reembed(self) -> None:
        """Switch the embedder (384-d <-> 128-d): vectors of the new model are built lazily."""
        self.embedder = 1 - self.embedder
        self._reopen()

    def _reopen(self) -> None:
        self.reopens += 1
        for p in self.pagers.values():
            p.close()
        self.pagers.clear()
        self.open_all()
        for p in self.pagers.values():
            assert p.semantic.model == EMBEDDERS[self.embedder].name
            assert_index_consistent(p, synced=False, context=f"{p.actor} after reopen")
            self._check_contents(p.actor)

    @rule()
    def sync(self) -> None:
        assert self.p.sync(timeout=30), "embedding did not catch up in 30 s"
        assert_index_consistent(self.p, synced=True, context=f"{self.actor} after sync")

    # -- invariants -----------------------------------------------------------------------------
    @invariant()
    def contents_equal_the_model(self) -> None:
        # From the mirror (what retrieve, page and the lanes serve), which costs microseconds; the SQL
        # read behind recall costs milliseconds and is checked on recall, switch, reopen and teardown.
        # Only the current actor changes in a step; the others are checked whenever they become
        # current, on every reopen and at the end.
        self.steps += 1
        memories = self.p.store.of_types(self.actor, ALL_TYPES, limit=EVERYTHING)
        got = {(m.uri, m.text) for m in memories}
        want = {(u, text) for u, (_, text) in self.model[self.actor].items()}
        assert got == want, f"{self.actor}: mirror has extra {sorted(got - want)[:5]}, misses {sorted(want - got)[:5]}"

    def _check_contents(self, actor: str) -> None:
        memories = self.pagers[actor].recall(limit=EVERYTHING)
        got = {(m.uri, m.text) for m in memories}
        want = {(u, text) for u, (_, text) in self.model[actor].items()}
        assert got == want, f"{actor}: store has extra {sorted(got - want)[:5]}, misses {sorted(want - got)[:5]}"
        assert all(m.actor == actor for m in memories)


@pytest.mark.slow
def test_pager_matches_model(fast_tmp: Path) -> None:
    PagerMachine.base = fast_tmp
    PagerMachine.runs = {"examples": 0, "steps": 0, "updates": 0}
    with timed() as clock:
        # stateful_step_count is only a maximum (hypothesis may stop any example early); _min_steps
        # makes every example run all of them. Both count the initial open as a step, hence the +1.
        run_state_machine_as_test(
            PagerMachine,
            settings=settings(
                max_examples=MAX_EXAMPLES,
                stateful_step_count=STEPS + 1,
                deadline=None,
                database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
                phases=PHASES,
            ),
            _min_steps=STEPS + 1,
        )
    runs = PagerMachine.runs
    record(
        "stateful",
        examples=runs["examples"],
        steps=runs["steps"],
        updates=runs["updates"],
        max_examples=MAX_EXAMPLES,
        steps_per_example=STEPS,
        seconds=clock["seconds"],
    )
    assert runs["examples"] >= MAX_EXAMPLES
    assert runs["steps"] >= MAX_EXAMPLES * STEPS, f"{runs['steps']} steps run, fewer than {MAX_EXAMPLES} x {STEPS}"
    # a floor that proves the update rules run; hypothesis' rule choice is skewed per run (0.2 to 2 per example)
    assert runs["updates"] >= MAX_EXAMPLES // 10, f"only {runs['updates']} updates in {runs['examples']} examples"


RACE_ROUNDS = 150  # ~3% of retrieves hit the window here: 300 retrieves miss it with p < 1e-3


class SameMeaning:
    """Every text gets the same vector: the semantic lane finds every embedded memory for any query,
    as a real model finds "automobile" for "car" though the two share no word (the lexical lane
    does not help). Retrieval with a large k must therefore return every memory at every moment."""

    name, dim = "same-meaning-v1-8", 8

    def embed(self, texts: list[str], role: str = "document") -> np.ndarray:
        return np.tile(np.eye(8, dtype=np.float32)[0], (len(texts), 1))


def test_a_memory_being_embedded_is_never_invisible(tmp_path: Path) -> None:
    """Found by the model test: retrieve(k=10_000) once returned 4 of 8 memories right after a write.

    A fresh memory is served by the salience lane until its vector is indexed, then by the semantic
    lane. If the worker indexes it between the moment retrieve searches the index and the moment it
    asks which memories are still unembedded, neither lane offers it for that query.
    """
    misses = []
    with mempager.open(tmp_path / "agent.duckdb", actor="neo", config=HASH, embedder=SameMeaning()) as p:
        rng = random.Random(0)
        for i in range(RACE_ROUNDS):
            p.remember_many([{"type": "fact", "text": f"memory {i} {j}"} for j in range(rng.randint(1, 4))])
            for _ in range(2):  # right after the write, and again while the worker is likely busy
                live = {m.uri for m in p.recall(limit=EVERYTHING)}
                got = {s.uri for s in p.retrieve("zzz", k=10_000, budget=10**8)}
                if got != live:
                    misses.append((i, len(live - got)))
                time.sleep(rng.uniform(0, 0.01))
    record("embedding_race", rounds=RACE_ROUNDS, retrieves=2 * RACE_ROUNDS, misses=len(misses))
    assert not misses, (
        f"{len(misses)} of {2 * RACE_ROUNDS} retrieves missed live memories (round, missed): {misses[:10]}"
    )
