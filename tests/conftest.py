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

# Every tmp_path on tmpfs when the machine has room for it: the suite's stores do tens of
# thousands of small transactions, each ending in an fsync. The suite is CPU-bound, so the gain is
# modest: six store-heavy files took 81-82 s instead of 84-86 s on this 2-core VM, side by side.
# No test depends on fsync reaching a platter: kill -9 and SIGTERM leave the page cache as it was,
# and the disk-full tests make their own small filesystem. MEMPAGER_TEST_TMP=disk keeps pytest's
# default (a directory under /tmp).
_SHM = Path("/dev/shm")
_SHM_ROOM = 8 << 30  # a whole run keeps ~3 GB of stores until it ends


def pytest_configure(config: pytest.Config) -> None:
    if config.option.basetemp is not None or os.environ.get("MEMPAGER_TEST_TMP") == "disk":
        return  # pytest-xdist workers get their directory under the controller's; or the user chose one
    if not (_SHM.is_dir() and os.access(_SHM, os.W_OK)):
        return
    free = shutil.disk_usage(_SHM).free
    if free < _SHM_ROOM:
        return
    base = tempfile.mkdtemp(prefix="mempager-tests-", dir=_SHM)
    config.option.basetemp = base
    # the controller made it, so it removes it: nothing is left in memory after the run
    config.add_cleanup(lambda: shutil.rmtree(base, ignore_errors=True))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files with slow tests run first, each file's tests in their own order.

    pytest-xdist (--dist loadfile) hands whole files to the workers in collection order as they
    free up. In alphabetical order a long file could start last and run alone at the end: on 2
    cores the suite took ~100 s longer than its summed time over two. Long files first, the many
    short ones fill the tail.
    """
    first_seen: dict[Path, int] = {}
    slow: set[Path] = set()
    for item in items:
        first_seen.setdefault(item.path, len(first_seen))
        if item.get_closest_marker("slow") is not None:
            slow.add(item.path)
    items.sort(key=lambda item: (item.path not in slow, first_seen[item.path]))


os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
LOCOMO = Path(os.environ.get("MEMPAGER_LOCOMO", REPO.parent / "shared" / "data" / "locomo10.json"))


@pytest.fixture(scope="session")
def onnx_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ONNX export cache for the whole run, shared by the pytest-xdist workers: the model is
    exported once (the exporter's file lock serialises processes; a second finds the first's
    export and checks it) instead of once per test module, and never into ~/.cache."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # workers: <base>/popen-gwN
    directory = shared / "onnx-cache"
    directory.mkdir(exist_ok=True)
    return directory


@pytest.fixture(scope="session", autouse=True)
def default_onnx_cache(onnx_cache_dir: Path) -> Iterator[Path]:
    """Where exports go when a test names no cache directory (the default backend's): never ~/.cache."""
    from mempager.embedders import onnx_format

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(onnx_format, "default_cache_dir", lambda: onnx_cache_dir)
        yield onnx_cache_dir


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
