"""Disk full: writing until the disk is full fails with a typed error, and nothing acknowledged is lost.

The store lives on a small filesystem made for the test, the first of these that works here:

1. ``tmpfs``: a size-limited tmpfs mounted on a temp directory; space returns by remounting it bigger.
2. ``loop``: an ext4 image loop-mounted on a temp directory, mostly filled by a ballast file; space
   returns by deleting the ballast.
3. ``rlimit``: no mount allowed (an unprivileged CI container): the writer limits its own file
   size with ``RLIMIT_FSIZE`` and ignores SIGXFSZ, so writes past the limit fail with EFBIG rather
   than ENOSPC; space returns when it lifts the limit. This exercises the same failed-write paths
   but not a truly full disk, so DuckDB reports "File too large" instead of "No space left".

``MEMPAGER_DISKFULL_METHOD=tmpfs|loop|rlimit`` forces one. A child process does the writing (see
``_disk_child.py``): it writes until a write fails, waits while the parent makes room, writes a
little more with the same pager and closes it. The parent then reopens the store and checks every
acknowledged write, batch atomicity, the index and the audit chain.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import mempager

from .conftest import HASH, assert_index_consistent, child_env, python, record, timed

FS_BYTES = 4 * 2**20  # the store fills this in a few seconds of batched writes
GROWN = "256m"
CHILD = Path(__file__).with_name("_disk_child.py")
METHODS = ("tmpfs", "loop", "rlimit")


def _run(*cmd: str) -> bool:
    try:
        return subprocess.run(cmd, capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@dataclass
class SmallFS:
    method: str
    root: Path  # where the store goes
    child_limit: int = 0  # RLIMIT_FSIZE for the writer (rlimit method only)
    cleanup_steps: list[tuple[str, ...]] = field(default_factory=list)

    def grow(self) -> None:
        if self.method == "tmpfs":
            assert _run("mount", "-o", f"remount,size={GROWN}", str(self.root)), "could not grow the tmpfs"
        elif self.method == "loop":
            (self.root / "ballast").unlink()
        # rlimit: the writer lifts its own limit when told that space is back

    def cleanup(self) -> None:
        for step in self.cleanup_steps:
            _run(*step)


def try_tmpfs(base: Path) -> SmallFS | None:
    root = base / "tmpfs"
    root.mkdir()
    if not _run("mount", "-t", "tmpfs", "-o", f"size={FS_BYTES}", "tmpfs", str(root)):
        return None
    return SmallFS("tmpfs", root, cleanup_steps=[("umount", "-l", str(root))])


def try_loop(base: Path) -> SmallFS | None:
    if shutil.which("mkfs.ext4") is None:
        return None
    image, root = base / "disk.img", base / "loop"
    root.mkdir()
    with open(image, "wb") as fh:
        fh.truncate(64 * 2**20)
    if not _run("mkfs.ext4", "-q", "-F", str(image)) or not _run("mount", "-o", "loop", str(image), str(root)):
        return None
    fs = SmallFS("loop", root, cleanup_steps=[("umount", "-l", str(root))])
    stat = os.statvfs(root)
    free = stat.f_bavail * stat.f_frsize
    with open(root / "ballast", "wb") as fh:  # leave FS_BYTES free
        os.posix_fallocate(fh.fileno(), 0, max(0, free - FS_BYTES))
    return fs


def small_fs(base: Path) -> SmallFS:
    forced = os.environ.get("MEMPAGER_DISKFULL_METHOD")
    if forced and forced not in METHODS:
        raise ValueError(f"MEMPAGER_DISKFULL_METHOD must be one of {METHODS}, got {forced!r}")
    for method in METHODS:
        if forced and method != forced:
            continue
        if method == "tmpfs" and (fs := try_tmpfs(base)):
            return fs
        if method == "loop" and (fs := try_loop(base)):
            return fs
        if method == "rlimit":
            root = base / "plain"
            root.mkdir()
            return SmallFS("rlimit", root, child_limit=FS_BYTES)
    pytest.fail(f"the forced method {forced!r} is not available here")


class Child:
    """The writer process, with its stdout read on a thread so a full pipe can never stall it."""

    def __init__(self, store: Path, limit: int, mode: str, stderr: Path) -> None:
        self.lines: list[dict[str, Any]] = []
        self.waiting = threading.Event()
        self._err = open(stderr, "wb")  # noqa: SIM115 - closed in wait()
        self.proc = subprocess.Popen(
            [python(), str(CHILD), str(store), "7", str(limit), mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            env=child_env(),
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = json.loads(raw)
            self.lines.append(line)
            if line["kind"] == "waiting":
                self.waiting.set()
        self.waiting.set()  # EOF: the child is gone; whoever waits must look at the lines

    def resume(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"space is back\n")
        self.proc.stdin.flush()

    def wait(self) -> int:
        try:
            return self.proc.wait(timeout=120)
        finally:
            self.proc.kill()
            self._reader.join(10)
            self._err.close()


def verify(store: Path, acks: list[dict[str, Any]]) -> None:
    with mempager.open(store, actor="neo", config=HASH) as p:
        contents = {m.uri: m for m in p.recall(limit=1_000_000_000)}
        for ack in acks:
            for uri, text in zip(ack["uris"], ack["texts"], strict=True):
                assert uri in contents, f"acknowledged write lost after the disk filled: {uri}"
                assert contents[uri].text == text
        per_tag = Counter(t for m in contents.values() for t in m.tags if t.startswith("batch:"))
        for tag, count in per_tag.items():
            assert count == int(tag.rsplit(":", 1)[1]), f"partial batch {tag}: {count} items"
        assert_index_consistent(p, synced=False, context="reopened after the disk filled")
        assert p.sync(timeout=60), "embedding did not catch up after space returned"
        assert_index_consistent(p, synced=True, context="after space returned")
        report = p.verify_audit()
        assert report.ok, f"audit chain broken: {report}"


@pytest.mark.parametrize("mode", ["resume", "close-while-full"])
def test_disk_full(tmp_path: Path, mode: str) -> None:
    fs = small_fs(tmp_path)
    store = fs.root / "agent.duckdb"
    facts: dict[str, Any] = {"mode": mode, "method": fs.method, "fs_bytes": FS_BYTES}
    lines: list[dict[str, Any]] = []
    try:
        with timed() as clock:
            child = Child(store, fs.child_limit, mode, tmp_path / "child.stderr")
            assert child.waiting.wait(150), "the writer neither filled the disk nor finished"
            if child.proc.poll() is None:
                fs.grow()
                child.resume()
            rc = child.wait()
            lines, stderr = child.lines, (tmp_path / "child.stderr").read_text(errors="replace")
            assert rc == 0 and lines[-1]["kind"] == "done", f"the writer died (rc {rc}):\n{stderr[-3000:]}"
            assert not any(x["kind"] == "never_full" for x in lines), f"{FS_BYTES} bytes never filled up"
            refused = [x for x in lines if x["kind"] == "refused"]
            raw = [x for x in lines if x["kind"] == "raw"]
            first = next(x for x in refused + raw if x["phase"] == "fill")
            facts.update(first_error=first["error"], first_message=first["message"])
            assert "StoreError" in first.get("classes", ()), f"the full disk surfaced as {first['error']}"
            acks = [x for x in lines if x["kind"] == "ack"]
            verify(store, acks)  # durability first: it is checked even when an error below was untyped
            facts["acknowledged_writes_verified"] = sum(len(x["uris"]) for x in acks)
            assert not raw, f"untyped errors ({fs.method}):\n" + "\n".join(
                f"{x['phase']} {x['what']}:\n{x['traceback']}" for x in raw
            )
            assert "Exception in thread" not in stderr, f"a background thread died:\n{stderr[-3000:]}"
    finally:
        fs.cleanup()
        facts["outcomes"] = dict(
            Counter(
                f"{x['phase']} {x.get('what', 'write')}: {x.get('error', x['kind'])}"
                for x in lines
                if x["kind"] in ("ack", "refused", "raw")
            )
        )
        record("disk_full", seconds=clock.get("seconds"), **facts)
