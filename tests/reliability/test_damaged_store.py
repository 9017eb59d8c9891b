"""Opening a store whose files are already damaged: a recovered store or a typed error, never a crash loop.

One real store is built per module by a child process (``_damage_child.py build``): 12 facts written and
closed cleanly (checkpointed into the main file, indexes saved), then 8 more acknowledged and the process
ended with ``os._exit`` so they live in the WAL only. Each test copies it, damages the copy as its name
says, and opens it in a child process twice in a row (a signal would show as a negative exit status,
and the second open proves the first left no trap behind). Where an open is refused, the error is typed,
names the file and ``mempager doctor``; the test then runs ``mempager doctor --repair`` and opens again.

What DuckDB lets us keep, per case (asserted below):
- WAL torn, garbage or a corrupt entry: every checkpointed write and every acknowledged write before the
  damage; the log as it was is kept whole in ``<store>.wal.damaged-<time>``.
- main file empty, truncated, or of another type: DuckDB opens nothing of it. A store file is moved aside
  (with its WAL and indexes) by ``doctor --repair`` and a new store starts; a file of another type is
  never touched, only named.
- indexes corrupt, missing, or a manifest naming missing files: everything (they are rebuilt from the store).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mempager.store import damage

from .conftest import child_env, python, record

CHILD = Path(__file__).with_name("_damage_child.py")
CASES: list[str] = []  # the cases run, for the reliability report


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, list[str]]]]:
    path = tmp_path_factory.mktemp("damaged-template") / "store.duckdb"
    done = subprocess.run(
        [python(), str(CHILD), "build", str(path)], env=child_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    written = json.loads(done.stdout.splitlines()[-1])
    assert path.with_name("store.duckdb.wal").stat().st_size > 0, "the build left no WAL to damage"
    yield path, written
    record("damaged store", cases=len(CASES), names=sorted(CASES))


def _copy(template: tuple[Path, dict[str, list[str]]], tmp_path: Path, case: str) -> Path:
    CASES.append(case)
    shutil.copytree(template[0].parent, tmp_path / "s")
    return tmp_path / "s" / "store.duckdb"


def _open(path: Path) -> tuple[int, list[dict[str, Any]]]:
    done = subprocess.run(
        [python(), str(CHILD), "open", str(path)], env=child_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode >= 0, f"the open died by signal {-done.returncode}: {done.stderr[-2000:]}"
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def _doctor(path: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [python(), "-m", "mempager", "doctor", "--store", str(path), "--embedder", "hash", "--json", *extra],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode in (0, 1), done.stderr[-2000:]
    return done.returncode, json.loads(done.stdout)


def _state(report: dict[str, Any], part: str) -> list[str]:
    return [f["state"] for f in report["findings"] if f["part"] == part]


def _recovered(opens: list[dict[str, Any]], expected: list[str]) -> None:
    """Both opens worked and hold exactly ``expected``; the checkpointed fact is found by a page fault."""
    assert [o["open"] for o in opens] == ["first", "second"], opens
    for o in opens:
        assert "error" not in o, o
        assert o["texts"] == sorted(expected)
        assert o["found"] and o["audit_ok"]


def _wal_prefix(opens: list[dict[str, Any]], written: dict[str, list[str]]) -> list[str]:
    """The WAL writes the store kept: all must be a prefix of the acknowledged order."""
    kept = [t for t in written["wal"] if t in opens[0]["texts"]]
    assert kept == written["wal"][: len(kept)], "a later write survived an earlier one"
    return kept


def _aside(path: Path, pattern: str) -> list[Path]:
    return sorted(path.parent.glob(pattern))


# -- the write-ahead log -------------------------------------------------------------------------


def test_truncated_wal_replays_its_intact_transactions_and_keeps_the_tail(
    template: tuple[Path, dict[str, list[str]]], tmp_path: Path
) -> None:
    path = _copy(template, tmp_path, "truncated WAL")
    wal = path.with_name("store.duckdb.wal")
    cut = wal.stat().st_size * 2 // 3
    os.truncate(wal, cut)
    if not damage.scan_wal(wal).damaged:  # the cut fell just after a commit: one byte less tears it
        os.truncate(wal, cut - 1)
    damaged = wal.read_bytes()
    code, opens = _open(path)
    assert code == 0
    kept = _wal_prefix(opens, template[1])
    assert 0 < len(kept) < len(template[1]["wal"])  # the cut fell inside the acknowledged writes
    _recovered(opens, template[1]["checkpointed"] + kept)
    [aside] = _aside(path, "store.duckdb.wal.damaged-*")
    assert aside.read_bytes() == damaged  # the log as it was, never deleted


@pytest.mark.parametrize("tail", ["random", "zeros"])
def test_wal_with_a_garbage_tail_keeps_every_acknowledged_write(
    template: tuple[Path, dict[str, list[str]]], tmp_path: Path, tail: str
) -> None:
    path = _copy(template, tmp_path, f"WAL with a {tail} tail")
    wal = path.with_name("store.duckdb.wal")
    with open(wal, "ab") as fh:  # a disk that filled mid-append, or blocks the file system zero-filled
        fh.write(random.Random(7).randbytes(4096) if tail == "random" else bytes(4096))
    damaged = wal.read_bytes()
    code, opens = _open(path)
    assert code == 0
    _recovered(opens, template[1]["checkpointed"] + template[1]["wal"])
    [aside] = _aside(path, "store.duckdb.wal.damaged-*")
    assert aside.read_bytes() == damaged


def test_a_corrupt_wal_entry_no_longer_fails_every_open(
    template: tuple[Path, dict[str, list[str]]], tmp_path: Path
) -> None:
    """DuckDB alone refuses every open of this store ("Corrupt WAL file"): the crash loop of the issue."""
    path = _copy(template, tmp_path, "corrupt WAL entry")
    wal = path.with_name("store.duckdb.wal")
    data = bytearray(wal.read_bytes())
    data[len(data) * 3 // 4] ^= 0xFF
    wal.write_bytes(bytes(data))
    code, opens = _open(path)
    assert code == 0
    kept = _wal_prefix(opens, template[1])
    assert len(kept) < len(template[1]["wal"])
    _recovered(opens, template[1]["checkpointed"] + kept)
    [aside] = _aside(path, "store.duckdb.wal.damaged-*")
    assert aside.read_bytes() == bytes(data)


# -- the main file -------------------------------------------------------------------------------


def _refused_then_repaired(path: Path, error: str) -> dict[str, Any]:
    code, opens = _open(path)
    assert code == 3 and opens[0]["error"] == error, opens
    message = opens[0]["message"]
    assert str(path) in message and "mempager doctor" in message and "--repair" in message
    code, before = _doctor(path)
    assert code == 1 and _state(before, "main") == ["damaged"]
    code, after = _doctor(path, "--repair")
    assert code == 0, after
    return after


@pytest.mark.parametrize("size", ["half", "zero"])
def test_truncated_or_empty_main_file_is_a_typed_error_then_doctor_moves_it_aside(
    template: tuple[Path, dict[str, list[str]]], tmp_path: Path, size: str
) -> None:
    path = _copy(template, tmp_path, f"{size}-size main file")
    os.truncate(path, path.stat().st_size // 2 if size == "half" else 0)
    damaged = path.read_bytes()
    after = _refused_then_repaired(path, "WalReplayFailed" if size == "half" else "StoreDamaged")
    assert any("moved" in a for a in after["actions"])
    [moved] = _aside(path, "store.duckdb.damaged-*")
    assert moved.read_bytes() == damaged  # moved, never deleted; the WAL and indexes went with it
    assert _aside(path, "store.duckdb.wal.damaged-*") and _aside(path, "store.duckdb.index.damaged-*")
    code, opens = _open(path)  # a new, empty store at the path, twice
    assert code == 0 and [o["texts"] for o in opens] == [[], []]


def _png(path: Path) -> None:
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8)


def _sqlite(path: Path) -> None:
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE notes (body TEXT)")
        con.execute("INSERT INTO notes VALUES ('not a memory store')")
    con.close()


@pytest.mark.parametrize("kind", ["png", "sqlite"])
def test_a_file_of_another_type_is_named_and_never_touched(
    template: tuple[Path, dict[str, list[str]]], tmp_path: Path, kind: str
) -> None:
    path = _copy(template, tmp_path, f"a {kind} file at the path")
    for leftover in (path, path.with_name("store.duckdb.wal")):
        leftover.unlink()
    (_png if kind == "png" else _sqlite)(path)
    content = path.read_bytes()
    code, opens = _open(path)
    assert code == 3 and opens[0]["error"] == "NotAStore"
    assert str(path) in opens[0]["message"] and ("PNG" in opens[0]["message"] or "SQLite" in opens[0]["message"])
    code, report = _doctor(path, "--repair")
    assert code == 1 and _state(report, "main") == ["foreign"]
    assert path.read_bytes() == content and not _aside(path, "store.duckdb.damaged-*")


# -- the saved indexes ---------------------------------------------------------------------------


def _index_dirs(path: Path) -> tuple[Path, Path]:
    [actor] = list(path.with_name("store.duckdb.index").iterdir())
    lexical = actor / "lexical"
    [semantic] = [d for d in actor.iterdir() if d.name != "lexical"]
    return semantic, lexical


def _data_files(semantic: Path, lexical: Path) -> list[Path]:
    """The files the two manifests name (every file of the two directories but the manifests)."""
    files = [f for f in [*semantic.iterdir(), *lexical.iterdir()] if f.name not in ("manifest.json", "lexical.json")]
    assert len(files) >= 2, files
    return files


def _rebuilt_then_loaded(path: Path, expected: list[str]) -> None:
    code, opens = _open(path)
    assert code == 0
    _recovered(opens, expected)
    assert opens[0]["semantic"].startswith("rebuilt") and opens[0]["lexical"].startswith("rebuilt"), opens[0]
    assert opens[1]["semantic"].startswith("loaded") and opens[1]["lexical"].startswith("loaded"), opens[1]


def test_corrupted_index_files_are_rebuilt_from_the_store(
    template: tuple[Path, dict[str, list[str]]], tmp_path: Path
) -> None:
    path = _copy(template, tmp_path, "corrupted index files")
    for f in _data_files(*_index_dirs(path)):
        data = bytearray(f.read_bytes())
        data[len(data) // 2 : len(data) // 2 + 64] = bytes(64)
        f.write_bytes(bytes(data))
    code, report = _doctor(path)
    assert code == 1 and _state(report, "index") == ["damaged", "damaged"]
    _rebuilt_then_loaded(path, template[1]["checkpointed"] + template[1]["wal"])


def test_missing_index_files_are_rebuilt_from_the_store(
    template: tuple[Path, dict[str, list[str]]], tmp_path: Path
) -> None:
    path = _copy(template, tmp_path, "missing index files")
    shutil.rmtree(path.with_name("store.duckdb.index"))
    _rebuilt_then_loaded(path, template[1]["checkpointed"] + template[1]["wal"])


def test_a_manifest_that_names_missing_files_is_rebuilt_and_doctor_repairs_it(
    template: tuple[Path, dict[str, list[str]]], tmp_path: Path
) -> None:
    path = _copy(template, tmp_path, "manifest naming missing files")
    semantic, lexical = _index_dirs(path)
    for f in _data_files(semantic, lexical):
        f.unlink()  # the manifests stay, naming files that are gone
    code, report = _doctor(path)
    assert code == 1 and _state(report, "index") == ["damaged", "damaged"]
    assert all("No such file" in f["detail"] for f in report["findings"] if f["part"] == "index")
    code, report = _doctor(path, "--repair")
    assert code == 0 and _state(report, "index") == ["ok", "ok"], report
    code, opens = _open(path)
    assert code == 0
    _recovered(opens, template[1]["checkpointed"] + template[1]["wal"])
    assert all(o["semantic"].startswith("loaded") and o["lexical"].startswith("loaded") for o in opens), opens
