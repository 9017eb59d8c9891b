"""Helpers for tests that run ``mempager serve`` as a real subprocess."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def child_env(**extra: str) -> dict[str, str]:
    """What a server child gets: offline, no bytecode written into the working tree."""
    return {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1", **extra}


def serve_argv(store: Path, *extra: str) -> list[str]:
    return ["-m", "mempager", "serve", "--store", str(store), "--actor", "t", "--embedder", "hash", *extra]


@pytest.fixture
def offline_env() -> dict[str, str]:
    """The parent's environment minus anything that could send an embedder to the network."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMPAGER_", "OPENAI_"))}
    return {**env, **child_env()}
