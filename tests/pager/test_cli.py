"""The mempager CLI end to end, in subprocesses, on a temp store."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def run(tmp_path: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MEMPAGER_STORE": str(tmp_path / "cli.duckdb"), "MEMPAGER_EMBEDDER": "hash"}
    proc = subprocess.run(
        [sys.executable, "-m", "mempager", *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
    )
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_cli_round_trip(tmp_path: Path) -> None:
    assert "store ready" in run(tmp_path, "init").stdout
    uri = run(tmp_path, "remember", "--type", "fact", "The deploy key id is 7f3a9c2e.").stdout.strip()
    assert uri.startswith("mem://default/fact/")
    run(tmp_path, "remember", "--type", "profile", "The user is Ana.")
    run(tmp_path, "remember", "--type", "identity", "I am Neo.")
    out = run(tmp_path, "retrieve", "deploy key", "--json").stdout
    assert json.loads(out)[0]["uri"] == uri
    assert "7f3a9c2e" in run(tmp_path, "retrieve", "deploy key").stdout
    pinned = run(tmp_path, "pinned", "--goal", "ship it").stdout
    assert "## Identity" in pinned and "The user is Ana." in pinned and "ship it" in pinned
    page = run(tmp_path, "page", "--goal", "ship it", "--query", "deploy key", "--explain").stdout
    assert "Paging report" in page and "7f3a9c2e" in page
    report = json.loads(run(tmp_path, "page", "--goal", "g", "--query", "deploy key", "--json").stdout)
    assert report["report"]["snippets"][0]["uri"] == uri
    assert "7f3a9c2e" in run(tmp_path, "recall", "deploy").stdout
    stats = json.loads(run(tmp_path, "stats", "--json").stdout)
    assert stats["memories"] == 3 and stats["embedder"].startswith("hash-")
    assert "forgotten" in run(tmp_path, "forget", uri).stdout
    assert "7f3a9c2e" not in run(tmp_path, "retrieve", "deploy key").stdout
    # another actor sees none of it
    other = run(tmp_path, "recall", "--actor", "bob", "--json").stdout
    assert json.loads(other) == []


@pytest.mark.parametrize(
    "args",
    [
        ("remember", "--type", "bogus", "text"),
        ("remember", ""),
        ("forget", "mem://default/fact/0123456789abcdef"),
        ("forget", "not-a-uri"),
        ("recall", "--since", "someday"),
        ("retrieve", "q", "--actor", "../etc"),
        ("stats", "--store", "a-file/store.duckdb"),  # a store "directory" that is a file
        ("stats", "--store", "."),  # a directory where the store file should be
    ],
)
def test_cli_user_errors_are_one_line_no_traceback(tmp_path: Path, args: tuple[str, ...]) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    proc = run(tmp_path, *args, ok=False)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mempager: error: ")


def test_cli_demo_twice_in_a_temp_dir(tmp_path: Path) -> None:
    for _ in range(2):
        out = run(tmp_path, "demo", "--store", str(tmp_path / "demo.duckdb")).stdout
        assert "## Identity" in out and "## Active goal" in out and "Paging report" in out
        assert "## Proven procedures" in out


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_run_prints_pinned_block_and_report(tmp_path: Path) -> None:
    venv = REPO / ".venv" / "bin" / "mempager"
    if not venv.exists():
        pytest.skip("make run needs the .venv that `make test` creates")
    proc = subprocess.run(
        ["make", "-s", "-C", str(REPO), "run", f"STORE={tmp_path / 'demo.duckdb'}"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "MEMPAGER_EMBEDDER": "hash"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "## Identity" in proc.stdout and "## User profile" in proc.stdout
    assert "Paging report" in proc.stdout and "CUT" in proc.stdout
    assert (tmp_path / "demo.duckdb").exists()


def test_cli_review_sweep_feedback(tmp_path: Path) -> None:
    env_store = tmp_path / "cli.duckdb"
    import mempager
    from mempager import PagerConfig, PatternSpec

    with mempager.open(env_store, actor="default", config=PagerConfig(embedder="hash", memory_mode="copilot")) as p:
        held = p.remember_fact("The user may prefer dark mode", source="llm", confidence=0.2)
        assert held.startswith("review://")
        for _ in range(3):
            p.reinforce_pattern(PatternSpec(name="ship", trigger="ship the service", steps=["a"]))
        p.page("ship the service", "q", turn="t1")
    listed = run(tmp_path, "review").stdout
    assert "The user may prefer dark mode" in listed
    item_id = listed.split()[0]
    accepted = run(tmp_path, "review", "--accept", item_id).stdout
    assert "accepted: mem://default/fact/" in accepted
    assert "(review queue empty)" in run(tmp_path, "review").stdout
    decided = run(tmp_path, "review", "--all").stdout  # the decision stays listed, its text does not
    assert f"{item_id}  [memory · accepted]  -> {accepted.split()[-1]}" in decided
    assert "dark mode" not in decided
    assert "success applied to 1 patterns" in run(tmp_path, "feedback", "t1", "success").stdout
    swept = json.loads(run(tmp_path, "sweep", "--json").stdout)
    assert set(swept) == {"promoted", "demoted", "flagged_for_removal", "inversions_proposed"}


def test_cli_recall_filters_by_source_and_tags(tmp_path: Path) -> None:
    import mempager
    from mempager import PagerConfig

    with mempager.open(tmp_path / "cli.duckdb", actor="default", config=PagerConfig(embedder="hash")) as p:
        said = p.remember_fact("Deploy window is Tuesday.", source="user", tags=["ops", "deploy"])
        seen = p.remember_fact("Deploy failed on Friday.", source="observed", tags=["ops"])
        guess = p.remember_fact("Deploy might move to Monday.", source="llm", tags=["deploy"])

    def uris(*args: str) -> set[str]:
        return {m["uri"] for m in json.loads(run(tmp_path, "recall", *args, "--json").stdout)}

    assert uris() == {said, seen, guess}
    assert uris("--source", "observed") == {seen}
    assert uris("--source", "user", "--source", "llm") == {said, guess}
    assert uris("--tag", "deploy") == {said, guess}
    assert uris("--tags", "ops", "--tag", "deploy") == {said}  # every tag given must be present
    assert uris("deploy", "--source", "llm", "--tag", "deploy") == {guess}  # with a query too
    assert uris("deploy", "--tag", "nowhere") == set()
    plain = run(tmp_path, "recall", "--source", "observed").stdout
    assert "Deploy failed on Friday." in plain and "Tuesday" not in plain
    bad = run(tmp_path, "recall", "--source", "rumour", ok=False)
    assert bad.returncode == 2 and bad.stderr.startswith("mempager: error: ") and "rumour" in bad.stderr
