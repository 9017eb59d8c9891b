"""`mempager merge`, `replay`, `reflect`, `distill` and `wrap auto` through the real entry point
(subprocesses), the LLM configured from the environment (MEMPAGER_LLM_URL / _MODEL / _API_KEY) and
served by a real chat server on 127.0.0.1.

Seed 000: the LLM steps are optional ("silently skipped on LLM failure"): with no LLM configured
every command reports the skip and exits 0 with the store unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path

from mempager.llm.testing import ChatServer, Reply

from ..cli_helpers import open_cli_store, run_cli

KEY = "sk-cli-secret-key-0000"


def run(tmp_path: Path, *args: str, llm: ChatServer | None = None, stdin: str | None = None) -> str:
    env = {"MEMPAGER_LLM_TIMEOUT_SECONDS": "5"}
    if llm is not None:
        env |= {"MEMPAGER_LLM_URL": llm.url, "MEMPAGER_LLM_MODEL": "scripted", "MEMPAGER_LLM_API_KEY": KEY}
    proc = run_cli(tmp_path, *args, stdin=stdin, env=env)
    assert KEY not in proc.stdout + proc.stderr
    return proc.stdout


def test_merge_on_the_command_line(tmp_path: Path, server: ChatServer) -> None:
    """Seed 000 compaction over the threshold, from the CLI; without an LLM it is a reported skip."""
    run(tmp_path, "remember", "--type", "fact", "Fact number 0 is about the garden.")
    # the other 20 in-process, in one call: each CLI child costs ~1 s, and merge is what runs here
    with open_cli_store(tmp_path) as pager:
        pager.remember_many([{"type": "fact", "text": f"Fact number {i} is about the garden."} for i in range(1, 21)])
    assert "skipped: LLMUnavailable" in run(tmp_path, "merge")
    uris = [m["uri"] for m in json.loads(run(tmp_path, "recall", "--limit", "50", "--json"))]
    a, b = (u.rsplit("/", 1)[-1] for u in uris[:2])
    server.script(Reply(content=json.dumps({"merges": [{"ids": [a, b], "text": "Two garden facts, merged."}]})))
    out = json.loads(run(tmp_path, "merge", "--json", llm=server))
    assert out["skipped"] is None and out["groups"][0]["kind"] == "merge"
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_replay_reflect_distill_and_wrap_auto_report_skips(tmp_path: Path, server: ChatServer) -> None:
    steps = json.dumps([{"text": "deploy", "status": "error"}, {"text": "retry", "status": "ok"}])
    server.script(Reply(status=500), Reply(status=500), Reply(status=500))
    assert "skipped: LLMHttpError" in run(tmp_path, "replay", "-", stdin=steps, llm=server)
    server.script(Reply(content='{"status": "success", "quality_score": 0.9, "key_learnings": ["x"]}'))
    assert "diary entry mem://" in run(tmp_path, "reflect", "-", "--status", "success", stdin="did it", llm=server)
    assert "distilling needs 2" in run(tmp_path, "distill", llm=server)
    run(tmp_path, "remember", "--type", "event", "Shipped the parser.")
    server.script(Reply(content="## State\nS.\n## Patterns\n## Decisions\nD.\n## Context\nC.\n"))
    assert "saved continuity v1" in run(tmp_path, "wrap", "auto", llm=server)
