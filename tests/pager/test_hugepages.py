"""mempager.open builds without numpy's huge-page advice, and gives the process its setting back."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import mempager
from mempager.embedders.hashing import HashEmbedder
from mempager.hugepages import ADVICE, HugePageAdvice, _numpy_switch

SWITCH = _numpy_switch()
needs_switch = pytest.mark.skipif(
    SWITCH is None or not ADVICE.active,
    reason="this numpy has no _set_madvise_hugepage, or NUMPY_MADVISE_HUGEPAGE is set",
)


def advised(switch: Callable[[bool], bool]) -> bool:
    """numpy's current setting (its setter is the only reader: set, then put back)."""
    now = switch(True)
    switch(now)
    return bool(now)


class Probe(HashEmbedder):
    """A real hash embedder that notes numpy's setting whenever the opening thread asks for its width
    (the background workers ask too, after the open as well: not noted)."""

    seen: list[bool]

    @property
    def dim(self) -> int:
        assert SWITCH is not None
        if threading.current_thread() is threading.main_thread():
            self.seen.append(advised(SWITCH))
        return int(super().dim)


@needs_switch
@pytest.mark.parametrize("before", [True, False])
def test_open_runs_without_the_advice_and_restores_the_setting(store_path: Path, before: bool) -> None:
    assert SWITCH is not None
    SWITCH(before)
    try:
        probe = Probe()
        probe.seen = []
        with mempager.open(store_path, actor="neo", embedder=probe) as p:
            during = list(probe.seen)
            assert advised(SWITCH) is before  # given back as soon as the open returned
            p.remember_fact("the kettle is in the left cupboard")
            assert [s.text for s in p.retrieve("where is the kettle")] == ["the kettle is in the left cupboard"]
        assert during and not any(during)  # asked during the open: advice off each time
    finally:
        SWITCH(True)


@needs_switch
def test_a_failed_open_restores_the_setting(tmp_path: Path) -> None:
    assert SWITCH is not None
    (tmp_path / "not-a-store.duckdb").write_bytes(b"this is not a database file" * 100)
    SWITCH(True)
    with pytest.raises(mempager.PagerError):
        mempager.open(tmp_path / "not-a-store.duckdb", actor="neo", config=mempager.PagerConfig(embedder="hash"))
    assert advised(SWITCH) is True


@needs_switch
def test_a_batch_write_grows_its_arrays_without_the_advice(store_path: Path) -> None:
    assert SWITCH is not None
    SWITCH(True)
    seen: list[bool] = []
    with mempager.open(store_path, actor="neo", config=mempager.PagerConfig(embedder="hash")) as p:
        # the store calls its listeners inside the write, after the mirror took the batch
        p.store.add_change_listener("neo", lambda upserted, removed: seen.append(advised(SWITCH)))
        p.remember_many([{"type": "fact", "text": f"shelf {i} holds jar {i}"} for i in range(300)])
        assert advised(SWITCH) is True  # back once the write returned
        assert "shelf 7 holds jar 7" in [s.text for s in p.retrieve("jar 7", k=3)]
    assert seen and not any(seen)


def test_overlapping_sections_restore_once_the_last_leaves() -> None:
    state = {"advice": True}
    calls: list[bool] = []

    def switch(value: bool) -> bool:
        calls.append(value)
        before, state["advice"] = state["advice"], value
        return before

    advice = HugePageAdvice(switch, environ={})
    inside, leave = threading.Event(), threading.Event()

    def other() -> None:
        with advice.off():
            inside.set()
            leave.wait(10)

    thread = threading.Thread(target=other)
    thread.start()
    assert inside.wait(10)
    with advice.off():  # a second open while the first is still building
        assert state["advice"] is False
    assert state["advice"] is False  # the first has not finished: still off
    leave.set()
    thread.join(10)
    assert state["advice"] is True and calls == [False, True]  # one switch off, one back, in all


def test_an_error_inside_restores_the_setting() -> None:
    state = {"advice": True}

    def switch(value: bool) -> bool:
        before, state["advice"] = state["advice"], value
        return before

    advice = HugePageAdvice(switch, environ={})
    with pytest.raises(RuntimeError), advice.off():
        assert state["advice"] is False
        raise RuntimeError("the open failed")
    assert state["advice"] is True


def test_a_process_that_chose_its_setting_is_left_alone() -> None:
    calls: list[bool] = []

    def switch(value: bool) -> bool:
        calls.append(value)
        return True

    advice = HugePageAdvice(switch, environ={"NUMPY_MADVISE_HUGEPAGE": "1"})
    assert not advice.active
    with advice.off():
        assert np.ones(2_000_000).sum() == 2_000_000  # large arrays work as ever
    assert calls == []
