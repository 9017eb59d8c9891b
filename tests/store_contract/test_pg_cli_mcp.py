"""The CLI and the MCP server on a ``postgresql://`` store, each a real subprocess."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from mcp import ClientSession, StdioServerParameters, stdio_client

import mempager
from mempager import PagerConfig

from ..integrations.test_mcp_server import LIMIT, _memory_session
from .conftest import REPO, child_env


def cli(url: str, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**child_env(), "MEMPAGER_STORE": url, "MEMPAGER_EMBEDDER": "hash"}
    proc = subprocess.run(
        [sys.executable, "-m", "mempager", *args], capture_output=True, text=True, env=env, cwd=str(REPO), timeout=120
    )
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_cli_on_postgres(pg_url: str) -> None:
    assert "store ready" in cli(pg_url, "init").stdout
    uri = cli(pg_url, "remember", "--type", "fact", "The deploy key id is 7f3a9c2e.").stdout.strip()
    assert uri.startswith("mem://default/fact/")
    cli(pg_url, "remember", "--type", "profile", "The user is Ana.")
    assert json.loads(cli(pg_url, "retrieve", "deploy key", "--json").stdout)[0]["uri"] == uri
    page = cli(pg_url, "page", "--goal", "ship it", "--query", "deploy key", "--explain").stdout
    assert "7f3a9c2e" in page and "The user is Ana." in page and "Paging report" in page
    # what one CLI process wrote, a Python process sees, and the other way round
    with mempager.open(pg_url, actor="default", config=PagerConfig(embedder="hash")) as p:
        assert p.get(uri).text == "The deploy key id is 7f3a9c2e."
        mine = p.remember_fact("The staging cluster is called kestrel-9.")
    assert mine in cli(pg_url, "recall", "kestrel-9").stdout
    stats = json.loads(cli(pg_url, "stats", "--json").stdout)
    assert stats["memories"] == 3 and stats["store"].startswith("postgresql://")
    assert "forgotten" in cli(pg_url, "forget", uri).stdout
    assert "7f3a9c2e" not in cli(pg_url, "retrieve", "deploy key").stdout
    assert json.loads(cli(pg_url, "recall", "--actor", "bob", "--json").stdout) == []


def test_cli_names_a_server_that_is_down_without_the_password(tmp_path: Path) -> None:
    url = f"postgresql://agent:hunter2-secret@/memory?host={tmp_path}&port=1"
    proc = cli(url, "stats", ok=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("mempager: error:") and "hunter2-secret" not in proc.stderr + proc.stdout


def test_mcp_server_on_postgres(pg_url: str) -> None:
    args = ["-m", "mempager", "serve", "--store", pg_url, "--actor", "t", "--embedder", "hash"]
    params = StdioServerParameters(command=sys.executable, args=args, env=child_env(), cwd=str(REPO))

    async def main() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await _memory_session(session)

    asyncio.run(asyncio.wait_for(main(), LIMIT))
    with mempager.open(pg_url, actor="t", config=PagerConfig(embedder="hash")) as p:
        assert p.stats()["memories"] == 8  # the server's writes are in the shared store
