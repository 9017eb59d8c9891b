"""Fixtures for the framework adapters: a hash-embedder pager in tmp_path, per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import mempager


@pytest.fixture
def pager(tmp_path: Path) -> Iterator[mempager.Pager]:
    p = mempager.open(tmp_path / "agent.duckdb", actor="neo", config=mempager.PagerConfig(embedder="hash"))
    try:
        yield p
    finally:
        p.close()
