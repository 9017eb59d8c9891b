"""Isolation: five actors in one store, random operations, >= 10,000 reads, 0 results from another actor.

The actors are chosen to be hard to keep apart: "a:b" and "a_b" differ only in a character that
file-name slugs flatten, and "ghost" never writes anything. Texts come from a pool shared by all
actors (so a dedup or cache keyed without the actor would hand out another actor's uri) and half
of them carry a marker word unique to the writing actor (so a leak shows up in rendered text too).
Reads include k far larger than the actor's size, queries made of other actors' marker words, and
gets and forgets of other actors' uris.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from pathlib import Path

import pytest

import mempager
from mempager import MemoryNotFound, PatternSpec
from mempager.validate import parse_uri

from .conftest import HASH, assert_index_consistent, record, timed

READS = 10_000  # retrieve + recall calls; the minimum per CI run
ACTORS = ("alice", "bob", "a:b", "a_b", "ghost")
WRITERS = ACTORS[:4]  # "ghost" stays empty
MARK = {a: f"marker{i}q" for i, a in enumerate(ACTORS)}
POOL = (
    "the deploy key is in vault",
    "invoice rounding is flaky",
    "release on friday",
    "ana leads billing",
    "cache the ledger",
    "rotate the canary",
    "quota is twenty dollars",
    "schema v3 migration",
)
SEED = int(os.environ.get("MEMPAGER_RELIABILITY_SEED", random.SystemRandom().randrange(2**31)))


class Actors:
    def __init__(self, path: Path, rng: random.Random) -> None:
        self.path, self.rng = path, rng
        self.pagers = {a: mempager.open(path, actor=a, config=HASH) for a in ACTORS}
        self.owned: dict[str, set[str]] = {a: set() for a in ACTORS}  # every uri each actor was given
        self.forgotten: set[str] = set()
        self.reads = Counter[str]()
        self.leaks: list[str] = []

    def close(self) -> None:
        for p in self.pagers.values():
            p.close()

    def reopen(self, actor: str) -> None:
        self.pagers[actor].close()
        self.pagers[actor] = mempager.open(self.path, actor=actor, config=HASH)

    def text(self, actor: str) -> str:
        base = self.rng.choice(POOL)
        return f"{base} {MARK[actor]}" if self.rng.random() < 0.5 else base

    def query(self) -> str:
        words = [self.rng.choice(POOL).split()[-1] for _ in range(self.rng.randint(1, 3))]
        if self.rng.random() < 0.4:  # ask for someone else's marker
            words.append(MARK[self.rng.choice(ACTORS)])
        return " ".join(words)

    # -- checks -----------------------------------------------------------------------------------
    def check(self, actor: str, uris: list[str], texts: list[str], what: str) -> None:
        for uri, text in zip(uris, texts, strict=True):
            owner = parse_uri(uri)[0]
            if owner != actor or uri not in self.owned[actor] or uri in self.forgotten:
                gone = uri in self.forgotten
                self.leaks.append(f"{what} for {actor} returned {uri} (owner {owner}, forgotten {gone})")
            foreign = [a for a in ACTORS if a != actor and MARK[a] in text]
            if foreign:
                self.leaks.append(f"{what} for {actor} returned text with {foreign}'s marker: {text!r}")

    # -- operations -------------------------------------------------------------------------------
    def write(self, actor: str) -> None:
        p, roll = self.pagers[actor], self.rng.random()
        if roll < 0.6:
            uris = [p.remember(self.rng.choice(["fact", "event", "preference"]), self.text(actor))]
        elif roll < 0.85:
            items = [
                {"type": "event", "text": self.text(actor), "tags": [f"t{self.rng.randint(0, 3)}"]}
                for _ in range(self.rng.randint(1, 20))
            ]
            uris = p.remember_many(items)
        else:
            uris = [p.reinforce_pattern(PatternSpec(name=self.rng.choice(POOL), steps=["one", "two"]))]
        for uri in uris:
            assert parse_uri(uri)[0] == actor, f"{actor} was handed {uri}"
            # a dedup hit returns the live memory it repeats; a forgotten one must never come back
            assert uri not in self.forgotten, f"a write for {actor} returned the forgotten {uri}"
        self.owned[actor].update(uris)

    def forget(self, actor: str) -> None:
        p = self.pagers[actor]
        alive = sorted(self.owned[actor] - self.forgotten)
        if not alive:
            return
        if self.rng.random() < 0.7:
            uri = self.rng.choice(alive)
            assert p.forget(uri, hard=self.rng.random() < 0.2) == 1
            self.forgotten.add(uri)
        else:
            tag = f"t{self.rng.randint(0, 3)}"
            gone = {m.uri for m in p.recall(tags=[tag], limit=1_000_000)}
            assert p.forget(actor=actor, where={"tags": [tag]}, hard=False) == len(gone)
            self.forgotten |= gone

    def probe(self, actor: str) -> None:
        """Another actor's uri is not found through this pager, and asking does not delete it."""
        theirs = sorted(u for a in WRITERS if a != actor for u in self.owned[a] - self.forgotten)
        if not theirs:
            return
        uri = self.rng.choice(theirs)
        with pytest.raises(MemoryNotFound):
            self.pagers[actor].get(uri)
        with pytest.raises(MemoryNotFound):
            self.pagers[actor].forget(uri)
        owner = parse_uri(uri)[0]
        assert self.pagers[owner].get(uri).uri == uri, "a refused cross-actor forget deleted the memory"

    def read(self, actor: str) -> None:
        p, roll = self.pagers[actor], self.rng.random()
        size = len(self.owned[actor] - self.forgotten)
        if roll < 0.5:
            k = self.rng.choice([1, 8, 50, size + 1, size + 100, 10_000])
            got = p.retrieve(self.query(), k=k)
            self.check(actor, [s.uri for s in got], [s.text for s in got], f"retrieve(k={k})")
            self.reads["retrieve"] += 1
        else:
            kwargs: dict[str, object] = {
                "limit": self.rng.choice([1, 20, size + 1, 1_000_000]),
                "offset": self.rng.choice([0, 0, 3]),
            }
            if self.rng.random() < 0.3:
                kwargs["types"] = [self.rng.choice(["fact", "event", "preference", "pattern"])]
            if self.rng.random() < 0.2:
                kwargs["tags"] = [f"t{self.rng.randint(0, 3)}"]
            query = self.query() if self.rng.random() < 0.4 else None
            got_m = p.recall(query, **kwargs)  # type: ignore[arg-type]
            self.check(actor, [m.uri for m in got_m], [m.text for m in got_m], f"recall({query!r}, {kwargs})")
            for m in got_m:
                if m.actor != actor:
                    self.leaks.append(f"recall for {actor} returned a Memory of {m.actor}")
            self.reads["recall"] += 1
        if actor == "ghost" and (got if roll < 0.5 else got_m):
            self.leaks.append("the empty actor got results")

    def page(self, actor: str) -> None:
        page = self.pagers[actor].page(goal="ship the release", query=self.query())
        self.check(actor, [s.uri for s in page.snippets], [s.text for s in page.snippets], "page")
        rendered = page.render()
        for other in ACTORS:
            if other != actor and MARK[other] in rendered:
                self.leaks.append(f"page for {actor} shows {other}'s marker")
        self.reads["page"] += 1


@pytest.mark.slow
def test_no_actor_ever_sees_another(fast_tmp: Path) -> None:
    rng = random.Random(SEED)
    world = Actors(fast_tmp / "agent.duckdb", rng)
    ops = Counter[str]()
    try:
        with timed() as clock:
            for actor in WRITERS:  # start with something to leak
                for _ in range(10):
                    world.write(actor)
            while world.reads["retrieve"] + world.reads["recall"] < READS:
                actor = rng.choice(ACTORS)
                op = rng.choices(
                    ["read", "write", "forget", "probe", "page", "reopen"], weights=[85, 8, 3, 2, 1.5, 0.05]
                )[0]
                if actor == "ghost" and op in ("write", "forget"):
                    op = "read"
                getattr(world, op)(actor)
                ops[op] += 1
                assert not world.leaks, f"seed {SEED}: " + "\n".join(world.leaks[:10])
            for actor, p in world.pagers.items():
                assert p.sync(timeout=60)
                assert_index_consistent(p, synced=True, context=actor)
                assert {m.uri for m in p.recall(limit=1_000_000)} == world.owned[actor] - world.forgotten
            assert world.pagers["alice"].verify_audit().ok
    finally:
        world.close()
    record(
        "isolation",
        reads=world.reads["retrieve"] + world.reads["recall"],
        **dict(world.reads),
        ops=dict(ops),
        memories={a: len(world.owned[a] - world.forgotten) for a in ACTORS},
        leaks=len(world.leaks),
        seed=SEED,
        seconds=clock["seconds"],
    )


def test_actors_whose_names_slug_alike_keep_their_own_saved_index(tmp_path: Path) -> None:
    """ "a:b" and "a_b" are different actors; each one's saved index must survive the other's save.

    Nothing leaks when they share a directory (the manifest names the actor and every hit is
    re-checked), but each open then throws the other's index away and rebuilds from the store.
    """
    path = tmp_path / "agent.duckdb"
    for actor in ("a:b", "a_b"):
        with mempager.open(path, actor=actor, config=HASH) as p:
            p.remember_fact(f"a fact of {actor}")
            assert p.sync(timeout=30)
    for actor in ("a:b", "a_b"):
        with mempager.open(path, actor=actor, config=HASH) as p:
            assert p.semantic.opened_how.startswith("loaded"), f"{actor}: {p.semantic.opened_how}"
            assert [s.text for s in p.retrieve("a fact of", k=10)] == [f"a fact of {actor}"]
