"""The LoCoMo benchmark runs end to end (one conversation, hash embedder) and writes its results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mempager.evaluation import locomo

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
    sample = json.loads(DATA.read_text())[0]
    sample["qa"] = [q for q in sample["qa"] if q.get("category") in (1, 2, 3, 4)][:24]  # a quick run
    data = tmp_path / "locomo-sample.json"
    data.write_text(json.dumps([sample]))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mempager",
            "bench",
            "locomo",
            "--data",
            str(data),
            "--embedder",
            "hash",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "locomo:" in proc.stderr and "item" in proc.stderr  # progress shown (tqdm)
    result = json.loads((tmp_path / "locomo.json").read_text())
    configs = result["configurations"]
    default = next(n for n in configs if n.startswith("fused") and n.endswith("default)"))
    fused, lexical = configs[default], configs["lexical"]
    assert 0.0 < fused["at_k"]["10"] <= 1.0
    assert fused["at_k"]["10"] >= lexical["at_k"]["10"] - 0.05
    # the replay behind every other row returns what retrieve itself returned, call for call
    assert result["replay_agreement"] == 1.0
    for c in (*configs.values(), *result["sweep"].values()):
        assert set(c["at_k"]) == {"1", "3", "5", "10", "20"}
        assert set(c["at_budget"]) == {"250", "500", "1000", "2000", "4000"}
        for cat in c["by_category"].values():
            assert set(cat["at_budget"]) == set(c["at_budget"]) and set(cat["at_k"]) == set(c["at_k"])
        budget = [c["at_budget"][b] for b in ("250", "500", "1000", "2000", "4000")]
        assert budget == sorted(budget)  # more room never loses evidence
    assert result["depths"]["at_budget 4000"] > result["depths"]["at_k 10"]  # deeper when more lines fit
    assert any(name.startswith("embedder down") for name in result["sweep"])
    markdown = (tmp_path / "locomo.md").read_text()
    assert "Recall at k and at a token budget" in markdown and "The weight sweep" in markdown
    assert "4000 tok |" in markdown
    assert all(f"| {cat}: semantic |" in markdown for cat in fused["by_category"])  # every k and budget
    assert (tmp_path / "locomo.png").stat().st_size > 10_000
