"""While `mempager serve` holds a DuckDB store, every other CLI command still works on it.

The commands run inside the server (``cli.relay``): one writer, no lock error, no lost write.
A real server process, real CLI processes, then the store reopened to count what was written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import mempager

ENV = {**os.environ, "MEMPAGER_EMBEDDER": "hash", "HF_HUB_OFFLINE": "1"}


def cli(store: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mempager", *args, "--store", str(store)],
        input=stdin,
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )


def test_cli_commands_run_through_the_server_that_holds_the_store(tmp_path: Path) -> None:
    store = tmp_path / "agent.duckdb"
    server = subprocess.Popen(
        [sys.executable, "-m", "mempager", "serve", "--store", str(store)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
    )
    try:
        sock = Path(str(store) + ".sock")
        deadline = time.monotonic() + 60
        while not sock.exists():
            assert server.poll() is None, server.stderr.read().decode() if server.stderr else ""
            assert time.monotonic() < deadline, "the server never opened its socket"
            time.sleep(0.05)
        with ThreadPoolExecutor(4) as pool:
            done = list(pool.map(lambda i: cli(store, "remember", f"note {i} about the deploy"), range(12)))
        assert all(d.returncode == 0 for d in done), [d.stderr for d in done]
        uris = [d.stdout.strip() for d in done]
        assert len(set(uris)) == 12 and all(u.startswith("mem://default/fact/") for u in uris)
        piped = cli(store, "remember", "-", stdin="a piped note about the deploy")
        assert piped.returncode == 0, piped.stderr
        assert json.loads(cli(store, "stats", "--json").stdout)["memories"] == 13
        assert "note 3 about the deploy" in cli(store, "get", uris[3]).stdout
        assert len(cli(store, "recall", "deploy", "--limit", "50").stdout.splitlines()) == 13
        other = cli(store, "remember", "bob's own note", "--actor", "bob")
        assert other.returncode == 0 and other.stdout.startswith("mem://bob/fact/")
        missing = cli(store, "get", uris[0].replace("/fact/", "/rule/"), "--json")
        assert missing.returncode == 2 and json.loads(missing.stderr)["error"]["type"] == "MemoryNotFound"
    finally:
        assert server.stdin is not None
        server.stdin.close()  # the stdio client hangs up: the server closes the store and exits
        server.wait(timeout=60)
    assert not Path(str(store) + ".sock").exists()
    with mempager.open(store, actor="default", config=mempager.PagerConfig(embedder="hash")) as p:
        assert {m.uri for m in p.recall(limit=100)} >= set(uris) and p.stats()["memories"] == 13
    with mempager.open(store, actor="bob", config=mempager.PagerConfig(embedder="hash")) as b:
        assert [m.text for m in b.recall()] == ["bob's own note"]
