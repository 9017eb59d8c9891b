"""``mempager serve`` driven by the MCP SDK's own clients, over stdio and streamable HTTP."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import select
import signal
import socket
import subprocess
import sys
import time
import weakref
from pathlib import Path
from typing import Any

import httpx
import httpx2
import jsonschema
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp import types as mcp_types
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver.exceptions import ToolError

from mempager.cli.main import build_parser
from mempager.mcp.server import TOOL_NAMES, _call

from .conftest import REPO, child_env, serve_argv

HTTP_TOKEN = "test-token-" + "t" * 32
LIMIT = 120  # seconds: a hung server fails the test instead of hanging the suite
TOOLS = {
    "memory_remember",
    "memory_page",
    "memory_recall",
    "memory_get",
    "memory_update",
    "memory_record_outcome",
    "memory_reinforce_pattern",
    "memory_feedback",
    "memory_forget",
    "memory_stats",
    "memory_prepare_wrap",
    "memory_save_continuity",
    *(f"memory_{n}" for n in ("crystal_index", "crystal_recall", "spore_add", "spores", "spore_done", "spore_drop")),
}
# each session's tools' output schemas, as list_tools published them
_SCHEMAS: weakref.WeakKeyDictionary[ClientSession, dict[str, Any]] = weakref.WeakKeyDictionary()


def _text(result: mcp_types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, mcp_types.TextContent))


async def _output_schema(session: ClientSession, tool: str) -> dict[str, Any]:
    if session not in _SCHEMAS:
        _SCHEMAS[session] = {t.name: t.output_schema for t in (await session.list_tools()).tools}
    schema = _SCHEMAS[session][tool]
    assert schema is not None and schema["type"] == "object", f"{tool} publishes no output schema"
    return dict(schema)


async def _ok(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool that must succeed; its structuredContent must match the tool's outputSchema."""
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, _text(result)
    assert result.structured_content is not None
    jsonschema.validate(result.structured_content, await _output_schema(session, tool))
    return dict(result.structured_content)


async def _error(session: ClientSession, tool: str, **arguments: Any) -> str:
    result = await session.call_tool(tool, arguments)
    assert result.is_error, f"{tool} should have failed: {_text(result)}"
    return _text(result)


async def _memory_session(session: ClientSession) -> None:
    init = await session.initialize()
    assert init.server_info.name == "mempager" and "memory_page" in (init.instructions or "")
    listed = (await session.list_tools()).tools
    assert {t.name for t in listed} == TOOLS == set(TOOL_NAMES)
    assert all(t.description and "Call it" in t.description for t in listed)
    for tool in listed:  # typed results: every tool publishes the schema of what it returns
        schema = tool.output_schema
        assert schema is not None and schema["type"] == "object" and schema["properties"], tool.name
        jsonschema.Draft202012Validator.check_schema(schema)

    uris = [
        (await _ok(session, "memory_remember", text="The deploy key is in vault at secret/billing/deploy."))["uri"],
        (await _ok(session, "memory_remember", text="Ana prefers squash merges.", type="preference", tags=["git"]))[
            "uri"
        ],
        (await _ok(session, "memory_remember", text="Ana is tech lead of billing.", type="profile"))["uri"],
    ]
    assert len(set(uris)) == 3 and all(u.startswith("mem://t/") for u in uris)

    paged = await _ok(
        session, "memory_page", query="deploy key, merges and the billing lead", goal="ship 2.4", report=True
    )
    assert all(u in paged["page"] for u in uris[:2])  # retrieved, each line naming its uri
    assert "Ana is tech lead of billing." in paged["page"]  # the profile is pinned
    assert "ship 2.4" in paged["page"]
    assert {s["uri"] for s in paged["report"]["retrieved"]} >= set(uris[:2])

    assert (await _ok(session, "memory_forget", uri=uris[0])) == {"forgotten": uris[0]}
    paged = await _ok(session, "memory_page", query="where is the deploy key?")
    assert uris[0] not in paged["page"] and "secret/billing/deploy" not in paged["page"]
    recalled = await _ok(session, "memory_recall", types=["fact", "preference"])
    assert [m["uri"] for m in recalled["memories"]] == [uris[1]]

    # bad input is a tool error with mempager's message; the server keeps serving
    assert "no memory mem://t/fact/" in await _error(session, "memory_forget", uri=uris[0])
    assert "not a memory uri" in await _error(session, "memory_forget", uri="deploy-key")
    assert "empty or whitespace only" in await _error(session, "memory_remember", text="   ")
    assert "outcome" in await _error(session, "memory_feedback", turn="t1", outcome="maybe")
    assert "Unknown tool" in await _error(session, "remember", text="x")  # the bare names are gone
    assert (await _ok(session, "memory_stats"))["memories"] == 2

    # concurrent requests on one session: each runs in its own worker thread
    writes = [_ok(session, "memory_remember", text=f"Concurrent note {i}.", type="event") for i in range(6)]
    reads = [_ok(session, "memory_page", query=f"concurrent note {i}") for i in range(6)]
    results, _ = await asyncio.gather(asyncio.gather(*writes, *reads), session.send_ping())
    assert len({r["uri"] for r in results[:6]}) == 6 and all("page" in r for r in results[6:])
    assert (await _ok(session, "memory_stats"))["memories"] == 8


async def _procedure_session(session: ClientSession) -> None:
    await session.initialize()
    for _ in range(3):
        pattern = await _ok(
            session,
            "memory_reinforce_pattern",
            name="cut a release",
            trigger="ship a release",
            steps=["branch from main", "bump the version", "make deploy"],
        )
    assert pattern["successes"] == 3 and pattern["injected_in_pages"] and pattern["stage"] == "reinforced"
    paged = await _ok(session, "memory_page", query="what first?", goal="ship a release", turn="turn-1")
    assert "Pattern: cut a release" in paged["page"] and paged["turn"] == "turn-1"
    assert "1 procedure;" in paged["summary"]
    assert "did not inject" in await _error(session, "memory_feedback", turn="turn-1", outcome="success", used=["nope"])
    assert (await _ok(session, "memory_feedback", turn="turn-1", outcome="success", used=["cut a release"]))[
        "patterns_updated"
    ] == 1
    # the same feedback again is a no-op, not an error: the turn is known
    assert (await _ok(session, "memory_feedback", turn="turn-1", outcome="success"))["patterns_updated"] == 0
    await _ok(session, "memory_page", query="what first?", goal="ship a release", turn="turn-2")
    outcome = await _ok(
        session, "memory_record_outcome", summary="release 2.4 failed in CI", outcome="failure", turn="turn-2"
    )
    assert outcome["uri"].startswith("mem://t/outcome/") and outcome["status"] == "stored"
    after = await _ok(session, "memory_reinforce_pattern", name="cut a release", steps=["branch from main"])
    assert after["failures"] == 1 and after["successes"] == 5  # 3 + feedback + this reinforcement

    # feedback for a turn no page recorded procedures for is an error, not a silent "0 updated"
    unknown = await _error(session, "memory_feedback", turn="never-paged", outcome="success")
    assert "unknown turn 'never-paged'" in unknown and "memory_page" in unknown
    await _ok(session, "memory_page", query="what first?", goal="an unrelated goal", turn="turn-3")
    assert "unknown turn" in await _error(session, "memory_feedback", turn="turn-3", outcome="failure")
    pattern = await _ok(session, "memory_reinforce_pattern", name="cut a release", steps=["branch from main"])
    assert (pattern["successes"], pattern["failures"]) == (6, 1)  # neither error touched the pattern

    resources = (await session.list_resources()).resources
    assert sorted(str(r.uri) for r in resources) == ["mempager://t/continuity", "mempager://t/pinned"]
    await _ok(session, "memory_remember", text="Ana is tech lead of billing.", type="profile")
    pinned = await session.read_resource("mempager://t/pinned")
    (content,) = pinned.contents
    assert isinstance(content, mcp_types.TextResourceContents)
    assert "Ana is tech lead of billing." in content.text and "ship 2.4" in content.text


def test_stdio_server_remembers_pages_forgets_and_survives_bad_input(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=serve_argv(tmp_path / "s.duckdb"), env=child_env(), cwd=str(tmp_path)
    )

    async def main() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await _memory_session(session)

    asyncio.run(asyncio.wait_for(main(), LIMIT))


def test_patterns_feedback_and_pinned_resource_over_stdio(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=serve_argv(tmp_path / "s.duckdb", "--goal", "ship 2.4"),
        env=child_env(),
        cwd=str(tmp_path),
    )

    async def main() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await _procedure_session(session)

    asyncio.run(asyncio.wait_for(main(), LIMIT))


def test_stdout_carries_only_protocol_and_eof_shuts_down_cleanly(tmp_path: Path) -> None:
    """A harness speaking an older protocol version; every stdout line must be JSON-RPC."""
    messages: list[dict[str, Any]] = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "memory_remember", "arguments": {"text": "raw clients work too"}},
        },
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "memory_stats", "arguments": {}}},
    ]
    proc = subprocess.Popen(
        [sys.executable, *serve_argv(tmp_path / "s.duckdb")],
        cwd=tmp_path,
        env=child_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    replies: dict[int, Any] = {}
    for message in messages:  # one at a time: the server may answer out of order otherwise
        proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()
        if "id" in message:
            ready, _, _ = select.select([proc.stdout], [], [], LIMIT)
            assert ready, "no reply from the server"
            reply = json.loads(proc.stdout.readline())  # a stray print would fail to parse here
            replies[reply["id"]] = reply
    rest, stderr = proc.communicate(timeout=30)  # closes stdin: how a harness hangs up
    assert proc.returncode == 0, stderr
    assert rest.strip() == ""
    assert replies[1]["result"]["serverInfo"]["name"] == "mempager"
    assert replies[2]["result"]["structuredContent"]["status"] == "stored"
    assert replies[3]["result"]["structuredContent"]["memories"] == 1
    assert "mempager MCP server on stdio" in stderr  # logging goes to stderr


def test_unusable_store_fails_fast_with_one_clear_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, *serve_argv(tmp_path / "s.duckdb", "--actor", "no/slashes")],
        cwd=tmp_path,
        env=child_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert "mempager: error: actor 'no/slashes' is not usable" in done.stderr


def test_missing_sdk_is_one_line_naming_the_extra(tmp_path: Path) -> None:
    # sys.modules["mcp"] = None makes `import mcp` fail exactly as it does when the SDK is absent
    code = (
        "import sys; sys.modules['mcp'] = None\nfrom mempager.cli.main import main\n"
        f"sys.exit(main({serve_argv(tmp_path / 's.duckdb')[2:]!r}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("mempager: error: mempager serve needs the MCP Python SDK 2.x")
    assert "pip install 'mempager[mcp]'" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "s.duckdb").exists()  # failed before touching the store


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_port(port: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1]
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"server did not listen on 127.0.0.1:{port}")


def _listening_addresses(port: int) -> set[str]:
    listening = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, hex_port = local.split(":")
        if int(hex_port, 16) == port and state == "0A":
            listening.add(socket.inet_ntoa(bytes.fromhex(address)[::-1]))
    return listening


def test_streamable_http_on_loopback_and_sigterm_closes_the_pager(tmp_path: Path) -> None:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, *serve_argv(tmp_path / "s.duckdb", "--http", "--port", str(port))],
        cwd=tmp_path,
        env=child_env(MEMPAGER_HTTP_TOKEN=HTTP_TOKEN),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for_port(port, proc)
        if Path("/proc/net/tcp").exists():  # Linux: ask the kernel what the socket is bound to
            assert _listening_addresses(port) == {"127.0.0.1"}
        bearer = {"Authorization": f"Bearer {HTTP_TOKEN}"}  # serve --http requires it (test_http_guard.py)
        foreign = httpx.post(f"http://127.0.0.1:{port}/mcp", headers={"Host": "evil.example", **bearer}, json={})
        assert foreign.status_code == 403  # DNS-rebinding guard: only loopback Host headers

        async def main() -> None:
            url = f"http://127.0.0.1:{port}/mcp"
            async with (
                httpx2.AsyncClient(headers=bearer) as client,
                streamable_http_client(url, http_client=client) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                assert {t.name for t in (await session.list_tools()).tools} == TOOLS
                await _ok(session, "memory_remember", text="over http")
                assert "empty" in await _error(session, "memory_remember", text="")
                assert (await _ok(session, "memory_stats"))["memories"] == 1

        asyncio.run(asyncio.wait_for(main(), LIMIT))
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert out == ""
    # the pager closed on SIGTERM: its index manifest was saved next to the store
    assert any(p.name.startswith("s.duckdb.index") for p in tmp_path.iterdir()), sorted(tmp_path.iterdir())


def test_unexpected_exceptions_become_tool_errors_and_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    def broken() -> None:
        raise ZeroDivisionError("secret detail")

    with caplog.at_level(logging.ERROR, logger="mempager.mcp"), pytest.raises(ToolError) as info:
        asyncio.run(_call("page", broken))
    assert "internal error in mempager (ZeroDivisionError) during page" in str(info.value)
    assert "secret detail" not in str(info.value)  # the text stays in the server's log
    (record,) = caplog.records
    assert record.exc_info is not None and "secret detail" in str(record.exc_info[1])


def test_readme_config_snippets_start_this_server() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Use it from an agent") :]
    (as_json,) = re.findall(r"```json\n(.*?)```", section, re.S)
    (as_toml,) = re.findall(r"```toml\n(.*?)```", section, re.S)
    entries = [json.loads(as_json)["mcpServers"]["mempager"], tomllib.loads(as_toml)["mcp_servers"]["mempager"]]
    assert entries[0] == entries[1]
    for entry in entries:
        assert entry["command"] == "mempager" and entry["env"] == {"HF_HUB_OFFLINE": "1"}
        args = build_parser().parse_args(entry["args"])
        assert args.command == "serve" and Path(args.store).is_absolute() and args.actor == "neo"
    documented = set(re.findall(r"^\| `(\w+)\(", section, re.M))
    assert documented == TOOLS


def test_the_mcp_sdk_is_a_default_dependency_and_the_extra_still_resolves() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert [d for d in project["dependencies"] if re.match(r"mcp\b", d)] == ["mcp>=2.3,<3"]
    assert project["optional-dependencies"]["mcp"] == []  # `pip install 'mempager[mcp]'` still works
