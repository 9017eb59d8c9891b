"""Forgetting really erases: no byte of the text or the vector survives in any file the store owns."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

import pager
from embedders.hashing import HashEmbedder
from pager import MemoryNotFound, PagerConfig
from pager.types import FloatMatrix, Role

CANARY = "CANARY-9d41f7 the user's passport number is X1234567"


class MarkedEmbedder:
    """The real hash embedder, except the canary gets an unmistakable vector we can grep for."""

    def __init__(self) -> None:
        self._inner = HashEmbedder(dim=64)
        rng = np.random.default_rng(1234)
        vec = rng.standard_normal(64).astype(np.float32)
        self.marked = (vec / np.linalg.norm(vec)).astype(np.float32)

    @property
    def name(self) -> str:
        return "marked-hash-64"

    @property
    def dim(self) -> int:
        return 64

    def embed(self, texts: Sequence[str], role: Role = "document") -> FloatMatrix:
        out = self._inner.embed(texts, role)
        for i, text in enumerate(texts):
            if "CANARY-9d41f7" in text:
                out[i] = self.marked
        return out


def owned_files(store_path: Path) -> list[Path]:
    files = [p for p in store_path.parent.rglob("*") if p.is_file() and p.name.startswith(store_path.name)]
    files += [p for p in Path(str(store_path) + ".index").rglob("*") if p.is_file()]
    return files


def hits(store_path: Path, needles: list[bytes]) -> dict[str, int]:
    out = {}
    for f in owned_files(store_path):
        data = f.read_bytes()
        out[str(f.relative_to(store_path.parent))] = sum(data.count(n) for n in needles)
    return {k: v for k, v in out.items() if v}


def test_hard_forget_leaves_no_bytes(store_path: Path) -> None:
    emb = MarkedEmbedder()
    needles = [b"CANARY-9d41f7", emb.marked[:8].tobytes(), emb.marked[-8:].tobytes()]
    cfg = PagerConfig(embedder="hash")
    with pager.open(store_path, actor="neo", config=cfg, embedder=emb) as p:
        p.remember_many([{"type": "event", "text": f"filler event {i} about the weather"} for i in range(3000)])
        uri = p.remember_fact(CANARY)
        p.remember_many([{"type": "event", "text": f"more filler {i}"} for i in range(3000)])
        assert p.sync(timeout=120)
        p.store.checkpoint()
        p.semantic.save()
    assert hits(store_path, needles), "the scan must be able to see the canary before it is forgotten"
    with pager.open(store_path, actor="neo", config=cfg, embedder=emb) as p:
        assert [m.uri for m in p.recall("passport")] == [uri]
        assert p.get(uri).label in p.semantic
        assert p.forget(uri) == 1
        assert hits(store_path, needles) == {}
        assert all(s.uri != uri for s in p.retrieve("CANARY-9d41f7 passport", k=50))
        assert p.recall("passport") == []
        with pytest.raises(MemoryNotFound):
            p.get(uri)
        assert p.stats()["memories"] == 6000 and p.verify_audit().ok
    assert hits(store_path, needles) == {}
    with pager.open(store_path, actor="neo", config=cfg, embedder=emb) as p:  # reopen still consistent
        assert p.stats()["vectors_indexed"] == 6000


def test_forget_where_and_actor_scope(store_path: Path) -> None:
    cfg = PagerConfig(embedder="hash")
    with pager.open(store_path, actor="bob", config=cfg) as b:
        b.remember_fact("Bob's event stays")
    with pager.open(store_path, actor="neo", config=cfg) as p:
        p.remember_many([{"type": "event", "text": f"old event {i}", "created_at": f"2023-01-0{i + 1}"}
                         for i in range(5)])
        p.remember_fact("a fact that stays")
        assert p.forget(actor="neo", where={"types": ["event"], "until": "2023-01-04"}) == 3
        assert sorted(m.text for m in p.recall(limit=50)) == ["a fact that stays", "old event 3", "old event 4"]
        with pytest.raises(MemoryNotFound):
            p.forget(actor="bob", where={})
        with pytest.raises(pager.InvalidInput):
            p.forget()
        assert p.forget(actor="neo", where={"query": "old"}, hard=False) == 2
    with pager.open(store_path, actor="bob", config=cfg) as b:
        assert [m.text for m in b.recall()] == ["Bob's event stays"]
