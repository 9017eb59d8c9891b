"""The mempager CLI end to end, in subprocesses, on a temp store."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ..cli_helpers import STORE, open_cli_store, run_cli

REPO = Path(__file__).resolve().parents[2]


def run(tmp_path: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    return run_cli(tmp_path, *args, ok=ok)


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
    report = json.loads(run(tmp_path, "page", "deploy key", "--goal", "g", "--json").stdout)
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
    env_store = tmp_path / STORE
    import mempager
    from mempager import PagerConfig, PatternSpec

    with mempager.open(env_store, actor="default", config=PagerConfig(embedder="hash", memory_mode="copilot")) as p:
        held = p.remember_fact("The user may prefer dark mode", source="llm", confidence=0.2)
        assert held.startswith("review://")
        for _ in range(3):
            p.reinforce_pattern(PatternSpec(name="ship", trigger="ship the service", steps=["a"]))
        p.page("q", goal="ship the service", turn="t1")
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
    with open_cli_store(tmp_path) as p:
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


def test_get_and_history_of_one_uri(tmp_path: Path) -> None:
    uri = run(tmp_path, "remember", "--type", "fact", "The deploy key id is 7f3a9c2e.").stdout.strip()
    shown = run(tmp_path, "get", uri).stdout
    assert shown.splitlines()[0] == uri and "The deploy key id is 7f3a9c2e." in shown and "type fact" in shown
    assert json.loads(run(tmp_path, "get", uri, "--json").stdout)["text"] == "The deploy key id is 7f3a9c2e."
    run(tmp_path, "remember", "--type", "fact", "The deploy key id is 7f3a9c2e.")
    events = json.loads(run(tmp_path, "history", uri, "--json").stdout)
    assert [e["op"] for e in events] == ["remember", "reinforce"] and {e["uri"] for e in events} == {uri}
    missing = run(tmp_path, "get", uri.replace("/fact/", "/rule/"), ok=False)
    assert missing.returncode == 2 and "no memory" in missing.stderr


def test_json_errors_are_json_on_stderr_with_the_same_exit_codes(tmp_path: Path) -> None:
    plain = run(tmp_path, "get", "mem://default/fact/0000000000000000", ok=False)
    as_json = run(tmp_path, "get", "mem://default/fact/0000000000000000", "--json", ok=False)
    assert plain.returncode == as_json.returncode == 2 and plain.stderr.startswith("mempager: error: no memory")
    error = json.loads(as_json.stderr)["error"]
    assert error["type"] == "MemoryNotFound" and "no memory" in error["message"] and error["exit_code"] == 2
    assert as_json.stdout == ""
    usage = run(tmp_path, "nonsense", "--json", ok=False)
    assert usage.returncode == 2 and json.loads(usage.stderr)["error"]["type"] == "UsageError"
    assert run(tmp_path, "nonsense", ok=False).stderr.startswith("usage:")


def test_a_dash_reads_the_text_from_stdin(tmp_path: Path) -> None:
    env = {**os.environ, "MEMPAGER_STORE": str(tmp_path / STORE), "MEMPAGER_EMBEDDER": "hash"}
    text = "A note piped in:\nthe deploy key id is 7f3a9c2e."
    done = subprocess.run(
        [sys.executable, "-m", "mempager", "remember", "-"], input=text, capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(run(tmp_path, "get", done.stdout.strip(), "--json").stdout)["text"] == text


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    with open_cli_store(tmp_path) as p:
        p.remember_many([{"type": "event", "text": f"event number {i} about the deploy"} for i in range(3000)])
    env = {**os.environ, "MEMPAGER_STORE": str(tmp_path / STORE), "MEMPAGER_EMBEDDER": "hash"}
    reader = subprocess.Popen(["head", "-1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert reader.stdin is not None
    writer = subprocess.run(
        [sys.executable, "-m", "mempager", "recall", "deploy", "--limit", "3000"],
        stdout=reader.stdin,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        timeout=120,
    )
    reader.stdin.close()
    assert reader.stdout is not None
    first = reader.stdout.read()
    reader.wait(timeout=30)
    assert first.startswith("mem://default/event/")
    assert writer.stderr == "" and writer.returncode in (0, 141), writer.stderr  # no BrokenPipe traceback


def test_shell_completion_offers_the_commands(tmp_path: Path) -> None:
    out = tmp_path / "completions"
    env = {
        **os.environ,
        "_ARGCOMPLETE": "1",
        "COMP_LINE": "mempager hi",
        "COMP_POINT": "11",
        "_ARGCOMPLETE_STDOUT_FILENAME": str(out),
        "_ARGCOMPLETE_IFS": "\n",
    }
    done = subprocess.run([sys.executable, "-m", "mempager"], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert out.read_text().split() == ["history"]


def test_a_misspelt_field_names_the_valid_ones(tmp_path: Path) -> None:
    import mempager

    with mempager.open(tmp_path / "s.duckdb", actor="a", config=mempager.PagerConfig(embedder="hash")) as p:
        with pytest.raises(mempager.InvalidInput, match=r"'tagz' \(did you mean 'tags'\?\).*created_at.*tags"):
            p.remember_fact("x", tagz=["a"])
        assert p.stats()["memories"] == 0


def test_page_takes_the_query_first_and_the_old_order_warns(tmp_path: Path) -> None:
    import mempager

    with mempager.open(tmp_path / "s.duckdb", actor="a", config=mempager.PagerConfig(embedder="hash")) as p:
        p.remember_fact("the deploy key lives in vault")
        new = p.page("where is the deploy key?", goal="ship the release").render()
        with pytest.warns(DeprecationWarning, match=r"page\(query, goal=goal\)"):
            old = p.page("ship the release", "where is the deploy key?").render()
        assert new == old and "ship the release" in new and "vault" in new
        with pytest.raises(mempager.InvalidInput, match="needs a query"):
            p.page(goal="ship")


def test_metadata_and_tag_filters_from_the_command_line(tmp_path: Path) -> None:
    with open_cli_store(tmp_path) as p:
        atlas = p.remember_fact("deploy notes for atlas", tags=["ops"], metadata={"project": "atlas", "tier": 2})
        p.remember_fact("deploy notes for zephyr", tags=["ops"], metadata={"project": "zephyr"})
    assert run(tmp_path, "recall", "deploy", "--meta", "project=atlas").stdout.split()[0] == atlas
    assert run(tmp_path, "recall", "--meta", "tier=2").stdout.split()[0] == atlas  # 2 read as JSON: a number
    assert run(tmp_path, "recall", "--meta", "tier=3").stdout.strip() == "(none)"
    hits = json.loads(
        run(tmp_path, "retrieve", "deploy notes", "--tag", "ops", "--meta", "project=atlas", "--json").stdout
    )
    assert [h["uri"] for h in hits] == [atlas]
    page = run(tmp_path, "page", "deploy notes", "--meta", "project=zephyr").stdout
    assert "zephyr" in page and "atlas" not in page
    bad = run(tmp_path, "recall", "--meta", "novalue", ok=False)
    assert bad.returncode == 2 and "KEY=VALUE" in bad.stderr
