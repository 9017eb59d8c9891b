"""Forgetting really erases: no byte of the text or the vector survives in any file the store owns."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from unittest.mock import ANY

import numpy as np
import pytest

import mempager
from mempager import MemoryNotFound, PagerConfig, PatternSpec
from mempager.embedders.hashing import HashEmbedder
from mempager.types import FloatMatrix, Role

CANARY = "CANARY-quxzwy the user's passport number is X1234567"


class MarkedEmbedder:
    """The real hash embedder, except the canary gets an unmistakable vector we can grep for."""

    def __init__(self, name: str = "marked-hash-64") -> None:
        self._inner = HashEmbedder(dim=64)
        self._name = name
        # Entries of +-1/8: the norm is exactly 1, so no layer's re-normalisation changes a bit and
        # the stored, indexed and saved copies are all byte-identical to this needle.
        signs = np.random.default_rng(1234).choice([-1.0, 1.0], size=64)
        self.marked = (signs / 8.0).astype(np.float32)
        assert float(np.linalg.norm(self.marked)) == 1.0
        # "quxzwy": any case, any tokenisation; not hex, so no random audit hash can contain it
        self.needles = [b"quxzwy", self.marked.tobytes()]

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return 64

    def embed(self, texts: Sequence[str], role: Role = "document") -> FloatMatrix:
        out = self._inner.embed(texts, role)
        for i, text in enumerate(texts):
            if "CANARY-quxzwy" in text:
                out[i] = self.marked
        return out


def owned_files(store_path: Path) -> list[Path]:
    files = [p for p in store_path.parent.rglob("*") if p.is_file() and p.name.startswith(store_path.name)]
    files += [p for p in Path(str(store_path) + ".index").rglob("*") if p.is_file()]
    return files


def hits(store_path: Path, needles: list[bytes]) -> dict[str, int]:
    out = {}
    for f in owned_files(store_path):
        try:
            data = f.read_bytes()
        except FileNotFoundError:  # replaced by a save or the erasure pass while we scanned
            continue
        out[str(f.relative_to(store_path.parent))] = sum(data.count(n) for n in needles)
    return {k: v for k, v in out.items() if v}


def assert_visible(store_path: Path, needles: list[bytes]) -> None:
    """Before the forget, the scan must see the text and the vector, in the store and the indexes."""
    where = {n: {f.name.split("-")[0] for f in owned_files(store_path) if n in f.read_bytes()} for n in needles}
    text, vector = needles
    assert {"agent.duckdb", "lexical"} <= where[text], where
    assert {"agent.duckdb", "hnsw"} <= where[vector], where  # the graph file holds the index's vectors


def test_hard_forget_leaves_no_bytes(store_path: Path) -> None:
    emb = MarkedEmbedder()
    needles = emb.needles
    cfg = PagerConfig(embedder="hash")
    with mempager.open(store_path, actor="neo", config=cfg, embedder=emb) as p:
        # DuckDB compresses a float column or not depending on what else shares its row group (the
        # workers' batch order varies), which would hide the vector needle: store it as written
        p.store.db.fetch("SET force_compression = 'uncompressed'")
        p.remember_many([{"type": "event", "text": f"filler event {i} about the weather"} for i in range(3000)])
        uri = p.remember_fact(CANARY)
        p.remember_many([{"type": "event", "text": f"more filler {i}"} for i in range(3000)])
        assert p.sync(timeout=120)
        p.store.checkpoint()
        p.semantic.save()
    assert_visible(store_path, needles)
    with mempager.open(store_path, actor="neo", config=cfg, embedder=emb) as p:
        assert [m.uri for m in p.recall("passport")] == [uri]
        assert p.get(uri).label in p.semantic
        assert p.forget(uri) == 1
        # out of every lane and result at once; the bytes go with the erasure pass
        assert p.stats()["erasure"]["pending"] is True
        assert all(s.uri != uri for s in p.retrieve("CANARY-quxzwy passport", k=50))
        assert p.recall("passport") == []
        with pytest.raises(MemoryNotFound):
            p.get(uri)
        p.erase_now()
        assert hits(store_path, needles) == {}
        assert p.stats()["erasure"] == {"pending": False, "passes": 1, "last_pass_seconds": ANY, "last_error": None}
        assert p.stats()["memories"] == 6000 and p.verify_audit().ok
    assert hits(store_path, needles) == {}
    with mempager.open(store_path, actor="neo", config=cfg, embedder=emb) as p:  # reopen still consistent
        assert p.stats()["vectors_indexed"] == 6000


def test_forget_where_and_actor_scope(store_path: Path) -> None:
    cfg = PagerConfig(embedder="hash")
    with mempager.open(store_path, actor="bob", config=cfg) as b:
        b.remember_fact("Bob's event stays")
    with mempager.open(store_path, actor="neo", config=cfg) as p:
        p.remember_many(
            [{"type": "event", "text": f"old event {i}", "created_at": f"2023-01-0{i + 1}"} for i in range(5)]
        )
        p.remember_fact("a fact that stays")
        assert p.forget(actor="neo", where={"types": ["event"], "until": "2023-01-04"}) == 3
        assert sorted(m.text for m in p.recall(limit=50)) == ["a fact that stays", "old event 3", "old event 4"]
        with pytest.raises(MemoryNotFound):
            p.forget(actor="bob", where={})
        with pytest.raises(mempager.InvalidInput):
            p.forget()
        assert p.forget(actor="neo", where={"query": "old"}, hard=False) == 2
    with mempager.open(store_path, actor="bob", config=cfg) as b:
        assert [m.text for m in b.recall()] == ["Bob's event stays"]


COPILOT = PagerConfig(embedder="hash", memory_mode="copilot")


def test_hard_forget_in_copilot_mode_leaves_no_bytes(store_path: Path) -> None:
    """The review queue held the canary (queued, accepted, queued again, a rejected variant, an
    inversion of a pattern named after it): forgetting the memories erases every copy."""
    emb = MarkedEmbedder()
    needles = emb.needles
    with mempager.open(store_path, actor="neo", config=COPILOT, embedder=emb) as p:
        p.remember_many([{"type": "event", "text": f"filler event {i} about the weather"} for i in range(500)])
        held = p.remember_fact(CANARY, source="llm", confidence=0.3)
        assert held.startswith("review://")
        uri = p.decide(p.review()[0].id, accept=True)
        assert uri is not None and p.get(uri).text == CANARY
        again = p.remember_fact(CANARY, source="llm", confidence=0.3)  # the agent says it again
        p.remember_fact("CANARY-quxzwy maybe the passport expires in May", source="llm", confidence=0.2)
        p.decide(p.review()[-1].id, accept=False)  # rejected: its row keeps no text from now on
        spec = PatternSpec(name="CANARY-quxzwy renew the passport", trigger="renew the passport", steps=["go"])
        for _ in range(3):
            pattern_uri = p.reinforce_pattern(spec)
        for i in range(7):  # 7 failures > 2 x 3 successes: an inversion is proposed
            p.page("how", goal="renew the passport", turn=f"t{i}")
            assert p.feedback(f"t{i}", "failure") == 1
        assert [i.kind for i in p.review()] == ["memory", "inversion"]
        assert again.endswith(p.review()[0].id) and "AVOID: CANARY-quxzwy" in p.review()[1].payload["text"]
        assert all("text" not in i.payload for i in p.review(status=None) if i.status != "pending")
        assert p.sync(timeout=60)
        p.store.checkpoint()
        p.semantic.save()
    assert_visible(store_path, needles)
    with mempager.open(store_path, actor="neo", config=COPILOT, embedder=emb) as p:
        assert p.forget(uri) == 1
        assert p.forget(pattern_uri, wait=True) == 1
        assert hits(store_path, needles) == {}
        left = p.review(status=None)
        assert [i.status for i in left] == ["rejected"]  # the rejected variant: a decision, no text
        assert "CANARY" not in repr(left) and p.store.injections("neo", "t0") == []
        assert p.stats()["memories"] == 500 and p.verify_audit().ok
    assert hits(store_path, needles) == {}


def test_forget_where_leaves_no_bytes(store_path: Path) -> None:
    """forget(actor=, where=) erases the matching memories, their vectors in every model's saved
    index, and the matching texts still waiting in the review queue; nothing else."""
    old, new = MarkedEmbedder("marked-hash-64-a"), MarkedEmbedder("marked-hash-64-b")
    needles = old.needles
    with mempager.open(store_path, actor="neo", config=COPILOT, embedder=old) as p:
        p.remember_many([{"type": "event", "text": f"filler event {i} about the weather"} for i in range(300)])
        doomed = [p.remember_fact(f"CANARY-quxzwy passport fact {i}") for i in range(3)]
        doomed.append(p.remember_user_fact("CANARY-quxzwy the passport is in the drawer"))
        p.remember_fact("CANARY-quxzwy passport guess", source="llm", confidence=0.1)  # queued
        p.remember_fact("the user may prefer green tea", source="llm", confidence=0.1)  # queued, stays
        assert len(p.review()) == 2
        assert p.sync(timeout=60)
    adopt = COPILOT.with_(adopt_embedder=True)  # switching models is explicit
    with mempager.open(store_path, actor="neo", config=adopt, embedder=new) as p:  # a new model
        assert p.sync(timeout=60)
        p.store.checkpoint()
        p.semantic.save()
    assert_visible(store_path, needles)
    old_index = [f for f in owned_files(store_path) if f.parent.name.startswith("marked-hash-64-a")]
    assert any(needles[1] in f.read_bytes() for f in old_index), "the old model's saved index holds the vector"
    with mempager.open(store_path, actor="bob", config=COPILOT) as b:
        b.remember_fact("bob keeps his passport", source="llm", confidence=0.1)
    with mempager.open(store_path, actor="neo", config=COPILOT, embedder=new) as p:
        assert p.forget(actor="neo", where={"query": "passport"}, wait=True) == 4
        assert hits(store_path, needles) == {}
        assert [i.payload["text"] for i in p.review()] == ["the user may prefer green tea"]
        for uri in doomed:
            with pytest.raises(MemoryNotFound):
                p.get(uri)
        assert p.stats()["memories"] == 300 and p.verify_audit().ok
        assert p.forget(actor="neo", where={}) == 300  # everything, the whole review queue too
        assert p.review(status=None) == []
    assert hits(store_path, needles) == {}
    with mempager.open(store_path, actor="bob", config=COPILOT) as b:
        assert [i.payload["text"] for i in b.review()] == ["bob keeps his passport"]


def test_forget_where_matches_queued_texts_like_recall(store_path: Path) -> None:
    with mempager.open(store_path, actor="neo", config=COPILOT) as p:
        queued = {
            "event": p.remember(
                "event", "went to Lisbon", source="llm", confidence=0.1, created_at="2023-05-08T10:00:00", tags=["trip"]
            ),
            "fact": p.remember_fact("Lisbon is sunny", source="consolidation", confidence=0.1, tags=["trip"]),
            "late": p.remember(
                "event", "went to Porto", source="llm", confidence=0.1, created_at="2024-01-01T10:00:00"
            ),
        }
        assert all(u.startswith("review://") for u in queued.values())
        assert p.forget(actor="neo", where={"types": ["event"], "until": "2023-12-31"}) == 0
        assert [i.payload["text"] for i in p.review()] == ["Lisbon is sunny", "went to Porto"]
        assert p.forget(actor="neo", where={"source": ["llm"]}) == 0
        assert [i.payload["text"] for i in p.review()] == ["Lisbon is sunny"]
        assert p.forget(actor="neo", where={"tags": ["other"]}) == 0
        assert len(p.review()) == 1
        assert p.forget(actor="neo", where={"query": "lisbon", "tags": ["trip"]}) == 0
        assert p.review() == []
