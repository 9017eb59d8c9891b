"""The LoCoMo benchmark runs end to end (one conversation, hash embedder) and writes its results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pager import locomo

DATA = Path(os.environ.get("MEMPAGER_LOCOMO", Path(__file__).resolve().parents[3] / "shared/data/locomo10.json"))
pytestmark = pytest.mark.skipif(not DATA.exists(), reason="LoCoMo data not present")


def test_loader_matches_the_data_readme() -> None:
    conversations = locomo.load(DATA)
    assert len(conversations) == 10
    assert sum(len(c.turns) for c in conversations) == 5882
    assert sum(len(c.questions) for c in conversations) == 1536
    first = conversations[0].turns[0]
    assert first.dia_id == "D1:1" and first.text.startswith("Caroline: ")
    assert first.created_at.isoformat() == "2023-05-08T13:56:00+00:00"


def test_bench_cli_writes_results(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pager.cli", "bench", "locomo", "--data", str(DATA), "--limit", "1",
         "--embedder", "hash", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "locomo [" in proc.stderr  # progress shown
    result = json.loads((tmp_path / "locomo.json").read_text())
    configs = result["configurations"]
    default = next(n for n in configs if n.startswith("fused") and n.endswith("default)"))
    fused, lexical = configs[default], configs["lexical"]
    assert 0.0 < fused["at_k"]["10"] <= 1.0
    assert fused["at_k"]["10"] >= lexical["at_k"]["10"] - 0.05
    assert (tmp_path / "locomo.png").stat().st_size > 10_000
    assert "Recall at k" in (tmp_path / "locomo.md").read_text()
