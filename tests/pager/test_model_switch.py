"""The active embedding model changes only by an explicit act; another model only reads.

A store records each actor's active model. A pager opened with a different embedder (a
`--embedder hash` on a MiniLM store, or a chain that fell back to another candidate) embeds
nothing, so the store's vectors are never rewritten; `use_model()` / `mempager model use` (or
`PagerConfig(adopt_embedder=True)`) switches, and only `finalize_migration` drops old vectors.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import mempager
from mempager import PagerConfig
from mempager.embedders import HashEmbedder

HASH = PagerConfig(embedder="hash")
A, B = HashEmbedder(dim=384), HashEmbedder(dim=64)


def build(store: Path) -> list[str]:
    with mempager.open(store, actor="neo", config=HASH, embedder=A) as p:
        uris = p.remember_many(
            [{"type": "fact", "text": f"the deploy key of service {i} is in vault"} for i in range(40)]
        )
        assert p.sync(timeout=60)
    return uris


def test_another_model_reads_without_rewriting_and_switches_only_when_asked(store_path: Path) -> None:
    uris = build(store_path)
    with mempager.open(store_path, actor="neo", config=HASH, embedder=B) as p:
        stats = p.stats()
        assert stats["active_model"] == A.name and stats["embedder"] == B.name
        assert stats["embedding"].startswith("off: reading")
        assert p.sync() is False  # answers at once: this pager embeds nothing
        time.sleep(0.3)
        assert p.store.vector_models("neo") == {A.name: 40}  # nothing of B was written
        assert uris[3] in {s.uri for s in p.retrieve("deploy key of service 3", k=5)}  # lexical still answers
        with pytest.raises(mempager.InvalidInput, match="model use"):
            p.reembed(timeout=1)
        with pytest.raises(mempager.InvalidInput, match=f"must not drop {A.name}"):
            p.finalize_migration()
    with mempager.open(store_path, actor="neo", config=HASH, embedder=A) as p:  # the active model: unchanged
        assert p.stats()["embedding"] == "on" and p.store.vector_models("neo") == {A.name: 40}
    with mempager.open(store_path, actor="neo", config=HASH, embedder=B) as p:
        change = p.use_model()
        assert change["active"] == B.name and change["previous"] == A.name and change["pending"] == 40
        assert p.reembed(timeout=60) and p.store.vector_models("neo") == {A.name: 40, B.name: 40}
        assert [e.op for e in p.audit()].count("migration") == 2  # recorded at first open, then the switch
        assert p.finalize_migration() == {A.name: 40}
    with mempager.open(store_path, actor="neo", config=HASH, embedder=A) as p:  # A now only reads
        assert p.stats()["active_model"] == B.name and p.stats()["embedding"].startswith("off: reading")


def test_adopting_by_config_switches_at_open(store_path: Path) -> None:
    build(store_path)
    with mempager.open(store_path, actor="neo", config=HASH.with_(adopt_embedder=True), embedder=B) as p:
        assert p.stats()["active_model"] == B.name and p.sync(timeout=60)
        assert p.store.vector_models("neo") == {A.name: 40, B.name: 40}


def test_a_store_from_before_the_record_keeps_the_model_of_its_vectors(store_path: Path) -> None:
    build(store_path)
    with mempager.open(store_path, actor="neo", config=HASH, embedder=A) as p:
        p.store.db.fetch("DELETE FROM store_meta WHERE key = 'active_model:neo'")  # as written before 0.2
    with mempager.open(store_path, actor="neo", config=HASH, embedder=B) as p:
        assert p.stats()["active_model"] == A.name and p.store.vector_models("neo") == {A.name: 40}


def test_model_commands_and_a_guarded_finalize(tmp_path: Path) -> None:
    store = tmp_path / "cli.duckdb"
    with mempager.open(store, actor="default", config=HASH.with_(hash_dim=64)) as p:
        p.remember_fact("the deploy key is in vault")
        assert p.sync(timeout=60)
    env = {**os.environ, "MEMPAGER_STORE": str(store)}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "mempager", *args], capture_output=True, text=True, env=env)

    shown = json.loads(cli("model", "--embedder", "hash", "--json").stdout)  # hash_dim 384: another model
    assert shown["active_model"] == "hash-v2-64" and shown["embedder"] == "hash-v2-384"
    assert json.loads(cli("stats", "--json", "--embedder", "hash").stdout)["vector_models"] == {"hash-v2-64": 1}
    used = json.loads(cli("model", "use", "--embedder", "hash", "--json").stdout)
    assert used["active"] == "hash-v2-384" and used["previous"] == "hash-v2-64"
    refused = cli("reembed", "--finalize", "--embedder", "hash")
    assert refused.returncode == 2 and "hash-v2-64" in refused.stderr and "--yes" in refused.stderr
    done = cli("reembed", "--finalize", "--yes", "--embedder", "hash", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["dropped"] == {"hash-v2-64": 1}
