"""Spores (seed 003's prospective memory) through the real Pager on a real DuckDB file: an open
spore appears in the page in its own section when the turn cues it or it is due, leaves at
completion, is cleaned after the retention period (bytes erased), is per actor, audited, and
forgettable; the CLI (`mempager spore ...`) and the MCP tools (real SDK client over stdio)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import jsonschema
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

import mempager
from mempager import PagerConfig
from mempager.errors import InvalidInput, MemoryNotFound
from mempager.paging.tier_sections import SPORES_HEADER

NOW = datetime(2026, 6, 1, 9, 0, tzinfo=timezone.utc)
CANARY = "qzspore-canary-7731"
CONFIG = PagerConfig(embedder="hash", embed_workers=0, erase_delay_seconds=3600)


def _open(path: Path, actor: str = "neo", **config: object) -> mempager.Pager:
    p = mempager.open(path, actor=actor, config=CONFIG.with_(**config))
    p.clock = lambda: NOW
    return p


def test_cued_and_due_spores_show_in_their_section_until_completed(store_path: Path) -> None:
    with _open(store_path) as p:
        key = p.spore("Rotate the deploy key after the release", cue="deploy key")
        due = p.spore("Send Ana the quarterly report", due="2h")
        plants = p.spore("Water the office plants")  # no cue: its own words cue it
        assert due.due_at == NOW + timedelta(hours=2)
        assert {s.text for s in p.spores()} == {key.text, due.text, plants.text}
        page = p.page("where is the deploy key kept?", goal="ship release 2.4")
        assert page.spores.shown == (key.uri,)  # due in 2h: not yet; plants: not cued
        assert f"{SPORES_HEADER}\n- [{key.uri} · cue] Rotate the deploy key" in page.render()
        assert page.report.sections["spores"].items == 1
        assert p.page("lunch menu").spores.shown == ()  # one shared term of a two-term cue is not enough
        assert "spores" not in p.page("lunch menu").report.sections
        p.clock = lambda: NOW + timedelta(hours=3)
        assert p.page("lunch menu").spores.shown == (due.uri,)  # due now, whatever the turn says
        assert p.page("the office plants need water").spores.shown == (due.uri, plants.uri)  # due ones first
        done = p.complete_spore(key.id)
        assert done.status == "done" and done.done_at == NOW + timedelta(hours=3)
        assert key.uri not in p.page("where is the deploy key kept?").spores.shown
        assert [s.id for s in p.spores("done")] == [key.id] and len(p.spores("all")) == 3
        assert [e.op for e in p.history(key.uri)] == ["spore", "spore.done"]
        with pytest.raises(InvalidInput, match="open, done, all"):
            p.spores("later")
        with pytest.raises(InvalidInput, match="due"):
            p.spore("x", due="someday")


def test_completed_spores_are_cleaned_after_retention_with_their_bytes(store_path: Path) -> None:
    with _open(store_path, spore_retention_days=30) as p:
        old = p.spore(f"Renew the {CANARY} certificate")
        p.complete_spore(old.id)
        p.store.checkpoint()
        assert CANARY.encode() in store_path.read_bytes()
        p.clock = lambda: NOW + timedelta(days=29)
        p.spore("a later intention")  # a spore write cleans: 29 days is within retention
        assert [s.id for s in p.spores("done")] == [old.id]
        p.clock = lambda: NOW + timedelta(days=31)
        p.spore("another intention")
        assert p.spores("done") == [] and p.store.erasure_marks() == {"neo": p.store.erasure_marks()["neo"]}
        p.erase_now()
        assert CANARY.encode() not in store_path.read_bytes()
        assert [e.op for e in p.history(old.uri)] == ["spore", "spore.done", "spore.clean"]


def test_spores_are_per_actor_and_forgettable(store_path: Path) -> None:
    with _open(store_path) as p, _open(store_path, "bob") as bob:
        mine = p.spore("Call the bank about the wire transfer", cue="bank wire")
        assert bob.spores("all") == [] and bob.page("the bank wire transfer").spores.shown == ()
        for attempt in (lambda: bob.complete_spore(mine.id), lambda: bob.drop_spore(mine.id)):
            with pytest.raises(MemoryNotFound):
                attempt()
        with pytest.raises(MemoryNotFound):
            bob.forget(mine.uri)
        assert p.spores()[0].status == "open"  # bob's attempts changed nothing
        dropped = p.drop_spore(mine.uri)
        assert dropped.id == mine.id and p.spores("all") == []
        p.spore("one more", cue="bank wire")
        p.tiers.crystals.add("A crystal")
        p.remember_fact("a fact")
        assert p.forget(actor="neo", where={}, wait=True) == 3  # the fact, the spore, the crystal
        assert p.spores("all") == [] and p.crystals() == [] and p.recall() == []


def _cli(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"HF_HUB_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1", "PATH": "/usr/bin:/bin"}
    argv = [sys.executable, "-m", "mempager", *args, "--store", str(store), "--actor", "neo", "--embedder", "hash"]
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=str(store.parent), timeout=120)


@pytest.mark.slow  # nine CLI processes, ~5 s
def test_cli_add_list_done_drop(store_path: Path) -> None:
    added = json.loads(_cli(store_path, "spore", "add", "Rotate the key", "--cue", "rotate key", "--json").stdout)
    assert added["status"] == "open" and added["cue"] == "rotate key"
    other = _cli(store_path, "spore", "add", "Book the venue", "--due", "3d").stdout.strip()
    assert other.startswith("spore://neo/")
    listed = _cli(store_path, "spore", "list").stdout
    assert "Rotate the key  (cue: rotate key)" in listed and "Book the venue" in listed
    assert _cli(store_path, "spore", "done", added["id"]).stdout.startswith("completed: ")
    assert "Rotate the key" not in _cli(store_path, "spore", "list").stdout
    assert "[done]" in _cli(store_path, "spore", "list", "--done").stdout
    assert _cli(store_path, "spore", "drop", other).stdout.startswith("dropped: ")
    missing = _cli(store_path, "spore", "done", "nope")
    assert missing.returncode != 0 and "no spore 'nope'" in missing.stderr
    assert json.loads(_cli(store_path, "spore", "list", "--all", "--json").stdout)["spores"][0]["status"] == "done"


def test_mcp_spore_and_crystal_tools(store_path: Path) -> None:
    with _open(store_path) as p:
        p.tiers.crystals.add("Pin dependency versions", "Pin every dependency version in the lock file.")
    argv = ["-m", "mempager", "serve", "--store", str(store_path), "--actor", "neo", "--embedder", "hash"]
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    params = StdioServerParameters(command=sys.executable, args=argv, env=env, cwd=str(store_path.parent))

    async def main() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            schemas = {t.name: t.output_schema for t in (await session.list_tools()).tools}

            async def ok(tool: str, **arguments: object) -> dict[str, object]:
                result = await session.call_tool(tool, arguments)
                assert not result.is_error, result.content
                assert result.structured_content is not None
                jsonschema.validate(result.structured_content, schemas[tool])
                return dict(result.structured_content)

            index = await ok("memory_crystal_index")
            assert [c["name"] for c in index["crystals"]] == ["Pin dependency versions"]  # type: ignore[index]
            hits = await ok("memory_crystal_recall", query="should I pin dependency versions?")
            assert hits["crystals"][0]["cue"] == "words"  # type: ignore[index]
            spore = await ok("memory_spore_add", text="Update the changelog", cue="changelog")
            assert spore["status"] == "open"
            paged = await session.call_tool("memory_page", {"query": "edit the changelog"})
            assert "Update the changelog" in str(paged.content)
            assert [s["id"] for s in (await ok("memory_spores"))["spores"]] == [spore["id"]]  # type: ignore[index]
            assert (await ok("memory_spore_done", spore_id=spore["id"]))["status"] == "done"
            assert (await ok("memory_spores"))["spores"] == []
            dropped = await ok("memory_spore_drop", spore_id=str(spore["uri"]))
            assert dropped["id"] == spore["id"]
            missing = await session.call_tool("memory_spore_done", {"spore_id": "nope"})
            assert missing.is_error and "no spore" in str(missing.content)

    asyncio.run(asyncio.wait_for(main(), 120))
