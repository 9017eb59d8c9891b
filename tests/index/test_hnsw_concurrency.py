"""Searches from several threads while another thread adds, removes, resizes, rebuilds and saves."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

from mempager.index.hnsw import HnswIndex

MakeVectors = Callable[..., np.ndarray]
DIM = 32
READERS = 4
WRITER_ROUNDS = 120


def test_concurrent_searches_survive_a_busy_writer(make_vectors: MakeVectors, tmp_path: Path) -> None:
    pool = make_vectors(WRITER_ROUNDS * 40 + 200, DIM, seed=21)
    queries = make_vectors(64, DIM, seed=22)
    index = HnswIndex(DIM, initial_capacity=8, exact_below=0)  # tiny capacity: many resizes; graph path
    index.add(np.arange(200), pool[:200])
    ever_added = set(range(200))  # grows before each add, so it over-approximates "live at some point"
    allow = frozenset(range(0, len(pool), 3))
    done = threading.Event()
    errors: list[BaseException] = []
    violations: list[str] = []
    searches = [0] * READERS

    def reader(slot: int) -> None:
        rng = np.random.default_rng(slot)
        try:
            while not done.is_set():
                query = queries[rng.integers(len(queries))]
                filtered = bool(rng.integers(2))
                results = index.search(query, 10, allow=allow if filtered else None)
                labels = [label for label, _ in results]
                if not set(labels) <= ever_added:
                    violations.append(f"never-added label in {labels}")
                if filtered and not set(labels) <= allow:
                    violations.append(f"label outside allow in {labels}")
                if [s for _, s in results] != sorted((s for _, s in results), reverse=True):
                    violations.append("results out of order")
                searches[slot] += 1
        except BaseException as exc:  # noqa: BLE001 - collected and re-raised by the main thread
            errors.append(exc)

    def writer() -> None:
        rng = np.random.default_rng(99)
        try:
            next_label = 200
            for round_ in range(WRITER_ROUNDS):
                new = np.arange(next_label, next_label + 40)
                ever_added.update(new.tolist())
                index.add(new, pool[next_label : next_label + 40])
                next_label += 40
                index.remove(rng.choice(next_label, size=15, replace=False).tolist())
                rewrite = rng.choice(next_label, size=5, replace=False)
                index.add(rewrite, pool[rng.integers(0, next_label, size=5)])
                ever_added.update(rewrite.tolist())
                if round_ % 40 == 39:
                    index.rebuild()
                if round_ % 40 == 19:
                    index.save(tmp_path / "idx", meta={"round": round_})  # saves run beside searches
        except BaseException as exc:  # noqa: BLE001 - collected and re-raised by the main thread
            errors.append(exc)
        finally:
            done.set()

    threads = [threading.Thread(target=reader, args=(slot,)) for slot in range(READERS)]
    threads.append(threading.Thread(target=writer))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    assert not errors, errors
    assert not violations, violations[:5]
    assert all(count > 0 for count in searches)
    assert len(index) > 0
