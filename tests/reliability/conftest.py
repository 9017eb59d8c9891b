"""Shared helpers for the reliability suite (issue 7).

Every suite states its counts as module constants (the minimums CI must run) and reports what it
actually ran through ``record``: ``benchmarks/reliability_report.py`` sets
``MEMPAGER_RELIABILITY_OUT`` to a temp file and turns the records into the report. Without that
variable nothing is written anywhere, so a plain pytest run leaves no trace.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mempager
from mempager import PagerConfig

REPO = Path(__file__).resolve().parents[2]
# The hash embedder is the only one that needs neither network nor model weights.
HASH = PagerConfig(embedder="hash")


def child_env(**extra: str) -> dict[str, str]:
    """Environment for a child process: offline, no local model, no bytecode in the working tree."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMPAGER_")}
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        MEMPAGER_LOCAL_MODEL="off",
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONPATH=str(REPO),
    )
    env.update(extra)
    return env


@contextmanager
def scratch_dir(fallback: Path) -> Iterator[Path]:
    """A directory on tmpfs when there is one, removed afterwards; ``fallback`` otherwise.

    For suites that test logic (model, isolation, fuzzing), not durability: their thousands of
    small transactions would otherwise spend a third of their time in fsync. The kill -9 and
    disk-full suites keep their stores on a real filesystem.
    """
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield fallback
        return
    path = Path(tempfile.mkdtemp(prefix="mempager-reliability-", dir=shm))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def fast_tmp(tmp_path: Path) -> Iterator[Path]:
    with scratch_dir(tmp_path) as path:
        yield path


def python() -> str:
    return sys.executable


def record(suite: str, **facts: Any) -> None:
    """Append what a suite actually ran (counts, method, seed) for the report script."""
    out = os.environ.get("MEMPAGER_RELIABILITY_OUT")
    if not out:
        return
    with open(out, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"suite": suite, **facts}, sort_keys=True, default=str) + "\n")


@contextmanager
def timed() -> Iterator[dict[str, float]]:
    box: dict[str, float] = {}
    start = time.perf_counter()
    try:
        yield box
    finally:
        box["seconds"] = round(time.perf_counter() - start, 2)


def live_labels(p: mempager.Pager) -> set[int]:
    return {m.label for m in p.recall(limit=1_000_000_000)}


def index_state(p: mempager.Pager) -> tuple[set[int], set[int], set[int]]:
    """(labels in the semantic index, labels with a current vector of the active model, live labels)."""
    # The embedding worker stores a vector and indexes it under this lock; reading both sides
    # without it could see one step done and not the other.
    with p.semantic.lock:
        indexed = {int(x) for x in p.semantic.index.labels()}
        vectored = {int(x) for x in np.asarray(p.store.vector_labels(p.actor, p.semantic.model))}
        live = live_labels(p)
    return indexed, vectored, live


def assert_index_consistent(p: mempager.Pager, *, synced: bool, context: str = "") -> None:
    """The semantic index is exactly the store's live labels that have a vector of the active model.

    ``synced``: the embedding queue was drained, so every live memory must have such a vector too.
    """
    indexed, vectored, live = index_state(p)
    assert vectored <= live, f"{context}: vectors for labels that are not live: {sorted(vectored - live)[:10]}"
    assert indexed == vectored, (
        f"{context}: index != store vectors of {p.semantic.model}: only in index {sorted(indexed - vectored)[:10]}, "
        f"only in store {sorted(vectored - indexed)[:10]}"
    )
    if synced:
        assert vectored == live, f"{context}: live memories without a vector after sync: {sorted(live - vectored)[:10]}"
