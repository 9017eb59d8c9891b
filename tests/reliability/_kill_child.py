"""The workload the kill -9 test runs in a child process (not collected by pytest).

    python _kill_child.py STORE SEED

Two actors share the store. Before each mutating call the child prints an ``intent`` line, after
the call returns an ``ack`` line (flushed), so the parent knows exactly which operations were
acknowledged and which single one may have been in flight when SIGKILL arrived. It never stops
by itself: the parent kills it.
"""

from __future__ import annotations

import json
import random
import sys
from typing import Any

import mempager
from mempager import PagerConfig, PatternSpec

ACTORS = ("neo", "trinity")
WORDS = (
    "deploy",
    "vault",
    "invoice",
    "rounding",
    "flaky",
    "branch",
    "release",
    "billing",
    "ledger",
    "cache",
    "quota",
    "fixture",
    "rollback",
    "canary",
    "schema",
)
PATTERNS = ("cut a release", "rotate a key", "fix a flaky test")


def emit(kind: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"kind": kind, **fields}, sort_keys=True) + "\n")
    sys.stdout.flush()


def pattern_spec(name: str) -> PatternSpec:
    return PatternSpec(name=name, trigger=f"when asked to {name}", steps=["look", "act", "check"])


class Workload:
    def __init__(self, path: str, seed: int) -> None:
        self.path = path
        self.seed = seed
        self.rng = random.Random(seed)
        self.pagers: dict[str, mempager.Pager] = {}
        self.live: dict[str, list[tuple[str, str, str]]] = {a: [] for a in ACTORS}  # (uri, type, text)
        self.batches: dict[str, list[str]] = {a: [] for a in ACTORS}  # batch tags
        self.n = 0

    def open(self) -> None:
        for actor in ACTORS:
            self.pagers[actor] = mempager.open(self.path, actor=actor, config=PagerConfig(embedder="hash"))

    def close(self) -> None:
        for p in self.pagers.values():
            p.close()
        self.pagers.clear()

    def text(self) -> str:
        self.n += 1
        words = " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(2, 12)))
        return f"s{self.seed}n{self.n} {words}"

    def step(self) -> None:
        actor = self.rng.choice(ACTORS)
        p = self.pagers[actor]
        op = self.rng.choices(
            ["remember", "rewrite", "batch", "pattern", "forget", "forget_batch", "sync", "save", "reopen", "read"],
            weights=[30, 6, 12, 8, 12, 3, 6, 4, 2, 10],
        )[0]
        if op == "remember":
            mtype = self.rng.choice(["fact", "event", "preference"])
            text = self.text()
            emit("intent", op=op, actor=actor, type=mtype, text=text)
            uri = p.remember(mtype, text)
            self.live[actor].append((uri, mtype, text))
            emit("ack", op=op, actor=actor, uri=uri, type=mtype, text=text)
        elif op == "rewrite" and self.live[actor]:
            uri, mtype, text = self.rng.choice(self.live[actor])
            emit("intent", op=op, actor=actor, uri=uri)
            again = p.remember(mtype, text)  # dedup: reinforces the same memory
            emit("ack", op=op, actor=actor, uri=again, text=text, expected=uri)
        elif op == "batch":
            size = self.rng.randint(2, 40)
            tag = f"batch:s{self.seed}b{self.n}:{size}"  # the size travels with the tag: all-or-nothing is checkable
            items = [{"type": "event", "text": self.text(), "tags": [tag]} for _ in range(size)]
            emit("intent", op=op, actor=actor, tag=tag)
            uris = p.remember_many(items)
            self.batches[actor].append(tag)
            emit("ack", op=op, actor=actor, tag=tag, uris=uris, texts=[i["text"] for i in items])
        elif op == "pattern":
            name = self.rng.choice(PATTERNS)
            emit("intent", op=op, actor=actor, name=name)
            uri = p.reinforce_pattern(pattern_spec(name))
            emit("ack", op=op, actor=actor, name=name, uri=uri)
        elif op == "forget" and self.live[actor]:
            uri, _, _ = self.live[actor].pop(self.rng.randrange(len(self.live[actor])))
            hard = self.rng.random() < 0.4  # hard forgets rewrite the file: a kill point worth hitting
            emit("intent", op=op, actor=actor, uri=uri, hard=hard)
            count = p.forget(uri, hard=hard)
            emit("ack", op=op, actor=actor, uri=uri, hard=hard, count=count)
        elif op == "forget_batch" and self.batches[actor]:
            tag = self.batches[actor].pop(self.rng.randrange(len(self.batches[actor])))
            hard = self.rng.random() < 0.5
            emit("intent", op=op, actor=actor, tag=tag, hard=hard)
            count = p.forget(actor=actor, where={"tags": [tag]}, hard=hard)
            emit("ack", op=op, actor=actor, tag=tag, hard=hard, count=count)
        elif op == "sync":
            emit("intent", op=op, actor=actor)
            emit("ack", op=op, actor=actor, done=p.sync(timeout=0.3))
        elif op == "save":
            emit("intent", op=op, actor=actor)
            p.semantic.save()  # the same save close() makes; here it can be interrupted mid-write
            emit("ack", op=op, actor=actor)
        elif op == "reopen":
            emit("intent", op=op, actor=actor)
            self.close()
            self.open()
            emit("ack", op=op, actor=actor)
        elif op == "read":
            emit("intent", op=op, actor=actor)
            p.retrieve(self.rng.choice(WORDS), k=self.rng.choice([1, 8, 100]))
            p.recall(limit=50)
            emit("ack", op=op, actor=actor)


def main() -> None:
    path, seed = sys.argv[1], int(sys.argv[2])
    work = Workload(path, seed)
    work.open()
    emit("ready", seed=seed)
    while True:
        work.step()


if __name__ == "__main__":
    main()
