"""Deferred erasure: a hard forget is immediate in every lane, and its bytes leave every file of
the store in a background pass (shared by the forgets of a window), at close, at once on request,
and at the next open after a crash. Each path is proven by scanning the files for the text and
the vector."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import mempager
from mempager import PagerConfig

from .test_forget import CANARY, MarkedEmbedder, assert_visible, hits

HERE = Path(__file__).resolve().parent


def seeded(store_path: Path, emb: MarkedEmbedder, actor: str = "neo") -> str:
    """A store whose files hold the canary (store file and both saved indexes); its uri."""
    with mempager.open(store_path, actor=actor, config=PagerConfig(embedder="hash"), embedder=emb) as p:
        p.store.db.fetch("SET force_compression = 'uncompressed'")  # see test_forget: keeps the vector visible
        p.remember_many([{"type": "event", "text": f"filler event {i} about the weather"} for i in range(400)])
        uri = p.remember_fact(CANARY)
        assert p.sync(timeout=60)
        p.store.checkpoint()
    assert_visible(store_path, emb.needles)
    return uri


def wait_until(condition: object, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def test_background_pass_erases_within_the_delay(store_path: Path) -> None:
    emb = MarkedEmbedder()
    uri = seeded(store_path, emb)
    cfg = PagerConfig(embedder="hash", erase_delay_seconds=0.3)
    with mempager.open(store_path, actor="neo", config=cfg, embedder=emb) as p:
        assert p.forget(uri) == 1
        assert p.recall("passport") == [] and all(s.uri != uri for s in p.retrieve("passport CANARY-quxzwy", k=50))
        assert wait_until(lambda: hits(store_path, emb.needles) == {}), hits(store_path, emb.needles)
        assert wait_until(lambda: not p.stats()["erasure"]["pending"])
        assert p.stats()["erasure"]["passes"] == 1
        assert [e.op for e in p.audit()][-2:] == ["forget", "erase"]
        assert p.store.erasure_marks() == {}
        assert p.stats()["memories"] == 400 and p.verify_audit().ok


def test_forgets_in_a_window_share_one_pass(store_path: Path) -> None:
    cfg = PagerConfig(embedder="hash", erase_delay_seconds=3.0)
    with mempager.open(store_path, actor="neo", config=cfg) as p:
        uris = p.remember_many([{"type": "fact", "text": f"secret-{i:03d}-zx item number {i}"} for i in range(60)])
        assert p.sync(timeout=60)
        p.store.checkpoint()
        p.semantic.save()
        p.lexical.save()
        needles = [f"secret-{i:03d}-zx".encode() for i in range(40)]
        assert len(hits(store_path, needles)) >= 2  # the store file and the BM25 file hold them
        for uri in uris[:40]:
            assert p.forget(uri) == 1
        assert p.stats()["erasure"]["pending"] is True
        assert wait_until(lambda: not p.stats()["erasure"]["pending"])
        assert p.stats()["erasure"]["passes"] == 1  # forty forgets, one rewrite of the files
        assert hits(store_path, needles) == {}
        assert len(p.recall(limit=100)) == 20
        assert b"secret-050-zx" in (store_path.read_bytes() + Path(f"{store_path}.wal").read_bytes())


def test_close_and_wait_erase_at_once(store_path: Path) -> None:
    emb = MarkedEmbedder()
    uri = seeded(store_path, emb)
    slow = PagerConfig(embedder="hash", erase_delay_seconds=3600)
    with mempager.open(store_path, actor="neo", config=slow, embedder=emb) as p:
        assert p.forget(uri) == 1
        assert p.stats()["erasure"]["pending"] is True
    assert hits(store_path, emb.needles) == {}  # close() ran the pass
    uri = seeded(store_path, emb)
    with mempager.open(store_path, actor="neo", config=slow, embedder=emb) as p:
        assert p.forget(uri, wait=True) == 1
        assert hits(store_path, emb.needles) == {} and p.stats()["erasure"]["pending"] is False


def test_soft_forget_waits_for_the_next_pass(store_path: Path) -> None:
    emb = MarkedEmbedder()
    uri = seeded(store_path, emb)
    with mempager.open(store_path, actor="neo", config=PagerConfig(embedder="hash"), embedder=emb) as p:
        assert p.forget(uri, hard=False) == 1
        assert p.stats()["erasure"]["pending"] is False and p.store.erasure_marks() == {}
        p.erase_now()
        assert hits(store_path, emb.needles) == {}


CHILD = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[3])
import mempager
from mempager import PagerConfig
from test_forget import MarkedEmbedder

store, uri = sys.argv[1], sys.argv[2]
p = mempager.open(store, actor="neo", config=PagerConfig(embedder="hash", erase_delay_seconds=3600),
                  embedder=MarkedEmbedder())
assert p.forget(uri) == 1
print("forgot", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def killed_after_forget(store_path: Path, uri: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(store_path), uri, str(HERE)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        check=False,
    )
    assert done.returncode == -signal.SIGKILL and done.stdout.strip() == "forgot", done.stderr


@pytest.mark.parametrize("reopen_as", ["neo", "bob"])
def test_an_open_after_a_crash_finishes_the_erasure(store_path: Path, reopen_as: str) -> None:
    emb = MarkedEmbedder()
    uri = seeded(store_path, emb)
    with mempager.open(store_path, actor="bob", config=PagerConfig(embedder="hash")) as b:
        b.remember_fact("bob's own fact")
    killed_after_forget(store_path, uri)
    assert hits(store_path, emb.needles) != {}  # the kill came between the forget and its erasure
    cfg = PagerConfig(embedder="hash", erase_delay_seconds=3600)
    with mempager.open(store_path, actor=reopen_as, config=cfg, embedder=emb) as p:
        # before anything is served: the bytes are gone, the mark is cleared, with an audit event
        assert hits(store_path, emb.needles) == {}
        assert p.store.erasure_marks() == {}
        assert any(e.op == "erase" and e.actor == "neo" for e in p.store.audit_entries(None, None, 10_000))
        assert p.verify_audit().ok
    with mempager.open(store_path, actor="neo", config=cfg, embedder=emb) as p:
        assert p.recall("passport") == [] and p.stats()["memories"] == 400
        assert p.stats()["vectors_indexed"] == 400
    with mempager.open(store_path, actor="bob", config=cfg) as b:
        assert [m.text for m in b.recall()] == ["bob's own fact"]


def test_rewording_a_memory_erases_the_old_text(store_path: Path) -> None:
    emb = MarkedEmbedder()
    uri = seeded(store_path, emb)
    with mempager.open(store_path, actor="neo", config=PagerConfig(embedder="hash"), embedder=emb) as p:
        p.update(uri, text="the user's passport is renewed")
        assert p.stats()["erasure"]["pending"] is True
        assert p.recall("CANARY") == [] and p.recall("renewed")[0].uri == uri
        p.erase_now()
        assert hits(store_path, emb.needles) == {}
        assert p.sync(timeout=60) and p.get(uri).label in p.semantic  # re-embedded under the new text
        p.update(uri, tags=["travel"])  # no new text: nothing to erase
        assert p.stats()["erasure"]["pending"] is False
