"""Shared fixtures. Tests never reach the network and never write into the working tree."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis.configuration import set_hypothesis_home_dir

# Hypothesis would keep its example database in the working tree; tests must not write there.
# The folder goes when the session ends (each pytest-xdist worker has its own).
_HYPOTHESIS_HOME = tempfile.mkdtemp(prefix="mempager-hypothesis-")
atexit.register(shutil.rmtree, _HYPOTHESIS_HOME, ignore_errors=True)
set_hypothesis_home_dir(_HYPOTHESIS_HOME)
settings.register_profile("mempager", database=None, deadline=None)
settings.load_profile("mempager")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
LOCOMO = Path(os.environ.get("MEMPAGER_LOCOMO", REPO.parent / "shared" / "data" / "locomo10.json"))


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "agent.duckdb"


@pytest.fixture
def hash_pager(store_path: Path) -> Iterator[object]:
    import mempager

    p = mempager.open(store_path, actor="neo", config=mempager.PagerConfig(embedder="hash"))
    try:
        yield p
    finally:
        p.close()


@pytest.fixture(scope="session")
def turn_texts() -> list[str]:
    """Real text for tests that need meaning: LoCoMo turns when the data is present, else a fallback."""
    if LOCOMO.exists():
        from mempager.evaluation import locomo

        return [t.text for conv in locomo.load(LOCOMO) for t in conv.turns]
    topics = ["deploy", "billing", "garden", "holiday", "painting", "running", "music", "cooking"]
    return [f"Turn {i}: we talked about {topics[i % 8]} and {topics[(i * 3) % 8]} today" for i in range(6000)]
