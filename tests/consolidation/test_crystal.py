"""The crystallized tier (seed 003) through the real Pager on a real DuckDB file: a pattern the
continuity graduated to 3x crystallizes only through a human accept in the review queue (issue 21
item 9); it then leaves the pinned continuity for a bounded pinned menu, and its body comes into a
page on cue (its words, or an evidence edge to a memory the query retrieves); per actor; audited;
forgotten with its bytes. Also the CLI (`mempager crystal ...`)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import mempager
from mempager import PagerConfig
from mempager.errors import InvalidInput, MemoryNotFound
from mempager.paging.tier_sections import CRYSTALS_HEADER, MENU_HEADER

DAY0 = datetime(2026, 5, 4, 9, 0, tzinfo=timezone.utc)
REPO = Path(__file__).resolve().parents[2]
PATTERN = "Friday deploys with migrations fail"
CANARY = "zqxcanary-lockstep"
CONFIG = PagerConfig(embedder="hash", embed_workers=0, erase_delay_seconds=3600)


def _open(path: Path, actor: str = "neo") -> mempager.Pager:
    return mempager.open(path, actor=actor, config=CONFIG)


def _doc(line: str) -> str:
    rest = "- Coffee matters | 1x (2026-05-04)\n## Decisions\n-\n## Context\n-\n"
    return f"## State\nReleases.\n## Patterns\n{line}\n{rest}"


def graduate(p: mempager.Pager) -> list[str]:
    """Two wraps: the pattern rises 1x -> 2x -> 3x on evidence; the ids it cited."""
    p.clock = lambda: DAY0
    p.remember("event", f"The deploy failed on Friday because the {CANARY} migration locked the users table.")
    p.remember("event", "Second Friday deploy failed again: the migration locked users for minutes.")
    e1, e2 = (e.id for e in p.prepare_wrap().episodes)
    p.save_continuity(
        _doc(
            f'- {PATTERN} | 2x (2026-05-04) [evidence: {e1} "deploy failed friday migration"]'
            f' [evidence: {e2} "friday deploy migration locked"]'
        )
    )
    p.clock = lambda: DAY0 + timedelta(days=2)
    p.remember("event", "Tuesday release with a schema migration stalled the orders table for an hour.")
    p.remember("event", "The payments release migration stalled again and blocked checkout.")
    e3, e4 = (e.id for e in p.prepare_wrap().episodes)
    saved = p.save_continuity(
        _doc(
            f'- {PATTERN} | 3x (2026-05-06) [evidence: {e3} "release schema migration stalled"]'
            f' [evidence: {e4} "payments release migration blocked"] [no-contradicts]'
        )
    )
    assert [(c.name, c.to_level) for c in saved.graduated] == [(PATTERN, 3)]
    return [e1, e2, e3, e4]


def test_a_3x_pattern_crystallizes_through_review_and_leaves_the_pinned_continuity(store_path: Path) -> None:
    with _open(store_path) as p:
        cited = graduate(p)
        assert p.tiers.crystals.eligible() == [PATTERN]
        with pytest.raises(InvalidInput, match="not a 3x pattern"):
            p.crystallize("Coffee matters")  # a 1x pattern never crystallizes
        assert f"{PATTERN} | 3x" in p.pinned()
        (review_id,) = p.crystallize(PATTERN)
        assert p.crystallize() == [review_id]  # a pending proposal is reused, not duplicated
        assert p.crystals() == [] and MENU_HEADER not in p.pinned()  # nothing pinned before a human accepts
        uri = p.decide(review_id, accept=True)
        assert uri is not None and uri.startswith("crystal://neo/")
        (crystal,) = p.crystals()
        assert (crystal.name, crystal.source, crystal.uri) == (PATTERN, "consolidation", uri)
        assert {e.id for e in crystal.evidence} == set(cited)  # both wraps' citations
        decided = [i for i in p.review(status=None) if i.id == review_id]
        assert [(i.status, i.result_uri) for i in decided] == [("accepted", uri)]
        assert "text" not in decided[0].payload  # a decided item keeps no text
        with pytest.raises(InvalidInput, match="crystallized already"):
            p.crystallize(PATTERN)
        pinned = p.pinned()
        assert f"{PATTERN} | 3x" not in pinned  # out of the always-loaded continuity ...
        assert f"{MENU_HEADER}\n- {PATTERN}" in pinned  # ... a one-line menu entry instead
        assert "Coffee matters | 1x" in pinned
        ops = [e.op for e in p.history(uri)]
        assert ops == ["review", "crystallize"] and p.verify_audit().ok  # the human accept, then the write


def test_bodies_come_on_cue_by_words_or_by_an_evidence_edge(store_path: Path) -> None:
    with _open(store_path) as p:
        graduate(p)
        p.decide(p.crystallize(PATTERN)[0], accept=True)
        p.tiers.crystals.add("Pin dependency versions", "Pin every dependency version in the lock file.")
        # by words: the query shares the crystal's distinctive terms
        words = p.crystal_recall("do friday deploys with migrations fail?")
        assert [(h.crystal.name, h.why) for h in words][:1] == [(PATTERN, "words")]
        # by an evidence edge: no shared word with the crystal, but the query retrieves a memory it cites
        edge = p.crystal_recall(CANARY)
        assert [(h.crystal.name, h.why) for h in edge] == [(PATTERN, "evidence")]
        assert p.crystal_recall("unrelated gardening advice") == []
        page = p.page(CANARY, goal="ship the release")
        rendered = page.render()
        assert CRYSTALS_HEADER in rendered and "cue: evidence" in rendered and "Grounded in:" in rendered
        (friday,) = [c.uri for c in p.crystals() if c.name == PATTERN]
        assert page.report.sections["crystals"].items == 1 and page.crystals.shown == (friday,)
        quiet = p.page("what is for lunch", goal="eat")
        assert CRYSTALS_HEADER not in quiet.render() and "crystals" not in quiet.report.sections
        assert f"- {PATTERN}" in quiet.render()  # the menu is always pinned


def test_the_menu_is_bounded_and_counts_what_it_leaves_out(store_path: Path) -> None:
    cfg = PagerConfig(embedder="hash", embed_workers=0, crystal_menu_budget_tokens=80)
    with mempager.open(store_path, actor="neo", config=cfg) as p:
        for i in range(12):
            p.tiers.crystals.add(f"Proven pattern number {i} about release hygiene")
        block = p.pinned_block()
        assert 0 < block.crystal_menu_tokens <= 80
        assert "more crystals: `mempager crystal list`" in block.text
        assert "Proven pattern number 0 " in block.text and "number 11 " not in block.text


def test_crystals_are_per_actor_and_forgotten_with_their_bytes(store_path: Path) -> None:
    with _open(store_path) as p, _open(store_path, "bob") as bob:
        crystal = p.tiers.crystals.add("Rotate keys quarterly", f"Rotate keys quarterly: {CANARY} was leaked.")
        assert bob.crystals() == [] and bob.crystal_recall("rotate keys quarterly") == []
        assert CRYSTALS_HEADER not in bob.page("rotate keys quarterly").render()
        with pytest.raises(MemoryNotFound):
            bob.forget(crystal.uri)  # another actor's crystal: not found, never confirmed
        with pytest.raises(MemoryNotFound):
            bob.history(crystal.uri)
        p.store.checkpoint()
        assert CANARY.encode() in store_path.read_bytes()
        assert p.forget(crystal.uri, wait=True) == 1
        assert p.crystals() == [] and p.store.erasure_marks() == {}
        assert CANARY.encode() not in store_path.read_bytes()
        assert [e.op for e in p.history(crystal.uri)] == ["crystallize", "forget"]


def test_rejecting_a_proposal_writes_nothing(store_path: Path) -> None:
    with _open(store_path) as p:
        graduate(p)
        (review_id,) = p.crystallize()
        assert p.decide(review_id, accept=False) is None
        assert p.crystals() == [] and p.review(status=None)[0].status == "rejected"


def _cli(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"HF_HUB_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1", "PATH": "/usr/bin:/bin"}
    argv = [sys.executable, "-m", "mempager", *args, "--store", str(store), "--actor", "neo", "--embedder", "hash"]
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=str(store.parent), timeout=120)


@pytest.mark.slow  # seven CLI processes
def test_cli_list_add_review_recall_forget(store_path: Path) -> None:
    with _open(store_path) as p:
        graduate(p)
    listed = _cli(store_path, "crystal", "list")
    assert listed.returncode == 0 and f"ready to crystallize: {PATTERN}" in listed.stdout
    added = _cli(store_path, "crystal", "add", PATTERN, "--json")
    assert added.returncode == 0, added.stderr
    (review_id,) = json.loads(added.stdout)["review"]
    assert _cli(store_path, "review", "--accept", review_id).stdout.startswith("accepted: crystal://neo/")
    recalled = json.loads(_cli(store_path, "crystal", "recall", "friday deploys with migrations", "--json").stdout)
    assert [c["name"] for c in recalled["crystals"]] == [PATTERN]
    bad = _cli(store_path, "crystal", "add", "Not a pattern at all")
    assert bad.returncode == 2 and "not a 3x pattern" in bad.stderr
    assert _cli(store_path, "crystal", "forget", PATTERN).stdout.strip() == "forgot 1 crystal"
    assert "(no crystals yet)" in _cli(store_path, "crystal", "list").stdout
