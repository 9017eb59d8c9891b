"""Commands that embed nothing never import torch or onnxruntime or load the model; commands that embed load it then.

Every command runs in a fresh interpreter, as `mempager ...` does, on a store whose active model is
the packaged MiniLM (no gateway or provider configured, so the chain picks the local model).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = """
import json, sys
from mempager.cli.main import main
rc = main(sys.argv[1:])
heavy = sorted(m for m in ("torch", "sentence_transformers", "transformers", "onnxruntime") if m in sys.modules)
print(json.dumps({"rc": rc, "heavy": heavy}), file=sys.stderr)
"""


@pytest.fixture(autouse=True)
def shared_exports(onnx_cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The commands export the model into the run's shared cache (tests/conftest.py), not ~/.cache."""
    monkeypatch.setenv("MEMPAGER_ONNX_CACHE_DIR", str(onnx_cache_dir))


def cli(store: Path, *args: str) -> tuple[str, dict[str, object]]:
    keep = {"MEMPAGER_ONNX_CACHE_DIR"}
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMPAGER_") or k in keep}
    env |= {"HF_HUB_OFFLINE": "1", "MEMPAGER_STORE": str(store)}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=env, cwd=store.parent, timeout=300
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["rc"] == 0, done.stderr
    return done.stdout, report


@pytest.mark.slow
def test_reading_commands_never_load_the_model_and_embedding_ones_do(tmp_path: Path) -> None:
    store = tmp_path / "agent.duckdb"
    out, report = cli(store, "remember", "--type", "fact", "The deploy key lives in vault at secret/deploy")
    uri = out.strip()
    assert report["heavy"], "remember embeds what it wrote before it exits: it loads the model"
    cli(store, "remember", "--type", "identity", "I am Neo, the release agent.")

    for args in (("stats", "--json"), ("recall", "deploy"), ("pinned",), ("audit",), ("review",)):
        out, report = cli(store, *args)
        assert report["heavy"] == [], f"`mempager {' '.join(args)}` imported {report['heavy']}"
    stats = json.loads(cli(store, "stats", "--json")[0])
    assert stats["embedder"] == "st:all-MiniLM-L6-v2" and stats["vectors_indexed"] == 2
    assert uri in cli(store, "recall", "deploy")[0]

    out, report = cli(store, "retrieve", "where is the key kept?", "--json")
    assert {"torch", "onnxruntime"} & set(report["heavy"])  # the model's runtime: ONNX when exported
    hits = json.loads(out)
    assert hits[0]["uri"] == uri and "semantic" in hits[0]["lanes"]


def test_a_reading_command_leaves_pending_memories_pending(tmp_path: Path) -> None:
    """No embedding workers in a command that embeds nothing: what is pending stays pending for a
    process that does embed (and the command does not wait on it)."""
    import mempager

    store = tmp_path / "agent.duckdb"
    cfg = mempager.PagerConfig(embedder="hash", embed_workers=0)
    with mempager.open(store, actor="default", config=cfg) as p:
        p.remember_fact("written by a process that embeds nothing")
        assert p.sync() is False and p.stats()["pending_embeddings"] == 1
    env = {**os.environ, "MEMPAGER_STORE": str(store), "MEMPAGER_EMBEDDER": "hash"}
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-m", "mempager", "stats", "--json"], capture_output=True, text=True, env=env, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["pending_embeddings"] == 1
    with mempager.open(store, actor="default", config=cfg.with_(embed_workers=2)) as p:
        assert p.sync(timeout=60) and p.stats()["pending_embeddings"] == 0
