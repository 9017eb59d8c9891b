"""The semantic lane on HNSW: churn, concurrency, corruption, read-your-writes, model migration."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import mempager
from mempager import PagerConfig
from mempager.lanes.semantic import slug

HASH = PagerConfig(embedder="hash")


def index_dir(store_path: Path, actor: str, model: str) -> Path:
    return Path(str(store_path) + ".index") / slug(actor) / slug(model)


def test_churn_then_reopen_every_live_item_finds_itself(store_path: Path) -> None:
    rng = random.Random(4)
    with mempager.open(store_path, actor="neo", config=HASH) as p:
        uris = p.remember_many(
            [
                {
                    "type": "fact",
                    "text": f"item {i} "
                    + " ".join(rng.choice(["alpha", "beta", "gamma", "delta", "omega", "sigma"]) for _ in range(6)),
                }
                for i in range(4000)
            ]
        )
        with mempager.open(store_path, actor="other", config=HASH) as o:
            # the same words as neo's items: close neighbours, were the indexes ever shared
            other_uris = o.remember_many(
                [{"type": "fact", "text": f"item {i} alpha beta gamma delta omega sigma"} for i in range(300)]
            )
            other_labels = {o.get(u).label for u in other_uris}
            o.sync(timeout=120)
        assert p.sync(timeout=120)
        deleted = set(rng.sample(uris, 2000))
        deleted_labels = {p.get(u).label for u in deleted}  # read before they go
        deleted_texts = [p.get(u).text for u in sorted(deleted)[:50]]
        for uri in deleted:
            p.forget(uri, hard=False)
        live = [u for u in uris if u not in deleted]
        for uri in rng.sample(live, 300):  # each re-embeds: a new vector under the same label
            p.update(uri, text=p.get(uri).text + " updated")
        assert p.sync(timeout=120)
    with mempager.open(store_path, actor="neo", config=HASH) as p:
        assert p.semantic.opened_how.startswith("loaded")
        live_labels = {p.get(u).label for u in live}
        assert len(deleted_labels) == 2000 and not deleted_labels & live_labels and not other_labels & live_labels
        assert set(p.semantic.index.labels().tolist()) == live_labels
        labels, vectors = p.store.vectors("neo", p.semantic.model)
        assert set(labels.tolist()) == live_labels
        returned: set[int] = set()
        missed: list[int] = []
        for label, vector in zip(labels.tolist(), vectors, strict=True):
            found = [lab for lab, _ in p.semantic.search_vector(vector, 10)]
            if label not in found:
                missed.append(label)
            returned.update(found)
        # HNSW is approximate: in a cluster of near-duplicates (these texts share six words from a
        # set of six) a walk now and then misses its own node: measured, 1 miss in 48,000 searches
        # (24 runs). Such a node can even lose every in-link (hnswlib's neighbour pruning among
        # equals), so no ef finds it: k = 50 and, in CI on 2026-11-26, k = 500 both missed one. What
        # must hold is that nothing is lost: the missed item is in the graph with its own vector,
        # and the pager, which fuses the lexical lane, still finds it by its text.
        assert len(missed) <= 2, f"{len(missed)} of {len(live_labels)} live items did not find themselves"
        for label in missed:
            vector = vectors[labels.tolist().index(label)]
            stored = p.semantic.index.get_vectors([label])[0]
            assert float(np.dot(stored, vector) / np.linalg.norm(vector)) > 0.999
            text = p.store.get_many("neo", [label])[label].text
            assert label in [s.label for s in p.retrieve(text, k=10)]
            returned.add(label)
        # every label the index ever returned is a live memory of neo's in the store
        memories = p.store.get_many("neo", sorted(returned))
        assert set(memories) == returned and all(m.actor == "neo" for m in memories.values())
        assert returned == live_labels  # each found itself, and nothing else came back
        assert not returned & deleted_labels and not returned & other_labels
        for text in deleted_texts:  # a deleted memory's own text, its nearest query, finds only live ones
            assert {lab for lab, _ in p.semantic.search(text, 10)} <= live_labels
            assert {s.label for s in p.retrieve(text, k=10)} <= live_labels


def test_concurrent_retrieves_while_writing_and_embedding(store_path: Path) -> None:
    errors: list[BaseException] = []
    forgetting: set[str] = set()  # a forget has started (it may not have returned)
    deleted: set[str] = set()  # a forget has returned
    checked = [0]
    stop = time.monotonic() + 6
    with mempager.open(store_path, actor="neo", config=PagerConfig(embedder="hash", embed_batch_size=16)) as p:
        seed = p.remember_many([{"type": "fact", "text": f"seed fact {i} about deploys"} for i in range(500)])

        def writer() -> None:
            i = 0
            try:
                while time.monotonic() < stop:
                    p.remember_fact(f"new fact {i} about deploys and keys")
                    if i % 3 == 0:
                        uri = seed[i % len(seed)]
                        if uri not in forgetting:
                            forgetting.add(uri)
                            p.forget(uri, hard=False)
                            deleted.add(uri)  # only once the forget has returned
                    i += 1
            except BaseException as exc:  # noqa: BLE001 - collected and asserted below
                errors.append(exc)

        def reader() -> None:
            try:
                while time.monotonic() < stop:
                    before = set(deleted)
                    hits = p.retrieve("deploys keys", k=20)
                    # every hit re-checked against the store: this actor's, not deleted, same text
                    stored = p.store.get_many("neo", [s.label for s in hits])
                    for s in hits:
                        assert s.uri.startswith("mem://neo/") and s.uri not in before
                        memory = stored.get(s.label)
                        if memory is None:  # gone since: only a forget that started meanwhile may do that
                            assert s.uri in forgetting, f"{s.uri} is not in the store and nobody forgot it"
                            continue
                        assert memory.uri == s.uri and memory.actor == "neo"
                        assert not s.truncated and memory.text == s.text  # short texts, a 6,000-token budget
                    checked[0] += len(hits)
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

        threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors[:3]
        assert checked[0] > 0 and deleted, "the readers checked nothing or the writer deleted nothing"
        assert p.sync(timeout=60)
        assert len(p.semantic) == p.stats()["memories"]


@pytest.mark.parametrize("damage", ["truncate", "bitflip", "no_manifest", "foreign", "rows_truncate", "rows_bitflip"])
def test_damaged_index_is_detected_and_rebuilt(store_path: Path, damage: str) -> None:
    with mempager.open(store_path, actor="neo", config=HASH) as p:
        p.remember_many([{"type": "fact", "text": f"fact {i} on the billing service"} for i in range(1500)])
        assert p.sync(timeout=60)
        model = p.semantic.model
        expected = p.retrieve("billing service fact 42", k=5)
    folder = index_dir(store_path, "neo", model)
    files = sorted(f for f in folder.iterdir() if f.name.startswith("rows-" if "rows" in damage else "hnsw"))
    if damage in ("truncate", "rows_truncate"):
        data = files[0].read_bytes()
        files[0].write_bytes(data[: len(data) // 3])
    elif damage in ("bitflip", "rows_bitflip"):
        data = bytearray(files[0].read_bytes())
        for pos in range(100, len(data), 997):
            data[pos] ^= 0xFF
        files[0].write_bytes(bytes(data))
    elif damage == "no_manifest":
        (folder / "manifest.json").unlink()
    else:  # another store's index copied over this one
        other = store_path.parent / "other.duckdb"
        with mempager.open(other, actor="neo", config=HASH) as o:
            o.remember_fact("something else entirely")
            o.sync(timeout=30)
        for f in folder.iterdir():
            f.unlink()
        for f in index_dir(other, "neo", model).iterdir():
            (folder / f.name).write_bytes(f.read_bytes())
    # open in a child first: a damaged file must never crash the process
    code = (
        f"import mempager; p = mempager.open({str(store_path)!r}, actor='neo', "
        "config=mempager.PagerConfig(embedder='hash')); print(p.semantic.opened_how); p.close()"
    )
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr[-2000:]
    assert child.stdout.startswith("rebuilt"), child.stdout
    with mempager.open(store_path, actor="neo", config=HASH) as p:
        assert [s.uri for s in p.retrieve("billing service fact 42", k=5)] == [s.uri for s in expected]
        assert len(p.semantic) == 1500


def assert_unembedded_memory_is_reachable(p: mempager.Pager, model: str) -> None:
    """A memory with no vector of the new model yet is still returned, by the lexical or salience lane.

    The resumed workers embed while we look, so the memory is taken from the far end of the queue,
    and a round only counts if it was still unembedded after the retrieve (so also during it).
    """
    observed = 0
    for _ in range(20):
        waiting = sorted(set(p.semantic.unembedded_labels()), reverse=True)
        texts = p.store.get_many("neo", waiting[:50])
        label = next((lab for lab in waiting[:50] if lab in texts and len(texts[lab].text) > 40), None)
        if label is None:
            break
        memory = texts[label]
        assert label not in set(p.store.vector_labels("neo", model).tolist())
        hits = {s.uri: s for s in p.retrieve(memory.text, k=5)}
        if label not in p.semantic.unembedded_labels():
            continue  # embedded meanwhile: this round proves nothing either way
        assert memory.uri in hits, f"unembedded {memory.uri} not retrieved by its own text: {list(hits)}"
        lanes = set(hits[memory.uri].lanes)
        assert "semantic" not in lanes and lanes and lanes <= {"lexical", "salience", "prior", "speaker"}, lanes
        observed += 1
        if observed >= 3:
            break
    assert observed, "the migration finished before an unembedded memory could be retrieved"


MIGRATE = """
import sys, mempager
p = mempager.open(sys.argv[1], actor="neo", config=mempager.PagerConfig(embedder="local", embed_batch_size=32))
print("open", flush=True)
p.use_model()  # switching models is an explicit act
p.reembed(progress=lambda done, total: print("progress", done, flush=True))
"""


# memories migrated: above the index's exact_below (1,024), so the resumed index is a walked graph;
# each costs a real embedding (~100/s here), the test's main cost
MIGRATED = 1200


@pytest.mark.slow
def test_migration_hash_to_local_killed_and_resumed(
    store_path: Path, turn_texts: list[str], onnx_cache_dir: Path
) -> None:
    texts = turn_texts[:MIGRATED]
    with mempager.open(store_path, actor="neo", config=HASH) as p:
        p.remember_many([{"type": "event", "text": t} for t in texts])
        assert p.sync(timeout=120)
        hash_model = p.semantic.model
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MEMPAGER_ONNX_CACHE_DIR": str(onnx_cache_dir)}
    child = subprocess.Popen(
        [sys.executable, "-c", MIGRATE, str(store_path)], stdout=subprocess.PIPE, text=True, env=env
    )
    assert child.stdout is not None
    for line in child.stdout:
        if line.startswith("progress") and int(line.split()[1]) >= 300:
            break
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    with mempager.open(store_path, actor="neo", config=PagerConfig(embedder="local")) as p:
        local_model = p.semantic.model
        assert local_model.startswith("st:")
        models = p.store.vector_models("neo")
        assert 300 <= models[local_model] < MIGRATED and models[hash_model] == MIGRATED  # part-way, nothing lost
        assert_unembedded_memory_is_reachable(p, local_model)
        assert p.reembed(timeout=600)
        labels = p.semantic.index.labels()
        stored, vectors = p.store.vectors("neo", local_model)
        assert np.array_equal(np.sort(labels), np.sort(stored)) and len(labels) == MIGRATED
        assert p.finalize_migration() == {hash_model: MIGRATED}
        assert p.store.vector_models("neo") == {local_model: MIGRATED}
        from mempager.index.hnsw import HnswIndex

        fresh = HnswIndex(p.semantic.embedder.dim)
        fresh.add(stored, vectors)
        queries = p.semantic.embedder.embed(texts[:50], role="query")
        overlap = []
        for q in queries:
            exact = set(stored[np.argsort(-(vectors @ q))[:10]].tolist())
            mine = {lab for lab, _ in p.semantic.search_vector(q, 10)}
            theirs = {lab for lab, _ in fresh.search(q, 10)}
            overlap.append((len(mine & exact) / 10, len(theirs & exact) / 10))
        mine_recall, fresh_recall = np.mean([a for a, _ in overlap]), np.mean([b for _, b in overlap])
        assert mine_recall >= 0.95 and mine_recall >= fresh_recall - 0.02
