"""The wrap tools and the continuity resource of `mempager serve`, through the MCP SDK's stdio client."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import jsonschema
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp import types as mcp_types

import mempager
from mempager import PagerConfig

LIMIT = 120


def _env() -> dict[str, str]:
    return {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1"}


async def _ok(session: ClientSession, schemas: dict[str, object], tool: str, **arguments: object) -> dict[str, object]:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    jsonschema.validate(result.structured_content, schemas[tool])
    return dict(result.structured_content)


def test_prepare_save_and_read_the_continuity_over_mcp(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    with mempager.open(store, actor="t", config=PagerConfig(embedder="hash")) as p:
        p.remember("event", "The deploy failed on Friday because the migration locked the users table.")
        p.remember("event", "Second Friday deploy failed again: the migration locked users for minutes.")
    argv = ["-m", "mempager", "serve", "--store", str(store), "--actor", "t", "--embedder", "hash"]
    params = StdioServerParameters(command=sys.executable, args=argv, env=_env(), cwd=str(tmp_path))

    async def main() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            schemas = {t.name: t.output_schema for t in (await session.list_tools()).tools}
            assert {"memory_prepare_wrap", "memory_save_continuity"} <= set(schemas)
            wrap = await _ok(session, schemas, "memory_prepare_wrap")
            assert wrap["status"] == "ready" and "## Episodes" in str(wrap["package"])
            e1, e2 = (e["id"] for e in wrap["episodes"])  # type: ignore[attr-defined]
            text = (
                "## State\nDeploys.\n## Patterns\n"
                f'- Friday deploys fail | 2x (2026-05-04) [evidence: {e1} "deploy failed friday"]'
                f' [evidence: {e2} "friday deploy migration"]\n## Decisions\n-\n## Context\n-\n'
            )
            saved = await _ok(
                session, schemas, "memory_save_continuity", text=text, affect_tag="curious", affect_intensity=0.7
            )
            assert saved["saved"] and saved["graduated"][0]["to_level"] == 2  # type: ignore[index]
            assert saved["linked"]["created"] == 1  # type: ignore[index]
            again = await session.call_tool("memory_save_continuity", {"text": text})
            assert again.is_error and "prepare_wrap" in str(again.content)
            contents = (await session.read_resource("mempager://t/continuity")).contents
            assert isinstance(contents[0], mcp_types.TextResourceContents)
            assert "Friday deploys fail | 2x" in contents[0].text
            pinned = (await session.read_resource("mempager://t/pinned")).contents[0]
            assert isinstance(pinned, mcp_types.TextResourceContents) and "Friday deploys fail" in pinned.text

    asyncio.run(asyncio.wait_for(main(), LIMIT))
