"""Merge (issue 21 item 2): store size and page precision before and after a scripted merge.

    python -m benchmarks.bench_merge [--projects 60] [--noise 120] [--seed 21] [--no-write]

The store (seeded, generated here) holds what an agent accumulates about projects: for each
(project, attribute) key (the deadline, the owner, the repository) one to three values over time,
each said one to three times in different words (restatements), plus unrelated facts (noise).
An older value is stale once a newer one was said.

The merge is the real one (``Pager.merge``: the prompt, JSON-schema output, pydantic validation,
the id checks, one transaction per group) against a real chat-completions server on 127.0.0.1
whose "LLM" is deterministic and computed from the prompt: it reads the ``[id] text`` listing
(newest first), groups the lines by key, and per key proposes a ``duplicates`` (two statements of
the current value), a ``superseded`` (one stale and one current statement) or a ``merges`` of all
of them into one canonical statement of the current value. So this measures what the pipeline
does with a merger that is right, not how good any model is.

Page precision, LoCoMo-style: for one question per key, the share of the page's retrieved items
that are current, non-duplicate facts (a stale value, or a second item stating a (key, value) the
page already holds, counts against it; noise facts are current and unique). Also: the share of
stale and of duplicate items, and whether the page holds the key's current value at all.
Embedding is the hash embedder (deterministic; the lexical lane carries the project names).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from benchmarks._common import write_results

ADJECTIVES = ["amber", "brisk", "cobalt", "dusky", "ember", "fallow", "gilded", "hollow", "ivory", "jade", "keen"]
NOUNS = ["heron", "lynx", "marten", "osprey", "plover", "quail", "raven", "stoat", "tern", "vole", "wren", "yak"]
PEOPLE = ["Amara", "Bruno", "Chiara", "Dmitri", "Esme", "Farid", "Greta", "Hiro", "Ines", "Jonas", "Keiko", "Lars"]
ATTRIBUTES = ("deadline", "owner", "repository")
# every template names the project and the value, so a statement's key and value can be read back
SAY = {
    "deadline": [
        "Project {p} is due on {v}.",
        "The deadline for project {p} is {v}.",
        "{p} has to ship by {v}, the project deadline.",
    ],
    "owner": ["Project {p} is owned by {v}.", "{v} is the owner of project {p}.", "The lead on project {p} is {v}."],
    "repository": [
        "Project {p} lives in the repository {v}.",
        "The code of project {p} is at {v}.",
        "{p} project repo: {v}.",
    ],
}
CANONICAL = {
    "deadline": "Project {p}'s deadline is {v}.",
    "owner": "Project {p}'s owner is {v}.",
    "repository": "Project {p}'s repository is {v}.",
}
ASK = {
    "deadline": "When is project {p} due?",
    "owner": "Who owns project {p}?",
    "repository": "Which repository holds project {p}?",
}
LINE = re.compile(r"^\[([0-9a-f]+)\] (.*)$")


@dataclass(frozen=True)
class Statement:
    key: tuple[str, str]  # (project, attribute)
    value: str
    text: str
    at: datetime


def generate(projects: int, noise: int, seed: int) -> tuple[list[Statement], dict[tuple[str, str], str], list[str]]:
    """The statements in time order, each key's current value, and the noise facts."""
    rng = random.Random(seed)
    names = rng.sample([f"{a}-{n}" for a in ADJECTIVES for n in NOUNS], projects)
    start = datetime(2026, 1, 5, 9, tzinfo=timezone.utc)
    timeline: list[tuple[int, tuple[str, str], str]] = []  # (step, key, value)
    current: dict[tuple[str, str], str] = {}
    for name in names:
        for attribute in ATTRIBUTES:
            key = (name, attribute)
            values = _values(rng, attribute, rng.choices([1, 2, 3], weights=[6, 3, 1])[0])
            step = rng.randrange(0, 200)
            for value in values:  # each newer value is said later than the older one, in every restatement
                for _ in range(rng.choices([1, 2, 3], weights=[4, 4, 2])[0]):
                    timeline.append((step, key, value))
                    step += rng.randrange(1, 40)
            current[key] = values[-1]
    timeline.sort(key=lambda x: (x[0], x[1]))
    statements = []
    said: set[str] = set()
    for step, key, value in timeline:
        choices = [t for t in SAY[key[1]] if t.format(p=key[0], v=value) not in said] or SAY[key[1]]
        text = rng.choice(choices).format(p=key[0], v=value)
        said.add(text)
        statements.append(Statement(key, value, text, start + timedelta(hours=step)))
    others = [f"The team lunch number {i} was at the {rng.choice(NOUNS)} cafe on floor {i % 9}." for i in range(noise)]
    return statements, current, others


def _values(rng: random.Random, attribute: str, n: int) -> list[str]:
    if attribute == "deadline":
        days = sorted(rng.sample(range(30, 330), n))
        return [(datetime(2026, 1, 1) + timedelta(days=d)).date().isoformat() for d in days]
    if attribute == "owner":
        return rng.sample(PEOPLE, n)
    return [f"git.example.org/{rng.choice(NOUNS)}-{rng.randrange(100, 999)}" for _ in range(n)]


class Truth:
    """Reads (key, value) back from any text the store holds, originals and merged statements alike."""

    def __init__(self, current: Mapping[tuple[str, str], str], values: Mapping[tuple[str, str], set[str]]) -> None:
        self.current = current
        self.values = values
        self.projects = sorted({p for p, _ in current}, key=len, reverse=True)

    def read(self, text: str) -> tuple[tuple[str, str], str] | None:
        project = next((p for p in self.projects if p in text), None)
        if project is None:
            return None
        for attribute in ATTRIBUTES:
            for value in self.values.get((project, attribute), ()):
                if value in text:
                    return (project, attribute), value
        return None


def responder(truth: Truth) -> Any:
    """The scripted "LLM": the merge proposal computed from the prompt's listing (newest first)."""

    def answer(body: Mapping[str, Any]) -> str:
        listing = [m["content"] for m in body["messages"] if m["role"] == "user"][0]
        groups: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for line in listing.splitlines():
            found = LINE.match(line)
            read = truth.read(found.group(2)) if found else None
            if found and read is not None:
                groups.setdefault(read[0], []).append((found.group(1), read[1]))
        merges, duplicates, superseded = [], [], []
        for key, said in groups.items():
            if len(said) < 2:
                continue
            now = said[0][1]  # the newest statement's value is the current one
            fresh = [i for i, v in said if v == now]
            stale = [i for i, v in said if v != now]
            if not stale and len(fresh) == 2:
                duplicates.append({"keep": fresh[0], "drop": [fresh[1]]})
            elif len(stale) == 1 and len(fresh) == 1:
                superseded.append({"id": stale[0], "by": fresh[0], "reason": "a newer value"})
            else:
                text = CANONICAL[key[1]].format(p=key[0], v=now)
                merges.append({"ids": [i for i, _ in said], "text": text, "reason": "restatements"})
        return json.dumps({"merges": merges, "duplicates": duplicates, "superseded": superseded})

    return answer


def measure(p: Any, truth: Truth) -> dict[str, Any]:
    """Store size, and page precision over one question per key."""
    from mempager.types import MemoryType

    rows = p.store.query(p.actor, types=[MemoryType.FACT], limit=1_000_000)
    live = [m for m in rows if m.superseded_by is None]
    items = good = stale = dup = found_current = 0
    for key, value in truth.current.items():
        page = p.page(ASK[key[1]].format(p=key[0]))
        seen: set[tuple[tuple[str, str], str]] = set()
        has_current = False
        for snippet in page.report.snippets:
            memory = p.get(snippet.uri)
            read = truth.read(memory.text)
            items += 1
            if read is None:  # noise: a current, unique fact
                good += 1
                continue
            if read[1] != truth.current[read[0]]:
                stale += 1
            elif read in seen:
                dup += 1
            else:
                good += 1
            seen.add(read)
            has_current |= read == (key, value)
        found_current += has_current
    queries = len(truth.current)
    return {
        "memories_in_store": len(rows),
        "live_memories": len(live),
        "queries": queries,
        "page_items": items,
        "precision": round(good / items, 4) if items else 0.0,
        "stale_share": round(stale / items, 4) if items else 0.0,
        "duplicate_share": round(dup / items, 4) if items else 0.0,
        "current_value_in_page": round(found_current / queries, 4),
    }


def run(projects: int, noise: int, seed: int) -> dict[str, Any]:
    import mempager
    from mempager import PagerConfig
    from mempager.llm import ChatClient
    from mempager.llm.testing import ChatServer

    statements, current, others = generate(projects, noise, seed)
    values: dict[tuple[str, str], set[str]] = {}
    for s in statements:
        values.setdefault(s.key, set()).add(s.value)
    truth = Truth(current, values)
    config = PagerConfig(embedder="hash", merge_max_memories=100_000)
    with tempfile.TemporaryDirectory(prefix="mempager-bench-merge-") as tmp:
        with mempager.open(Path(tmp) / "agent.duckdb", actor="neo", config=config) as p:
            p.remember_many([{"type": "fact", "text": s.text, "created_at": s.at} for s in statements])
            p.remember_many([{"type": "fact", "text": t} for t in others])
            assert p.sync(timeout=600), "embedding did not finish"
            before = measure(p, truth)
            with ChatServer(responder(truth)) as server:
                started = time.perf_counter()
                result = p.merge(type="fact", llm=ChatClient(server.url, "scripted", timeout=120, max_attempts=1))
                took = time.perf_counter() - started
                prompt_chars = sum(len(json.dumps(r.body)) for r in server.requests)
            assert result.skipped is None, result.skipped
            assert p.sync(timeout=600), "embedding did not finish"
            after = measure(p, truth)
            kinds = {k: sum(1 for g in result.groups if g.kind == k) for k in ("merge", "duplicate", "superseded")}
            return {
                "seed": seed,
                "projects": projects,
                "keys": len(current),
                "statements": len(statements),
                "stale_statements": sum(1 for s in statements if s.value != current[s.key]),
                "noise_facts": len(others),
                "merge": {
                    "seconds": round(took, 3),
                    "llm_requests": len(server.requests),
                    "prompt_chars": prompt_chars,
                    "groups": kinds,
                    "groups_skipped": sum(1 for g in result.groups if g.skipped),
                    "originals_superseded": sum(len(g.originals) for g in result.groups if g.by),
                },
                "before": before,
                "after": after,
            }


def table(r: dict[str, Any]) -> str:
    b, a, m = r["before"], r["after"], r["merge"]
    rows = [
        ("memories in the store (nothing is deleted)", "memories_in_store"),
        ("live memories (what pages can show)", "live_memories"),
        ("page items over all questions", "page_items"),
        ("precision: current, non-duplicate items", "precision"),
        ("stale items (a value since replaced)", "stale_share"),
        ("duplicate items (a value the page already held)", "duplicate_share"),
        ("questions whose page holds the current value", "current_value_in_page"),
    ]
    lines = [
        f"{r['statements']} statements about {r['keys']} (project, attribute) keys ({r['stale_statements']} stale), "
        f"{r['noise_facts']} unrelated facts; seed {r['seed']}. One merge: {m['llm_requests']} request "
        f"({m['prompt_chars']:,} characters), {m['seconds']} s, groups {m['groups']}, "
        f"{m['originals_superseded']} originals superseded, {m['groups_skipped']} groups skipped.",
        "",
        "| | before | after |",
        "|---|---:|---:|",
        *(f"| {label} | {b[k]} | {a[k]} |" for label, k in rows),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--projects", type=int, default=60)
    parser.add_argument("--noise", type=int, default=120)
    parser.add_argument("--seed", type=int, default=21)
    parser.add_argument("--no-write", action="store_true", help="print, do not write benchmarks/results/")
    args = parser.parse_args(argv)
    print(f"merge: {args.projects} projects, seed {args.seed} ...", file=sys.stderr)
    result = run(args.projects, args.noise, args.seed)
    md = table(result)
    print(md)
    if not args.no_write:
        write_results("merge", result, md, extra_versions=("pydantic", "httpx"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
