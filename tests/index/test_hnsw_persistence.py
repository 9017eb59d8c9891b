"""Crash and corruption: a damaged, foreign or half-written save raises IndexStale, never crashes.

Loads of damaged files run in a subprocess, so a segfault inside hnswlib would show up as a signal exit
code instead of taking the test run down with it.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from mempager.index.hnsw import HnswIndex
from mempager.index.manifest import MANIFEST_NAME, read_manifest

REPO = Path(__file__).resolve().parents[2]
DIM = 16
MakeVectors = Callable[..., np.ndarray]

# Runs in a child process. "load DIR": load, print OK/STALE. "save DIR START": check what the last
# (killed) saver left, print READY, then save generation after generation until killed.
CHILD = r"""
import sys
import numpy as np
import mempager  # noqa: F401  (import order; see conftest)
from mempager.index.hnsw import HnswIndex
from mempager.errors import IndexStale

DIM = 16
BASE = np.random.default_rng(1234).standard_normal((500, DIM)).astype(np.float32)

def generation(g):
    n = 100 + 7 * (g % 50)
    labels = np.arange(n, dtype=np.int64) * 5
    return labels, BASE[:n], labels[(labels // 5) % 11 == g % 11]

def check(directory):
    index = HnswIndex(DIM, exact_below=0)
    try:
        index.load(directory)
    except IndexStale as exc:
        return f"STALE {exc}"
    if "generation" not in index.meta:
        return f"OK {len(index)}"
    g = index.meta["generation"]
    labels, vectors, dead = generation(g)
    keep = ~np.isin(labels, dead)
    want = vectors[keep] / np.linalg.norm(vectors[keep], axis=1, keepdims=True)
    if index.labels().tolist() != labels[keep].tolist():
        return f"GARBAGE labels of generation {g}"
    if not np.allclose(index.get_vectors(labels[keep]), want, atol=1e-6):
        return f"GARBAGE vectors of generation {g}"
    if any(index.search(v, 1)[0][0] != lab for lab, v in zip(labels[keep][::10], want[::10])):
        return f"GARBAGE search in generation {g}"
    return f"OK generation {g}"

mode, directory = sys.argv[1], sys.argv[2]
print(check(directory), flush=True)
if mode == "save":
    print("READY", flush=True)
    g = int(sys.argv[3])
    while True:
        labels, vectors, dead = generation(g)
        index = HnswIndex(DIM)
        index.add(labels, vectors)
        index.remove(dead.tolist())
        index.save(directory, meta={"generation": g})
        g += 1
"""


def child(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=Path(args[1]).parent,
    )


def load_in_child(directory: Path) -> tuple[int, str, str]:
    proc = child("load", str(directory))
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out.strip(), err


@pytest.fixture
def saved(tmp_path: Path, make_vectors: MakeVectors) -> Path:
    directory = tmp_path / "idx"
    index = HnswIndex(DIM)
    index.add(np.arange(1500), make_vectors(1500, DIM))
    index.remove(range(0, 1500, 4))
    index.save(directory)
    return directory


def files(directory: Path) -> dict[str, Path]:
    manifest = read_manifest(directory)
    assert manifest is not None
    return {key: directory / entry.name for key, entry in manifest.files.items()}


def flip_bit(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x10
    path.write_bytes(bytes(data))


def test_an_intact_save_loads_in_a_child(saved: Path) -> None:
    code, out, err = load_in_child(saved)
    assert (code, out) == (0, "OK 1125"), err


DAMAGE: dict[str, tuple[Callable[[Path], object], str]] = {
    "truncated-index": (lambda d: files(d)["index"].write_bytes(files(d)["index"].read_bytes()[:5000]), "bytes"),
    "bit-flip-index-header": (lambda d: flip_bit(files(d)["index"], 3), "checksum"),
    "bit-flip-index-body": (lambda d: flip_bit(files(d)["index"], files(d)["index"].stat().st_size // 2), "checksum"),
    "empty-index": (lambda d: files(d)["index"].write_bytes(b""), "bytes"),
    "missing-index": (lambda d: files(d)["index"].unlink(), "cannot read"),
    "truncated-rows": (lambda d: files(d)["rows"].write_bytes(files(d)["rows"].read_bytes()[:-1]), "bytes"),
    "bit-flip-rows": (lambda d: flip_bit(files(d)["rows"], 100), "checksum"),
    "missing-rows": (lambda d: files(d)["rows"].unlink(), "cannot read"),
    "missing-manifest": (lambda d: (d / MANIFEST_NAME).unlink(), "no manifest"),
    "malformed-manifest": (lambda d: (d / MANIFEST_NAME).write_text('{"format_version": 1, "kind": '), "malformed"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_saves_raise_index_stale_without_crashing(saved: Path, damage: str) -> None:
    harm, message = DAMAGE[damage]
    harm(saved)
    code, out, err = load_in_child(saved)
    assert code == 0, f"child died with {code}: {err[-2000:]}"  # a negative code is a signal: a crash
    assert out.startswith("STALE") and message in out, out


def test_files_from_another_save_are_refused(saved: Path, tmp_path: Path, make_vectors: MakeVectors) -> None:
    other = HnswIndex(DIM)
    other.add(np.arange(1500), make_vectors(1500, DIM, seed=9))
    other.save(tmp_path / "other")
    files(tmp_path / "other")["index"].replace(files(saved)["index"])  # a valid hnswlib file, wrong one
    code, out, err = load_in_child(saved)
    assert code == 0, err
    assert out.startswith("STALE") and ("checksum" in out or "bytes" in out), out


def test_sigkill_during_saves_leaves_a_loadable_generation(tmp_path: Path) -> None:
    directory = tmp_path / "idx"
    directory.mkdir()
    rng = random.Random(20240607)
    seen: list[str] = []
    for iteration in range(12):
        proc = child("save", str(directory), str(iteration * 5))
        assert proc.stdout is not None
        seen.append(proc.stdout.readline().strip())  # what the previous, killed saver left behind
        ready = proc.stdout.readline().strip()
        if ready != "READY":
            proc.kill()
            pytest.fail(f"saver did not start: {ready!r} {proc.communicate()[1][-2000:]}")
        time.sleep(rng.uniform(0.02, 0.3))
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGKILL
    code, out, err = load_in_child(directory)
    assert code == 0, err
    seen.append(out)

    assert all(line.startswith(("OK generation", "STALE")) for line in seen), seen
    first_ok = next(i for i, line in enumerate(seen) if line.startswith("OK"))
    # Once one save has completed, a kill at any later point still leaves a complete generation.
    assert all(line.startswith("OK") for line in seen[first_ok:]), seen
    assert first_ok <= 1, seen
    leftovers = {p.name for p in directory.iterdir()} - {MANIFEST_NAME, *(p.name for p in files(directory).values())}
    assert all(name.endswith(".tmp") or name.startswith(("hnsw-", "rows-")) for name in leftovers)
