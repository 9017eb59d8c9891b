"""`mempager wrap prepare|save`, `continuity`, `graph`, `diff` through the real entry point (subprocesses)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from ..cli_helpers import run_cli


def run(tmp_path: Path, *args: str, ok: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(tmp_path, *args, ok=ok, stdin=stdin)


def test_wrap_round_trip_on_the_command_line(tmp_path: Path) -> None:
    assert "no wrap needed" in run(tmp_path, "wrap", "prepare").stdout
    run(tmp_path, "remember", "--type", "event", "The deploy failed on Friday: the migration locked users.")
    run(tmp_path, "remember", "--type", "event", "Friday deploy failed again, migration locked the users table.")
    wrap = json.loads(run(tmp_path, "wrap", "prepare", "--json").stdout)
    assert wrap["status"] == "ready" and "## Instructions" in wrap["package"]
    e1, e2 = (e["id"] for e in wrap["episodes"])
    text = (
        "## State\nDeploys.\n## Patterns\n"
        f'- Friday deploys fail | 2x (2026-05-04) [evidence: {e1} "deploy failed friday"]'
        f' [evidence: {e2} "friday deploy migration"]\n- Guessing | 3x (2026-05-04) [evidence: nope "made up"]\n'
        "## Decisions\n-\n## Context\n-\n"
    )
    (tmp_path / "c.md").write_text(text, encoding="utf-8")
    saved = run(tmp_path, "wrap", "save", "c.md", "--affect-tag", "curious", "--affect-intensity", "0.8").stdout
    assert "1 graduated, 1 demoted" in saved and "demoted Guessing: 0x -> 1x" in saved
    again = run(tmp_path, "wrap", "save", "-", stdin=text, ok=False)
    assert again.returncode == 2 and "prepare_wrap" in again.stderr and "Traceback" not in again.stderr
    assert "Friday deploys fail | 2x" in run(tmp_path, "continuity").stdout
    graph = json.loads(run(tmp_path, "graph", "--format", "json").stdout)
    assert [(e["a"], e["b"], e["affect"]) for e in graph["edges"]] == [(e1, e2, "curious")]
    assert f'"{e1}" -- "{e2}"' in run(tmp_path, "graph", "--format", "dot").stdout
    rows = json.loads(run(tmp_path, "diff", "--wraps", "3", "--json", "--plot", "d.png").stdout)
    assert rows == [
        {"wrap": 1, "episodes": 2, "patterns_1x": 1, "patterns_2x": 1, "patterns_3x": 0, "graduated": 1,
         "demoted": 1, "held": 0, "links": 1}
    ]  # fmt: skip
    assert (tmp_path / "d.png").read_bytes().startswith(b"\x89PNG")
    bad = run(tmp_path, "wrap", "save", "c.md", "--affect-tag", "x", ok=False)
    assert bad.returncode == 2 and "--affect-intensity" in bad.stderr
