"""Kill -9 during a write loop: nothing acknowledged is lost, no batch is half there, forgets stay forgotten.

A child process (``_kill_child.py``) runs a seeded random workload against a store: single writes,
dedup re-writes, ``remember_many`` batches, pattern reinforcements, soft and hard forgets (a hard one
rewrites the whole file), forgets by tag, waits for embedding, index saves and close/reopen. It prints
each operation's intent before the call and an ack after it returns. The parent SIGKILLs it after a
random delay (a fifth of them during import, open or recovery of the previous crash),
reopens the store and checks every acknowledged fact. Stores are reused in chains, so later kills
also hit a store that has already been recovered from a crash.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import mempager
from mempager import MemoryNotFound

from .conftest import HASH, assert_index_consistent, child_env, python, record, timed

KILL_ITERATIONS = 25  # the minimum per CI run
CHAIN_LENGTH = 5  # kills per store before a fresh one is started
PARALLEL_CHAINS = 2
# When to SIGKILL: a fifth of the kills come 0-0.6 s after spawn, in start-up (import, open, often
# recovery of the previous crash); the rest 0.05-1.5 s after the child is ready, in the write loop.
# Counting from "ready" keeps that split whatever the machine's load.
EARLY_SHARE, EARLY_DELAY, LOOP_DELAY = 0.2, (0.0, 0.6), (0.05, 1.5)
CHILD = Path(__file__).with_name("_kill_child.py")
ACTORS = ("neo", "trinity")
SEED = int(os.environ.get("MEMPAGER_RELIABILITY_SEED", random.SystemRandom().randrange(2**31)))


@dataclass
class Expected:
    """What the acknowledged operations so far say must be true of the store."""

    live: dict[str, tuple[str, str]] = field(default_factory=dict)  # uri -> (actor, text)
    forgotten: dict[str, str] = field(default_factory=dict)  # uri -> actor
    batches: dict[str, tuple[str, list[str]]] = field(default_factory=dict)  # tag -> (actor, uris)
    forgotten_batches: set[str] = field(default_factory=set)
    reinforced: Counter[tuple[str, str]] = field(default_factory=Counter)  # (actor, pattern) -> acks
    pattern_uris: dict[tuple[str, str], str] = field(default_factory=dict)
    uncertain: dict[str, str] = field(default_factory=dict)  # uri -> actor: an in-flight forget's targets
    in_flight_patterns: Counter[tuple[str, str]] = field(default_factory=Counter)

    def apply(self, ack: dict[str, Any]) -> None:
        op, actor = ack["op"], ack.get("actor")
        if op in ("remember", "rewrite"):
            if op == "rewrite":
                assert ack["uri"] == ack["expected"], f"a dedup re-write returned a new uri: {ack}"
            self.live[ack["uri"]] = (actor, ack["text"])
        elif op == "batch":
            self.batches[ack["tag"]] = (actor, ack["uris"])
            self.live.update({u: (actor, t) for u, t in zip(ack["uris"], ack["texts"], strict=True)})
        elif op == "pattern":
            self.reinforced[(actor, ack["name"])] += 1
            self.pattern_uris[(actor, ack["name"])] = ack["uri"]
        elif op == "forget":
            assert ack["count"] == 1, f"forget of a live memory returned {ack['count']}: {ack}"
            self.live.pop(ack["uri"], None)
            self.forgotten[ack["uri"]] = actor
        elif op == "forget_batch":
            _, uris = self.batches[ack["tag"]]
            assert ack["count"] == len(uris), f"forget by tag removed {ack['count']} of {len(uris)}: {ack}"
            self.forgotten_batches.add(ack["tag"])
            for uri in uris:
                self.live.pop(uri, None)
                self.forgotten[uri] = actor

    def in_flight(self, intent: dict[str, Any]) -> None:
        """The last intent without an ack: it may or may not have happened."""
        op, actor = intent["op"], intent["actor"]
        if op == "forget":
            self.uncertain[intent["uri"]] = actor
        elif op == "forget_batch":
            self.uncertain.update(dict.fromkeys(self.batches[intent["tag"]][1], actor))
        elif op == "pattern":
            self.in_flight_patterns[(actor, intent["name"])] += 1

    def resolve(self, actor: str, present: set[str]) -> None:
        """After a check, an in-flight forget either happened or not: record which, for later kills."""
        for uri, owner in self.uncertain.items():
            if owner == actor and uri not in present:
                self.live.pop(uri, None)
                self.forgotten[uri] = actor
        for tag, (owner, uris) in self.batches.items():
            if owner == actor and set(uris) & self.uncertain.keys() and not set(uris) & present:
                self.forgotten_batches.add(tag)


def run_child(store: Path, seed: int, delay: float, after_ready: bool) -> list[dict[str, Any]]:
    """Start the workload, SIGKILL it ``delay`` seconds after spawn (or after it is ready), return its
    complete output lines. stdout is drained on a thread: a child blocked on a full pipe would only
    ever be killed at a print."""
    proc = subprocess.Popen(
        [python(), str(CHILD), str(store), str(seed)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_env(),
        cwd=store.parent,
    )
    chunks: list[bytes] = []
    ready = threading.Event()

    def drain() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            chunks.append(line)
            if b'"kind": "ready"' in line:
                ready.set()
        ready.set()  # EOF

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    if after_ready:
        ready.wait(60)
    time.sleep(delay)
    early_exit = proc.poll()
    proc.send_signal(signal.SIGKILL)
    proc.wait(60)
    reader.join(60)
    err = proc.stderr.read() if proc.stderr is not None else b""
    assert early_exit is None, f"the workload died by itself (rc {early_exit}, seed {seed}):\n{err.decode()[-3000:]}"
    assert proc.returncode == -signal.SIGKILL
    # A line cut by the kill has no newline: its call had returned, but we never saw the ack, so it
    # is not counted as acknowledged (we only hold the store to what we saw).
    return [json.loads(line) for line in b"".join(chunks).decode().split("\n")[:-1]]


def kill_point(lines: list[dict[str, Any]]) -> str:
    """Where the kill landed: start-up, inside an operation (its intent has no ack), or between two."""
    if not any(x["kind"] == "ready" for x in lines):
        return "start-up"
    last = lines[-1]
    if last["kind"] != "intent":
        return "between operations"
    return last["op"] + (" (hard)" if last.get("hard") else "")


def check_store(store: Path, exp: Expected, where: str) -> None:
    pagers = {a: mempager.open(store, actor=a, config=HASH) for a in ACTORS}
    try:
        for actor, p in pagers.items():
            # Before any embedding catches up: the recovered index must match the store exactly.
            assert_index_consistent(p, synced=False, context=f"{where} {actor} on reopen")
            contents = {m.uri: m for m in p.recall(limit=1_000_000_000)}
            for uri, (owner, text) in exp.live.items():
                if owner != actor or uri in exp.uncertain:
                    continue
                assert uri in contents, f"{where}: acknowledged write lost: {uri} {text!r}"
                assert contents[uri].text == text, f"{where}: {uri} text changed"
            for uri, owner in exp.forgotten.items():
                if owner != actor or uri in exp.uncertain:
                    continue
                assert uri not in contents, f"{where}: acknowledged forget undone: {uri}"
                with pytest.raises(MemoryNotFound):
                    p.get(uri)
            hits = {s.uri for s in p.retrieve("deploy vault invoice release", k=500)}
            assert not hits & {u for u, o in exp.forgotten.items() if o == actor and u not in exp.uncertain}
            assert hits <= set(contents), f"{where}: retrieve returned uris recall does not know"
            check_batches(contents.values(), exp, actor, where)
            check_patterns(p, exp, actor, where)
            exp.resolve(actor, set(contents))
            assert p.sync(timeout=60), f"{where}: embedding did not catch up within 60 s"
            assert_index_consistent(p, synced=True, context=f"{where} {actor} after sync")
        report = pagers[ACTORS[0]].verify_audit()
        assert report.ok, f"{where}: audit chain broken: {report}"
    finally:
        for p in pagers.values():
            p.close()


def check_batches(memories: Any, exp: Expected, actor: str, where: str) -> None:
    per_tag: Counter[str] = Counter(t for m in memories for t in m.tags if t.startswith("batch:"))
    for tag, count in per_tag.items():
        size = int(tag.rsplit(":", 1)[1])
        assert count == size, f"{where}: partial batch {tag}: {count} of {size} items present"
    for tag, (owner, uris) in exp.batches.items():
        if owner != actor:
            continue
        if tag in exp.forgotten_batches:
            assert tag not in per_tag, f"{where}: forgotten batch {tag} is back"
        elif not set(uris) & exp.uncertain.keys():
            assert per_tag.get(tag) == len(uris), f"{where}: acknowledged batch {tag} missing"


def check_patterns(p: mempager.Pager, exp: Expected, actor: str, where: str) -> None:
    for (owner, name), acks in exp.reinforced.items():
        if owner != actor:
            continue
        coverage = int(p.get(exp.pattern_uris[(owner, name)]).metadata["coverage"])
        extra = exp.in_flight_patterns[(owner, name)]
        assert acks <= coverage <= acks + extra, (
            f"{where}: pattern {name!r} has coverage {coverage} after {acks} acknowledged reinforcements"
            f" (+{extra} in flight)"
        )
        exp.reinforced[(owner, name)] = coverage  # the in-flight one, if it landed, is now a fact
        exp.in_flight_patterns.pop((owner, name), None)


@dataclass
class Tally:
    acked: list[int] = field(default_factory=list)
    kinds: Counter[str] = field(default_factory=Counter)
    kill_points: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)


def run_chain(directory: Path, iterations: list[int], seed: int, tally: Tally) -> None:
    """Kill, check, and kill again: each iteration starts from the store the previous one crashed."""
    rng = random.Random(seed)
    store = directory / "agent.duckdb"
    directory.mkdir()
    exp = Expected()
    for i in iterations:
        child_seed = rng.randrange(2**31)
        early = rng.random() < EARLY_SHARE
        delay = rng.uniform(*(EARLY_DELAY if early else LOOP_DELAY))
        lines = run_child(store, child_seed, delay, after_ready=not early)
        exp.uncertain.clear()
        acks = [x for x in lines if x["kind"] == "ack"]
        for ack in acks:
            exp.apply(ack)
        if lines and lines[-1]["kind"] == "intent":
            exp.in_flight(lines[-1])
        with tally.lock:
            tally.acked.append(len(acks))
            tally.kinds.update(a["op"] for a in acks)
            tally.kill_points[kill_point(lines)] += 1
        when = f"{delay:.2f}s after {'spawn' if early else 'ready'}"
        check_store(store, exp, f"iteration {i} (suite seed {SEED}, child seed {child_seed}, kill {when})")


@pytest.mark.slow
def test_kill9_during_write_loop(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    tally = Tally()
    chains = [
        list(range(start, min(start + CHAIN_LENGTH, KILL_ITERATIONS)))
        for start in range(0, KILL_ITERATIONS, CHAIN_LENGTH)
    ]
    with timed() as clock:
        # Chains are independent stores: two run at once (one per core); the contention only
        # makes the kill points more varied.
        with ThreadPoolExecutor(max_workers=PARALLEL_CHAINS) as pool:
            futures = [
                pool.submit(run_chain, tmp_path / f"chain{n}", chain, rng.randrange(2**31), tally)
                for n, chain in enumerate(chains)
            ]
            for future in futures:
                future.result()
    record(
        "kill9",
        iterations=len(tally.acked),
        acknowledged_ops=sum(tally.acked),
        ops=dict(tally.kinds),
        kill_points=dict(tally.kill_points),
        seed=SEED,
        seconds=clock["seconds"],
    )
    assert len(tally.acked) >= KILL_ITERATIONS
    assert sum(tally.acked) > 0, "no operation was ever acknowledged: the kill delays are too short to test anything"
