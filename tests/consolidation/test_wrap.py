"""Session wraps through the real Pager on a real DuckDB file: three scripted sessions end to end,
refusals that change nothing, crash recovery, the shrink and single-consolidator gates, the
pinned continuity, and forget cascading to association links (bytes included)."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import mempager
from mempager import PagerConfig
from mempager.consolidation import Affect
from mempager.errors import ContinuityInvalid, ShrinkRefused, WrapNotOpen
from mempager.fence import FENCE_CLOSE, FENCE_OPEN

DAY0 = datetime(2026, 5, 4, 9, 0, tzinfo=timezone.utc)
REPO = Path(__file__).resolve().parents[2]


def _open(path: Path) -> mempager.Pager:
    return mempager.open(path, actor="neo", config=PagerConfig(embedder="hash", embed_workers=0))


def at(p: mempager.Pager, days: int) -> None:
    p.clock = lambda: DAY0 + timedelta(days=days)


def continuity(state: str, *patterns: str, understanding: str | None = None) -> str:
    text = (
        f"## State\n{state}\n## Patterns\n"
        + "\n".join(patterns)
        + "\n## Decisions\nShip small.\n## Context\nTwo people.\n"
    )
    return text + (f"## Understanding\n{understanding}\n" if understanding is not None else "")


def ids(p: mempager.Pager) -> list[str]:
    wrap = p.prepare_wrap()
    assert wrap.status == "ready"
    return [e.id for e in wrap.episodes]


def test_three_sessions_graduate_demote_carry_forward_link_and_pin(store_path: Path) -> None:
    with _open(store_path) as p:
        # session 1: two Friday failures -> a 2x pattern, linked
        at(p, 0)
        p.remember("event", "The deploy failed on Friday because the migration locked the users table.")
        p.remember("event", "Second Friday deploy failed again: the migration locked users for minutes.")
        p.remember("event", "Coffee machine on floor three is broken.")
        e1, e2, _ = ids(p)
        first = p.save_continuity(
            continuity(
                "Deploy week.",
                "- Friday deploys with migrations fail | 2x (2026-05-04)"
                f' [evidence: {e1} "deploy failed friday migration"] [evidence: {e2} "friday deploy migration locked"]',
                "- Coffee matters | 1x (2026-05-04)",
            ),
            affect=Affect("curious", 0.5),
        )
        assert [(c.name, c.to_level) for c in first.graduated] == [("Friday deploys with migrations fail", 2)]
        assert first.linked.created == 1
        # session 2: re-grounded in new episodes -> 3x; a bare 2x and a fabricated 3x demote
        at(p, 2)
        p.remember("event", "Tuesday release with a schema migration stalled the orders table for an hour.")
        p.remember("event", "The payments release migration stalled again and blocked checkout.")
        wrap = p.prepare_wrap()
        assert "Friday deploys with migrations fail | 2x" in wrap.package and e1 not in [e.id for e in wrap.episodes]
        e4, e5 = (e.id for e in wrap.episodes)
        second = p.save_continuity(
            continuity(
                "Releases.",
                f'- Friday deploys with migrations fail | 3x (2026-05-06) [evidence: {e4} "release schema migration'
                f' stalled"] [evidence: {e5} "payments release migration blocked"] [no-contradicts]',
                "- Coffee matters | 2x (2026-05-06)",
                f'- Mondays are cursed | 3x (2026-05-06) [evidence: {e1} "deploy failed friday migration"]',
            )
        )
        assert [(c.name, c.to_level) for c in second.graduated] == [("Friday deploys with migrations fail", 3)]
        demoted = {c.name: (c.to_level, c.reason) for c in second.demoted}
        assert demoted["Coffee matters"][0] == 1 and "evidence" in demoted["Coffee matters"][1]
        assert (
            demoted["Mondays are cursed"][0] == 1
            and "not one of this wrap's episodes" in demoted["Mondays are cursed"][1]
        )
        assert second.missing_stance == ()
        # session 3: the 3x fails to re-ground but was grounded 3 days ago -> held, carried forward
        at(p, 5)
        p.remember("event", "Quiet day, wrote docs.")
        (e7,) = ids(p)
        third = p.save_continuity(
            continuity(
                "Docs.",
                f'- Friday deploys with migrations fail | 3x (2026-05-09) [evidence: {e7} "friday deploy migration"]',
            )
        )
        assert [(c.name, c.to_level, c.outcome) for c in third.held] == [
            ("Friday deploys with migrations fail", 3, "held")
        ]
        saved = p.continuity()
        assert "| 3x (2026-05-09) (carried-forward)" in saved and e7 not in saved
        links = {(k.a, k.b): k for k in p.store.consolidation.links("neo")}
        assert sorted(round(k.strength, 4) for k in links.values()) == [0.9, round(1.25 * 0.81, 4)]
        assert {k.affect_tag for k in links.values()} == {"curious", None}
        # the continuity is pinned, fenced as data, under its own budget
        pinned = p.pinned()
        assert FENCE_OPEN in pinned and pinned.index("(carried-forward)") < pinned.index(FENCE_CLOSE)
        assert "### Patterns" in pinned and "\n## Patterns" not in pinned
        page = p.page("what fails on fridays?")
        assert page.report.sections["continuity"].tokens > 0 and "carried-forward" in page.render()
        # a week on, the 3x is stale in the next package
        at(p, 13)
        p.remember("event", "Monday planning.")
        package = p.prepare_wrap().package
        stale_part = package.split("## Stale patterns")[1].split("## Proven")[0]
        assert "Friday deploys with migrations fail | 3x (last grounded 2026-05-06)" in stale_part
        assert [w.number for w in p.consolidation.wraps()] == [4, 3, 2, 1]
        assert [v.version for v in p.consolidation.versions()] == [3, 2, 1]
        ops = [e.op for e in p.audit()]
        assert ops.count("wrap.prepare") == 4 and ops.count("wrap.save") == 3 and "pattern.held" in ops
        assert p.verify_audit().ok


def test_refusals_change_nothing_and_a_second_save_needs_a_new_prepare(store_path: Path) -> None:
    with _open(store_path) as p:
        assert p.prepare_wrap().status == "empty" and p.continuity() == ""
        with pytest.raises(WrapNotOpen, match="prepare_wrap"):
            p.save_continuity(continuity("x"))
        p.remember("event", "Something happened.")
        number = p.prepare_wrap().number
        with pytest.raises(ContinuityInvalid, match="missing '## Decisions'"):
            p.save_continuity("## State\nx\n## Patterns\n## Context\ny\n")
        assert p.continuity() == "" and p.prepare_wrap().number == number  # still open, same wrap
        p.save_continuity(continuity("x"))
        with pytest.raises(WrapNotOpen):
            p.save_continuity(continuity("again"))
        assert [e.op for e in p.audit()].count("wrap.refused") == 1


def test_a_crash_between_prepare_and_save_is_recoverable(store_path: Path) -> None:
    script = (
        "import os, sys, mempager\n"
        "p = mempager.open(sys.argv[1], actor='neo', config=mempager.PagerConfig(embedder='hash', embed_workers=0))\n"
        "p.remember('event', 'The deploy failed on Friday because the migration locked the users table.')\n"
        "w = p.prepare_wrap()\n"
        "print(w.number, w.episodes[0].id, flush=True)\n"
        "os._exit(9)  # killed: no close, no save\n"
    )
    out = subprocess.run([sys.executable, "-c", script, str(store_path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 9, out.stderr
    number, episode = out.stdout.split()
    with _open(store_path) as p:
        wrap = p.prepare_wrap()
        assert (wrap.number, [e.id for e in wrap.episodes]) == (int(number), [episode])
        result = p.save_continuity(
            continuity("x", f'- Friday deploys fail | 2x (2026-05-04) [evidence: {episode} "deploy failed friday"]')
        )
        assert result.saved and result.graduated and p.verify_audit().ok


def test_partnership_schema_refuses_a_catastrophic_shrink_unless_allowed(store_path: Path) -> None:
    with _open(store_path) as p:
        p.set_section_schema("partnership")
        p.remember("event", "We talked for an hour about what matters.")
        p.prepare_wrap()
        felt = "We trust each other; humour carries the hard days; we argue well and make up fast."
        p.save_continuity(continuity("x", understanding=felt))
        p.remember("event", "Short chat.")
        p.prepare_wrap()
        with pytest.raises(ShrinkRefused, match="Understanding"):
            p.save_continuity(continuity("x", understanding="We are fine."))
        assert felt in p.continuity()
        with pytest.raises(ContinuityInvalid, match="Understanding"):
            p.save_continuity(continuity("x"))  # the timeless section is required too
        assert p.save_continuity(continuity("x", understanding="We are fine."), allow_shrink=True).saved


def test_single_consolidator_gate_downgrades_other_sessions(store_path: Path) -> None:
    with _open(store_path) as p:
        p.remember("event", "Parallel sessions are running.")
        p.prepare_wrap(session_id="seat-a")
        downgraded = p.save_continuity(continuity("x"), session_id="seat-b")
        assert (downgraded.saved, downgraded.capture_only) == (False, True) and p.continuity() == ""
        p.consolidation.take_baton("seat-b")
        assert p.save_continuity(continuity("x"), session_id="seat-b").saved
        assert "wrap.capture-only" in [e.op for e in p.audit()]


def test_forget_cascades_to_links_and_their_bytes_leave_the_file(store_path: Path) -> None:
    tag = "quxzwyfelt"
    with _open(store_path) as p:
        p.store.db.fetch("SET force_compression = 'uncompressed'")
        u1 = p.remember("event", "The deploy failed on Friday because the migration locked the users table.")
        p.remember("event", "Second Friday deploy failed again: the migration locked users for minutes.")
        e1, e2 = ids(p)
        p.save_continuity(
            continuity(
                "x",
                f'- Friday deploys fail | 2x (2026-05-04) [evidence: {e1} "deploy failed friday"]'
                f' [evidence: {e2} "friday deploy migration"]',
            ),
            affect=Affect(tag, 0.9),
        )
        assert len(p.store.consolidation.links("neo")) == 1
        p.store.checkpoint()
        assert tag.encode() in store_path.read_bytes()
        p.forget(u1, wait=True)
        assert p.store.consolidation.links("neo") == []
    assert tag.encode() not in store_path.read_bytes()
    assert (
        not Path(str(store_path) + ".wal").exists() or tag.encode() not in Path(str(store_path) + ".wal").read_bytes()
    )


def test_the_async_pager_wraps_too(store_path: Path) -> None:
    import asyncio

    from mempager.aio import AsyncPager

    async def main() -> None:
        async with AsyncPager(_open(store_path)) as p:
            await p.remember("event", "Something happened today.")
            wrap = await p.prepare_wrap()
            assert wrap.status == "ready"
            assert (await p.save_continuity(continuity("Async."))).saved
            assert "Async." in await p.continuity()

    asyncio.run(main())
