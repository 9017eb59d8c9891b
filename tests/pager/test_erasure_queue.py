"""The erasure queue's bookkeeping, with a pass we can hold open: which forgets a pass covers,
coalescing, retry after a failed pass, and stopping."""

from __future__ import annotations

import threading
import time

import pytest

from mempager.maintenance import erasure_queue
from mempager.maintenance.erasure_queue import ErasureQueue


class HeldPass:
    """A pass that records each run and, when asked, waits inside until released."""

    def __init__(self) -> None:
        self.runs = 0
        self.inside = threading.Event()
        self.release = threading.Event()
        self.release.set()
        self.fail_next = 0

    def __call__(self) -> None:
        self.runs += 1
        self.inside.set()
        assert self.release.wait(30)
        if self.fail_next:
            self.fail_next -= 1
            raise OSError("disk full")


def eventually(condition: object, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.01)
    return False


def test_forgets_in_the_window_share_one_background_pass() -> None:
    erase = HeldPass()
    queue = ErasureQueue(erase, delay=0.3, name="t")
    for _ in range(25):
        with queue.forgetting():
            pass
    assert queue.due and erase.runs == 0
    assert eventually(lambda: not queue.due)
    assert erase.runs == 1 and queue.passes == 1
    queue.stop()


def test_a_forget_during_a_pass_leaves_the_queue_due() -> None:
    erase = HeldPass()
    queue = ErasureQueue(erase, delay=3600, name="t")
    with queue.forgetting():
        pass
    erase.release.clear()
    runner = threading.Thread(target=queue.run_now)
    runner.start()
    assert erase.inside.wait(30)
    with queue.forgetting():  # begins after the pass read its snapshot: not covered by it
        pass
    erase.release.set()
    runner.join()
    assert queue.due and erase.runs == 1
    queue.run_now()
    assert not queue.due and erase.runs == 2
    queue.stop()


def test_a_failed_pass_raises_in_run_now_and_is_retried_in_the_background(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(erasure_queue, "_RETRY_SECONDS", 0.05)
    erase = HeldPass()
    erase.fail_next = 1
    queue = ErasureQueue(erase, delay=3600, name="t")
    with queue.forgetting():
        pass
    with pytest.raises(OSError, match="disk full"):
        queue.run_now()
    assert queue.due and queue.last_error == "OSError: disk full"
    queue.stop()

    erase = HeldPass()
    erase.fail_next = 2
    queue = ErasureQueue(erase, delay=0.0, name="u")
    with queue.forgetting():
        pass
    assert eventually(lambda: not queue.due)  # the background thread retried until it worked
    assert erase.runs == 3 and queue.last_error is None and queue.passes == 1
    assert caplog.text.count("erasing forgotten memories of u failed") == 2
    queue.stop()


def test_stop_ends_the_thread_and_leaves_what_is_due() -> None:
    erase = HeldPass()
    queue = ErasureQueue(erase, delay=3600, name="t")
    with queue.forgetting():
        pass
    thread = queue._thread
    assert thread is not None and thread.is_alive()
    queue.stop()
    assert not thread.is_alive() and queue.due and erase.runs == 0
    with queue.forgetting():  # a stopped queue starts no thread; run_now still works
        pass
    assert queue._thread is thread
    queue.run_now()
    assert not queue.due
