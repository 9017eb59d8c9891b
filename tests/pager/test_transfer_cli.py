"""``mempager export``, ``import`` and ``backup`` end to end, in subprocesses, on temp stores."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from ..cli_helpers import STORE, run_cli


def run(
    tmp_path: Path, *args: str, ok: bool = True, stdin: str | None = None, store: str = STORE
) -> subprocess.CompletedProcess[str]:
    return run_cli(tmp_path, *args, ok=ok, stdin=stdin, store=store)


def test_export_import_backup_through_the_command_line(tmp_path: Path) -> None:
    run(tmp_path, "remember", "--type", "fact", "--tag", "ops", "The deploy key is 7f3a.")
    run(tmp_path, "remember", "--type", "event", "--created-at", "2024-03-01T09:00:00Z", "Standup one.")
    run(tmp_path, "remember", "--actor", "bob", "Bob's own fact.")
    exported = run(tmp_path, "export", "--vectors")  # the opened actor: default
    lines = exported.stdout.splitlines()
    header = json.loads(lines[0])
    assert header["format"] == "mempager.export.v1" and header["actor"] == "default" and header["count"] == 2
    assert [json.loads(x)["text"] for x in lines[1:]] == ["Standup one.", "The deploy key is 7f3a."]
    assert all(json.loads(x)["vectors"][0]["dim"] == 384 for x in lines[1:])
    assert "exported 2 memories of default" in exported.stderr
    bob = run(tmp_path, "export", "--actor", "bob", "-o", str(tmp_path / "bob.jsonl"))
    assert "exported 1 memories of bob" in bob.stdout
    assert json.loads((tmp_path / "bob.jsonl").read_text().splitlines()[1])["text"] == "Bob's own fact."

    (tmp_path / "default.jsonl").write_text(exported.stdout)
    imported = run(tmp_path, "import", "default.jsonl", "--json", store="copy.duckdb")
    assert json.loads(imported.stdout) == {
        "added": 2,
        "read": 2,
        "restored": 0,
        "skipped": 0,
        "vectors": 2,
        "pending_embeddings": 0,
        "crystals": 0,
        "spores": 0,
        "tiers_skipped": 0,
        "evidence_dropped": 0,
    }
    assert "import: 100%" in imported.stderr  # the progress bar
    again = run(tmp_path, "import", "-", "--json", store="copy.duckdb", stdin=exported.stdout)  # stdin
    assert json.loads(again.stdout)["added"] == 0 and json.loads(again.stdout)["skipped"] == 2
    stats = json.loads(run(tmp_path, "stats", "--json", store="copy.duckdb").stdout)
    assert stats["memories"] == 2 and stats["pending_embeddings"] == 0  # vectors came with the file
    recall = json.loads(run(tmp_path, "recall", "--tag", "ops", "--json", store="copy.duckdb").stdout)
    assert [m["text"] for m in recall] == ["The deploy key is 7f3a."]
    kept = run(tmp_path, "import", "bob.jsonl", "--keep-actor", store="copy.duckdb")
    assert "imported 1 memories" in kept.stdout
    bare = run(tmp_path, "import", "bob.jsonl", store="fresh.duckdb")  # no vectors in the file
    assert bare.stdout.strip().endswith("; 1 memories wait for hash-v2-384: `mempager reembed` embeds them now")
    assert json.loads(run(tmp_path, "recall", "--actor", "bob", "--json", store="copy.duckdb").stdout)

    backup = run(tmp_path, "backup", str(tmp_path / "bk.duckdb"))
    assert f"to {tmp_path / 'bk.duckdb'}" in backup.stdout
    copy = json.loads(run(tmp_path, "stats", "--json", store="bk.duckdb").stdout)
    assert copy["memories"] == 2
    again = run(tmp_path, "backup", str(tmp_path / "bk.duckdb"), ok=False)
    assert again.returncode == 2 and again.stderr.strip().splitlines() == [
        f"mempager: error: {tmp_path / 'bk.duckdb'} already exists; back up to a new path (a backup never overwrites)"
    ]


def test_import_refuses_a_bad_file_in_one_line_and_stores_nothing(tmp_path: Path) -> None:
    bad = '{"type": "fact", "text": "fine"}\n{"type": "fact", "text": "x", "importance": "high"}\n'
    proc = run(tmp_path, "import", "-", ok=False, stdin=bad)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "mempager: error: line 2: importance must be a number in [0, 1], got 'high'; nothing was imported"
    ]
    assert json.loads(run(tmp_path, "stats", "--json").stdout)["memories"] == 0
    missing = run(tmp_path, "import", "nope.jsonl", ok=False)
    assert missing.returncode == 2 and "cannot read nope.jsonl" in missing.stderr
