"""Background embedding: writes never wait for vectors.

Workers take pending memories (no vector of the active model yet) from the store, embed them
in batches, store the vectors, then add them to the semantic lane. An embedder failure is
recorded on the memories (which stay stored and pending) and retried with backoff, so the lane
recovers by itself when the embedder does.
"""

from __future__ import annotations

import logging
import threading
import time

import numpy as np

from .errors import EmbedderError, PagerError
from .patterns import text_for_index
from .protocols import SemanticLaneLike

log = logging.getLogger("mempager.worker")


class EmbedWorkers:
    def __init__(
        self,
        lane: SemanticLaneLike,
        *,
        workers: int = 1,
        batch_size: int = 64,
        max_backoff: float = 30.0,
    ) -> None:
        self.lane = lane
        self.batch_size = batch_size
        self.max_backoff = max_backoff
        self._wake = threading.Condition()
        self._claimed: set[int] = set()
        self._stop = False
        self._failures = 0
        self._last_error: str | None = None
        self._embedded = 0
        self._threads = [
            threading.Thread(target=self._run, name=f"mempager-embed-{i}", daemon=True)
            for i in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    @property
    def last_error(self) -> str | None:
        return self._last_error

    @property
    def embedded(self) -> int:
        return self._embedded

    @property
    def busy(self) -> bool:
        """True while a batch is between the queue and the index (claimed, not yet released)."""
        with self._wake:
            return bool(self._claimed)

    def notify(self) -> None:
        with self._wake:
            self._wake.notify_all()

    def stop(self, timeout: float = 10.0) -> None:
        with self._wake:
            self._stop = True
            self._wake.notify_all()
        for thread in self._threads:
            thread.join(timeout)

    def _claim(self) -> list[tuple[int, str, str]]:
        store, lane = self.lane.store, self.lane
        with self._wake:
            window = self.batch_size * (len(self._threads) + 4)
            items = store.pending(lane.actor, lane.model, window)
            free = [(it.label, it.text, it.content_hash) for it in items if it.label not in self._claimed]
            # texts of similar length batch together: the model pads every text to the longest
            free.sort(key=lambda item: (len(item[1]), item[0]))
            batch = free[: self.batch_size]
            self._claimed.update(label for label, _, _ in batch)
        return batch

    def _hint(self) -> int | None:
        """How many memories the lane still lacks, when it can tell without asking the store."""
        hint = getattr(self.lane, "pending_hint", None)
        return None if hint is None else int(hint())

    def _release(self, batch: list[tuple[int, str, str]]) -> None:
        with self._wake:
            self._claimed.difference_update(label for label, _, _ in batch)
            self._wake.notify_all()

    def _run(self) -> None:
        while not self._stop:
            try:
                batch = self._claim()
            except PagerError as exc:  # store closed or failing: report, back off, retry
                log.error("embedding worker cannot read the queue: %s", exc)
                self._sleep(self._backoff(bump=True))
                continue
            if not batch:
                # With nothing unembedded in sight, sleep until a write notifies us (a slow safety
                # poll remains); otherwise retry soon: failed items wait for their backoff.
                idle = self._hint() == 0
                with self._wake:
                    if not self._stop:
                        self._wake.wait(10.0 if idle else 0.5)
                continue
            try:
                self._embed(batch)
            finally:
                self._release(batch)

    def _embed(self, batch: list[tuple[int, str, str]]) -> None:
        lane, store = self.lane, self.lane.store
        labels = np.array([label for label, _, _ in batch], dtype=np.int64)
        try:
            vectors = lane.embedder.embed([text_for_index(text) for _, text, _ in batch], role="document")
            with lane.lock:  # a forget between these two steps must not be undone
                stored = store.put_vectors(lane.model, labels, vectors, [h for _, _, h in batch])
                keep = np.isin(labels, stored)
                hashes = [h for (_, _, h), kept in zip(batch, keep.tolist(), strict=True) if kept]
                lane.add(labels[keep], vectors[keep], hashes)
        except Exception as exc:  # noqa: BLE001 - any embedder fault: record it, keep the memories pending
            self._fail(labels, exc)
            return
        self._embedded += int(keep.sum())
        self._failures = 0
        self._last_error = None

    def _fail(self, labels: np.ndarray, exc: Exception) -> None:
        self._last_error = f"{type(exc).__name__}: {exc}"
        expected = isinstance(exc, (EmbedderError, PagerError))
        log.log(
            logging.WARNING if expected else logging.ERROR,
            "embedding %d memories with %s failed: %s", len(labels), self.lane.model, self._last_error,
            exc_info=not expected,
        )
        try:
            self.lane.store.record_embed_failure(self.lane.model, labels.tolist(), self._last_error)
        except PagerError as store_exc:
            log.error("could not record the embedding failure: %s", store_exc)
        self._sleep(self._backoff(bump=True))

    def _backoff(self, bump: bool) -> float:
        if bump:
            self._failures += 1
        return float(min(self.max_backoff, 0.1 * 2 ** min(self._failures, 10)))

    def _sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        with self._wake:
            while not self._stop and time.monotonic() < deadline:
                self._wake.wait(deadline - time.monotonic())
