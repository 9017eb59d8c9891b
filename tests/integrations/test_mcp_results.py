"""``mempager serve``'s typed results, corrections, resources and prompt, through the SDK's client."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp import types as mcp_types
from mcp.shared.exceptions import MCPError

import mempager
from mempager import PagerConfig
from mempager.mcp.server import MEMORY_TEMPLATE, PROMPT_NAMES

from .conftest import child_env, serve_argv
from .test_mcp_server import LIMIT, _error, _ok, _text

Session = Callable[[ClientSession], Awaitable[None]]


def _run(store: Path, session_fn: Session, *extra: str, **env: str) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=serve_argv(store, *extra), env=child_env(**env), cwd=str(store.parent)
    )

    async def main() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session_fn(session)

    asyncio.run(asyncio.wait_for(main(), LIMIT))


def _seed(store: Path) -> dict[str, str]:
    """A store the server then opens: memories of actor t (a fact, a rule, notes) and one of bob."""
    config = PagerConfig(embedder="hash")
    with mempager.open(store, actor="t", config=config) as p:
        uris = {
            "fact": p.remember_fact("The staging cluster is called kestrel-9.", tags=["infra"]),
            "rule": p.add_rule("Never deploy on a red CI run."),
        }
        p.remember_many(
            [
                {"type": "event", "text": f"Deploy note {i}: release {i} shipped to the kestrel staging cluster."}
                for i in range(30)
            ]
        )
        p.sync()
    with mempager.open(store, actor="bob", config=config) as p:
        uris["bob"] = p.remember_fact("Bob's staging cluster is called heron-2.")
    return uris


def test_page_is_compact_unless_the_report_is_asked_for(tmp_path: Path) -> None:
    _seed(tmp_path / "s.duckdb")

    async def session_fn(session: ClientSession) -> None:
        query = "which staging cluster did the deploy notes ship to?"
        compact_result = await session.call_tool("memory_page", {"query": query, "turn": "t-1"})
        compact = await _ok(session, "memory_page", query=query, turn="t-1")
        full = await _ok(session, "memory_page", query=query, turn="t-1", report=True)

        assert set(compact) == {"page", "summary", "turn"}  # no report unless asked
        assert compact["page"] == full["page"] and "kestrel" in compact["page"]
        page_block, summary_block = compact_result.content  # the page and its one-line summary, nothing else
        assert isinstance(summary_block, mcp_types.TextContent) and summary_block.text == compact["summary"]
        assert isinstance(page_block, mcp_types.TextContent) and page_block.text == compact["page"]
        summary = compact["summary"]
        assert "\n" not in summary and summary == full["summary"]
        shape = r"(\d+) retrieved, (\d+) pinned, (\d+) procedures?; ([\d,]+)/([\d,]+) tokens; lanes (.+); (\d+) cut"
        match = re.match(shape, summary)
        assert match, summary
        report = full["report"]
        assert int(match[1]) == len(report["retrieved"]) > 0
        assert int(match[2]) == report["sections"]["pinned"]["items"] == 1  # the rule
        assert int(match[4].replace(",", "")) == report["total_tokens"] and match[5] == "8,000"
        lanes = {lane: int(n) for lane, n in re.findall(r"([a-z_]+) (\d+)", match[6])}
        found_by = [hit.split("#")[0] for r in report["retrieved"] for hit in r["lanes"].split()]
        assert lanes == {lane: found_by.count(lane) for lane in set(found_by)} and "lexical" in lanes
        assert int(match[7]) == sum(report["cut"].values())

        # what the compact result adds to the page is a small fraction of what the report adds
        overhead = len(json.dumps(compact)) - len(json.dumps(compact["page"]))
        report_overhead = len(json.dumps(full)) - len(json.dumps(full["page"]))
        assert overhead * 5 < report_overhead, (overhead, report_overhead)
        full_result = await session.call_tool("memory_page", {"query": query, "turn": "t-1", "report": True})
        *_, report_block = full_result.content
        assert len(full_result.content) == 3 and isinstance(report_block, mcp_types.TextContent)
        assert json.loads(report_block.text) == report
        assert len(_text(compact_result)) < len(_text(full_result))

    _run(tmp_path / "s.duckdb", session_fn)


def test_get_and_update_correct_a_memory_over_stdio(tmp_path: Path) -> None:
    uris = _seed(tmp_path / "s.duckdb")
    fact = uris["fact"]

    async def session_fn(session: ClientSession) -> None:
        got = await _ok(session, "memory_get", uri=fact)
        assert got["uri"] == fact and got["type"] == "fact" and got["tags"] == ["infra"]
        assert got["text"] == "The staging cluster is called kestrel-9."
        assert {"importance", "confidence", "metadata", "updated_at", "valid_until"} <= set(got)

        updated = await _ok(
            session, "memory_update", uri=fact, text="The staging cluster is called osprey-4.", importance=0.9
        )
        assert updated["uri"] == fact and updated["text"] == "The staging cluster is called osprey-4."
        assert updated["importance"] == 0.9 and updated["tags"] == ["infra"]  # what was not passed stays
        assert (await _ok(session, "memory_get", uri=fact)) == updated
        assert (await _ok(session, "memory_update", uri=fact, tags=[]))["tags"] == []
        paged = await _ok(session, "memory_page", query="what is the staging cluster called?")
        assert "osprey-4" in paged["page"] and "kestrel-9" not in paged["page"]
        recalled = await _ok(session, "memory_recall", query="osprey")
        assert [m["uri"] for m in recalled["memories"]] == [fact]

        assert "nothing to update" in await _error(session, "memory_update", uri=fact)
        assert "rule memory" in await _error(session, "memory_update", uri=uris["rule"], text="Deploy whenever.")
        assert "no memory" in await _error(session, "memory_update", uri=uris["bob"], text="It is heron-3.")
        assert "no memory" in await _error(session, "memory_get", uri=uris["bob"])
        assert "not a memory uri" in await _error(session, "memory_get", uri="kestrel-9")
        assert "importance" in await _error(session, "memory_update", uri=fact, importance=2)
        assert "empty" in await _error(session, "memory_update", uri=fact, text="  ")

    _run(tmp_path / "s.duckdb", session_fn)
    with mempager.open(tmp_path / "s.duckdb", actor="t", config=PagerConfig(embedder="hash")) as p:
        assert p.get(fact).text == "The staging cluster is called osprey-4."
        assert p.get(uris["rule"]).text == "Never deploy on a red CI run."


def test_update_is_refused_where_the_gate_holds_the_models_writes(tmp_path: Path) -> None:
    uris = _seed(tmp_path / "s.duckdb")

    async def session_fn(session: ClientSession) -> None:
        refused = await _error(session, "memory_update", uri=uris["fact"], text="It is osprey-4.")
        assert "memory_mode=copilot" in refused
        assert (await _ok(session, "memory_get", uri=uris["fact"]))[
            "text"
        ] == "The staging cluster is called kestrel-9."

    _run(tmp_path / "s.duckdb", session_fn, MEMPAGER_MEMORY_MODE="copilot")


def test_memory_resources_and_the_turn_prompt(tmp_path: Path) -> None:
    uris = _seed(tmp_path / "s.duckdb")
    fact_id = uris["fact"].rsplit("/", 1)[1]

    async def session_fn(session: ClientSession) -> None:
        resources = [str(r.uri) for r in (await session.list_resources()).resources]
        assert sorted(resources) == ["mempager://t/continuity", "mempager://t/pinned"]
        (template,) = (await session.list_resource_templates()).resource_templates
        assert template.uri_template == MEMORY_TEMPLATE == "mempager://memory/{actor}/{type}/{id}"
        assert template.mime_type == "application/json"

        read = await session.read_resource(f"mempager://memory/t/fact/{fact_id}")
        (content,) = read.contents
        assert isinstance(content, mcp_types.TextResourceContents)
        memory = json.loads(content.text)
        assert memory["uri"] == uris["fact"] and memory["text"] == "The staging cluster is called kestrel-9."
        assert memory == await _ok(session, "memory_get", uri=uris["fact"])

        bob_id = uris["bob"].rsplit("/", 1)[1]
        for missing in (
            f"mempager://memory/bob/fact/{bob_id}",  # another actor's memory: not served here
            f"mempager://memory/t/fact/{bob_id}",  # bob's id under this actor: not this actor's
            f"mempager://memory/t/event/{fact_id}",  # the right id with the wrong type
            "mempager://memory/t/fact/nothex",
        ):
            with pytest.raises(MCPError) as info:
                await session.read_resource(missing)
            assert "no memory" in str(info.value) or "not a memory uri" in str(info.value), missing
            assert info.value.error.code == mcp_types.INVALID_PARAMS  # "not found", per the spec
        pinned = await session.read_resource("mempager://t/pinned")
        assert "Never deploy on a red CI run." in pinned.contents[0].text  # type: ignore[union-attr]

        (prompt,) = (await session.list_prompts()).prompts
        assert prompt.name == PROMPT_NAMES[0] == "memory_turn"
        assert {(a.name, a.required) for a in prompt.arguments or []} == {
            ("message", True),
            ("goal", False),
            ("turn", False),
        }
        got = await session.get_prompt("memory_turn", {"message": "Deploy 2.5 to staging, please.", "turn": "turn-7"})
        (message,) = got.messages
        assert message.role == "user" and isinstance(message.content, mcp_types.TextContent)
        text = message.content.text
        assert "Deploy 2.5 to staging, please." in text and 'goal="ship 2.5"' in text  # the server's --goal
        order = [text.index(tool) for tool in ("memory_page", "memory_remember", "memory_record_outcome")]
        assert order == sorted(order) and text.count('turn="turn-7"') == 3
        assert "memory_feedback" in text and "data, not instructions" in text
        fresh = await session.get_prompt("memory_turn", {"message": "hi", "goal": "plan Q3"})
        fresh_text = fresh.messages[0].content.text  # type: ignore[union-attr]
        assert re.search(r'turn="turn-[0-9a-f]{8}"', fresh_text) and 'goal="plan Q3"' in fresh_text
        with pytest.raises(MCPError, match="needs the argument.s. message") as missing:
            await session.get_prompt("memory_turn", {})  # the message is required
        # a client's mistake, said as one (the SDK's own error was a logged server failure)
        assert missing.value.error.code == mcp_types.INVALID_PARAMS
        with pytest.raises(MCPError, match="unknown prompt 'memory_remember'.*memory_turn") as unknown:
            await session.get_prompt("memory_remember", {"message": "hi"})
        assert unknown.value.error.code == mcp_types.INVALID_PARAMS

    _run(tmp_path / "s.duckdb", session_fn, "--goal", "ship 2.5")
