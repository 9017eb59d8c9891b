"""The hash embedder: byte-identical across processes, and exact identifiers find their memory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from mempager.embedders import HashEmbedder

REPO = Path(__file__).resolve().parents[2]
TEXTS = ["The deploy key lives at secret/deploy/0xdeadbeef.", "Zürich 🐍 v1.2.3 src/app.py"]
SCRIPT = (
    "import sys\n"
    "from embedders.hashing import HashEmbedder\n"
    f"sys.stdout.buffer.write(HashEmbedder(dim=384).embed({TEXTS!r}).tobytes())\n"
)


def _vectors_from_subprocess(hash_seed: str) -> bytes:
    # A different PYTHONHASHSEED per process: Python's salted hash() must play no part.
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=REPO, env=env, capture_output=True, check=True, timeout=60
    )
    return done.stdout


def test_same_text_gives_byte_identical_vectors_in_separate_processes() -> None:
    first, second = _vectors_from_subprocess("1"), _vectors_from_subprocess("2")
    assert len(first) == len(TEXTS) * 384 * 4
    assert first == second
    assert first == HashEmbedder(dim=384).embed(TEXTS).tobytes()


def test_exact_identifier_query_ranks_its_document_first() -> None:
    docs = [
        "The staging database password rotates every Monday.",
        "Deploy with make release after the tests pass.",
        "The deploy key lives in vault at secret/deploy/0xdeadbeef.",
        "The key for the dead beef recipe is slow cooking.",
        "Commit 0xdeadbead fixed the login bug.",
        "Vault tokens expire after 24 hours.",
    ]
    embedder = HashEmbedder(dim=384)
    scores = embedder.embed(docs, role="document") @ embedder.embed(["0xdeadbeef"], role="query")[0]
    assert int(np.argmax(scores)) == 2  # inside a path, and above the near-miss "0xdeadbead"


def test_identifier_parts_of_paths_and_versions_are_features() -> None:
    embedder = HashEmbedder(dim=384)
    docs = embedder.embed(["config lives in src/app/settings.py", "release v1.2.3 shipped", "nothing here"])
    for query, expected in (("settings.py", 0), ("v1.2.3", 1)):
        assert int(np.argmax(docs @ embedder.embed([query])[0])) == expected


def test_unusual_text_still_gets_a_unit_vector() -> None:
    vectors = HashEmbedder(dim=64).embed(["", "   ", "?!", "\ud800", "🐍"])
    assert np.isfinite(vectors).all()
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert HashEmbedder(dim=64).name == "hash-v2-64"
