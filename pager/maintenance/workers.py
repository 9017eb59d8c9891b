"""Background embedding: writes never wait for vectors.

Workers take pending memories (no vector of the active model yet) from the store, embed them
in batches, store the vectors, then add them to the semantic lane.

Failures are bounded per batch: ``max_attempts`` tries with a doubling pause between them. A
batch that still fails is *parked*: the error is recorded on its memories in the store (they
stay stored and pending, and ``stats()`` shows them failing) and the worker moves on to other
work. Parked memories are tried again after a pause that doubles with each failed round, capped
at ``max_backoff``, so the lane recovers by itself, within that cap, when the embedder does.
Nothing that fails is ever written: a vector reaches the store and the index only after the
whole batch embedded with the right shape and finite values.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import numpy as np

from mempager.errors import DimensionMismatch, EmbedderError, EmbedderUnavailable, NonFiniteVector, PagerError
from mempager.patterns import text_for_index
from mempager.protocols import SemanticLaneLike
from mempager.types import FloatMatrix, LabelArray

log = logging.getLogger("mempager.worker")
Batch = list[tuple[int, str, str]]  # (label, text, content hash)


class EmbedWorkers:
    def __init__(
        self,
        lane: SemanticLaneLike,
        *,
        workers: int = 1,
        batch_size: int = 64,
        max_attempts: int = 5,
        backoff: float = 0.1,
        max_backoff: float = 30.0,
    ) -> None:
        self.lane = lane
        self.batch_size = batch_size
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._wake = threading.Condition()
        self._notified = 0  # bumped by every notify(): a wake-up that comes before the wait is not lost
        self._claimed: set[int] = set()
        # label -> monotonic time before which a parked (failed) memory is not tried again
        self._parked: dict[int, float] = {}
        self._stop = False
        self._rounds = 0  # batches given up on since the last success: sets the parking pause
        self._queue_failures = 0
        self._last_error: str | None = None
        self._embedded = 0
        self._threads: list[threading.Thread] = []
        self.start(workers)

    def start(self, workers: int) -> None:
        """Run ``workers`` embedding threads (more are added to a pager that ran none: ``use_model``)."""
        with self._wake:
            if self._stop:
                return
            first = len(self._threads)
            fresh = [
                threading.Thread(target=self._run, name=f"mempager-embed-{first + i}", daemon=True)
                for i in range(workers)
            ]
            self._threads.extend(fresh)
        for thread in fresh:
            thread.start()

    @property
    def threads(self) -> int:
        """How many embedding threads run (0: this process embeds nothing)."""
        return len(self._threads)

    @property
    def last_error(self) -> str | None:
        return self._last_error

    @property
    def embedded(self) -> int:
        return self._embedded

    @property
    def parked(self) -> int:
        """Memories whose batch failed every attempt and that wait out their pause."""
        with self._wake:
            now = time.monotonic()
            return sum(1 for due in self._parked.values() if due > now)

    @property
    def busy(self) -> bool:
        """True while a batch is between the queue and the index (claimed, not yet released)."""
        with self._wake:
            return bool(self._claimed)

    def wait_until_done(self, pending: Callable[[], int], timeout: float | None = None) -> bool:
        """Wait until ``pending()`` is 0 and no batch is between the queue and the index ("done"
        means indexed, not just stored). False on timeout. With no threads there is nothing to
        wait for: the answer is whether nothing is pending now."""
        if not self._threads:
            return pending() == 0
        deadline = None if timeout is None else time.monotonic() + timeout
        self.notify()
        while True:
            if pending() == 0 and not self.busy:
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.02)

    def notify(self) -> None:
        with self._wake:
            self._notified += 1
            self._wake.notify_all()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the threads and wait for them, ``timeout`` seconds in all. A thread still busy after
        that (a hung embedder) finishes its batch on its own; it is named in the log, since one left
        inside native code when the interpreter finalizes aborts the process (pager/shutdown.py)."""
        with self._wake:
            self._stop = True
            self._wake.notify_all()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        busy = [t.name for t in self._threads if t.is_alive()]
        if busy:
            log.warning("embedding threads %s still busy %.0f s after stop", ", ".join(busy), timeout)

    def _claim(self) -> Batch:
        store, lane = self.lane.store, self.lane
        with self._wake:
            now = time.monotonic()
            # a pause that is over needs no entry: the memory is simply pending again
            self._parked = {label: due for label, due in self._parked.items() if due > now}
            window = self.batch_size * (len(self._threads) + 4)
            items = store.pending(lane.actor, lane.model, window)
            free = [
                (it.label, it.text, it.content_hash)
                for it in items
                if it.label not in self._claimed and it.label not in self._parked
            ]
            # texts of similar length batch together: the model pads every text to the longest
            free.sort(key=lambda item: (len(item[1]), item[0]))
            batch = free[: self.batch_size]
            self._claimed.update(label for label, _, _ in batch)
        return batch

    def _hint(self) -> int | None:
        """How many memories the lane still lacks, when it can tell without asking the store."""
        hint = getattr(self.lane, "pending_hint", None)
        return None if hint is None else int(hint())

    def _release(self, batch: Batch) -> None:
        with self._wake:
            self._claimed.difference_update(label for label, _, _ in batch)
            self._wake.notify_all()

    def _run(self) -> None:
        while not self._stop:
            with self._wake:
                seen = self._notified  # read before looking at the queue: any write after it wakes us
            if self._hint() == 0:
                # The lane knows nothing lacks a vector: the store is not asked. Its pending query is an
                # anti-join over every memory (at 1M memories 0.16 s, and ~260 MB of DuckDB blocks left
                # resident), and the safety poll would run it every 10 s while serving.
                self._idle(seen)
                continue
            try:
                batch = self._claim()
            except PagerError as exc:  # store closed or failing: report, back off, retry
                log.error("embedding worker cannot read the queue: %s", exc)
                self._queue_failures += 1
                self._sleep(self._pause(self._queue_failures))
                continue
            self._queue_failures = 0
            if not batch:
                self._idle(seen)
                continue
            try:
                self._process(batch)
            finally:
                self._release(batch)

    def _idle(self, seen: int) -> None:
        """Sleep until a write notifies us, a parked memory is due, or a safety poll comes round.

        ``seen`` is the notification count read before the queue was last looked at: a write that
        notified since then (while we were claiming nothing, or reading the hint) means look again now.
        """
        hint = self._hint()
        with self._wake:
            if self._stop or self._notified != seen:
                return
            if hint == 0:  # nothing unembedded in sight
                wait = 10.0
            elif self._parked:  # what is in sight waits out its pause
                wait = min(10.0, max(0.05, min(self._parked.values()) - time.monotonic()))
            else:  # another worker holds it, or (a server store) another process may add some
                wait = 0.5
            self._wake.wait(wait)

    def _process(self, batch: Batch) -> None:
        """Up to ``max_attempts`` tries; then the batch is parked with its error recorded."""
        error: Exception | None = None
        for attempt in range(1, self.max_attempts + 1):
            try:
                stored = self._embed(batch)
            except Exception as exc:  # noqa: BLE001 - any fault: logged, retried, then recorded
                error = exc
                log.info(
                    "embedding %d memories with %s failed (attempt %d/%d): %s: %s",
                    len(batch),
                    self.lane.model,
                    attempt,
                    self.max_attempts,
                    type(exc).__name__,
                    exc,
                )
                # retrying cannot fix a missing model or a refused key; the next round may
                if attempt == self.max_attempts or self._stop or isinstance(exc, EmbedderUnavailable):
                    break
                self._sleep(self._pause(attempt))
                if self._stop:  # closing: record what happened rather than try again
                    break
                continue
            with self._wake:
                self._embedded += stored
                self._rounds = 0
                self._last_error = None
            return
        assert error is not None
        self._park(batch, error, attempt)

    def _embed(self, batch: Batch) -> int:
        lane, store = self.lane, self.lane.store
        labels = np.array([label for label, _, _ in batch], dtype=np.int64)
        vectors = lane.embedder.embed([text_for_index(text) for _, text, _ in batch], role="document")
        self._check(vectors, len(batch))
        with lane.lock:  # a forget between these two steps must not be undone
            stored = store.put_vectors(lane.model, labels, vectors, [h for _, _, h in batch])
            keep = np.isin(labels, stored)
            hashes = [h for (_, _, h), kept in zip(batch, keep.tolist(), strict=True) if kept]
            lane.add(labels[keep], vectors[keep], hashes)
        return int(keep.sum())

    def _check(self, vectors: FloatMatrix, n: int) -> None:
        """Whatever the embedder promised, nothing of the wrong shape or non-finite goes further."""
        dim = self.lane.embedder.dim
        if not isinstance(vectors, np.ndarray) or vectors.dtype != np.float32 or vectors.shape != (n, dim):
            shape = getattr(vectors, "shape", type(vectors).__name__)
            raise DimensionMismatch(f"{self.lane.model} returned {shape} for {n} texts, expected ({n}, {dim}) float32")
        if not np.isfinite(vectors).all():
            raise NonFiniteVector(f"{self.lane.model} returned NaN or infinite values; nothing was stored")

    def _park(self, batch: Batch, exc: Exception, attempts: int) -> None:
        labels: LabelArray = np.array([label for label, _, _ in batch], dtype=np.int64)
        error = f"{type(exc).__name__}: {exc}"
        with self._wake:
            self._rounds += 1
            pause = self._pause(self.max_attempts + self._rounds - 1)
            due = time.monotonic() + pause
            self._parked.update((label, due) for label in labels.tolist())
            self._last_error = error
        expected = isinstance(exc, (EmbedderError, PagerError))
        level = logging.WARNING if expected else logging.ERROR
        log.log(
            logging.INFO if expected and self._stop else level,  # closing mid-retry is not news
            "embedding %d memories with %s failed %d time(s); they stay pending, next try in %.2fs: %s",
            len(labels),
            self.lane.model,
            attempts,
            pause,
            error,
            exc_info=not expected,
        )
        try:
            self.lane.store.record_embed_failure(self.lane.model, labels.tolist(), error)
        except PagerError as store_exc:
            log.error("could not record the embedding failure: %s", store_exc)

    def _pause(self, step: int) -> float:
        """``backoff`` doubled ``step - 1`` times, capped at ``max_backoff``."""
        return float(min(self.max_backoff, self.backoff * 2.0 ** min(max(step - 1, 0), 30)))

    def _sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        with self._wake:
            while not self._stop and time.monotonic() < deadline:
                self._wake.wait(deadline - time.monotonic())
