"""The writer the disk-full test runs in a child process (not collected by pytest).

    python _disk_child.py STORE SEED FSIZE_LIMIT MODE

With FSIZE_LIMIT > 0 the child limits its own file size (RLIMIT_FSIZE) and ignores SIGXFSZ, so a
write past the limit fails with EFBIG instead of killing it: the fallback when no small
filesystem can be mounted. It writes until a write fails, reports the failure, waits for the
parent to say the space is back (a line on stdin), then writes a little more and closes. MODE
"resume" keeps using the same pager once space is back; "close-while-full" closes it while the
disk is still full and opens a new one afterwards. Every call's outcome is one JSON line: "ack"
(the call returned), "refused" (a typed pager error) or "raw" (any other exception: a bug).
"""

from __future__ import annotations

import json
import random
import resource
import signal
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import mempager
from mempager import PagerConfig

START = time.monotonic()
FILL_DEADLINE = 90.0  # seconds; a filesystem that never fills is reported, not waited on forever


def emit(kind: str, **fields: Any) -> None:
    line = {"kind": kind, "t": round(time.monotonic() - START, 2), **fields}
    sys.stdout.write(json.dumps(line, sort_keys=True) + "\n")
    sys.stdout.flush()


def attempt(phase: str, what: str, call: Callable[[], Any]) -> tuple[bool, Any]:
    try:
        return True, call()
    except mempager.PagerError as exc:
        emit(
            "refused",
            phase=phase,
            what=what,
            error=type(exc).__name__,
            classes=[c.__name__ for c in type(exc).__mro__],
            message=str(exc)[:400],
        )
        return False, exc
    except BaseException as exc:  # noqa: BLE001 - a raw error is exactly what the parent looks for
        emit(
            "raw",
            phase=phase,
            what=what,
            error=f"{type(exc).__module__}.{type(exc).__name__}",
            message=str(exc)[:400],
            traceback=traceback.format_exc()[-3000:],
        )
        return False, exc


class Writer:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.n = 0
        # Long words fill the disk with few tokens: the write path indexes every token (BM25), and
        # that, not the disk, would otherwise set the pace.
        letters = "abcdefghijklmnopqrstuvwxyz"
        self.vocabulary = ["".join(self.rng.choices(letters, k=40)) for _ in range(3000)]

    def text(self, words: int) -> str:
        self.n += 1
        return f"w{self.n} " + " ".join(self.rng.choices(self.vocabulary, k=words))

    def write(self, p: mempager.Pager, phase: str) -> bool:
        """One write (a single memory or a batch); True when it was acknowledged."""
        if self.rng.random() < 0.3:
            text = self.text(self.rng.randint(20, 400))
            ok, uri = attempt(phase, "remember", lambda: p.remember_fact(text))
            if ok:
                emit("ack", phase=phase, uris=[uri], texts=[text])
            return ok
        size = self.rng.randint(5, 20)
        tag = f"batch:{self.n}:{size}"
        items = [{"type": "event", "text": self.text(self.rng.randint(100, 300)), "tags": [tag]} for _ in range(size)]
        ok, uris = attempt(phase, "remember_many", lambda: p.remember_many(items))
        if ok:
            emit("ack", phase=phase, uris=uris, texts=[i["text"] for i in items])
        return ok


def main() -> None:
    path, seed, limit, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    if limit:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    writer = Writer(seed)
    p = mempager.open(path, actor="neo", config=PagerConfig(embedder="hash"))
    emit("ready")
    deadline = time.monotonic() + FILL_DEADLINE
    while writer.write(p, "fill"):
        if time.monotonic() > deadline:
            emit("never_full")
            break
    attempt("full", "sync", lambda: p.sync(timeout=1))  # the worker meets the full disk too
    writer.write(p, "full")  # usually refused again; a small write may still fit
    if mode == "close-while-full":  # the application shuts down before anyone frees space
        attempt("full", "close", p.close)
    emit("waiting")
    sys.stdin.readline()  # the parent made room
    if limit:
        resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    if mode == "close-while-full":  # ... and starts again once there is room
        ok, p = attempt("after", "open", lambda: mempager.open(path, actor="neo", config=PagerConfig(embedder="hash")))
        if not ok:
            emit("done")
            return
    for _ in range(5):
        writer.write(p, "after")
    attempt("after", "sync", lambda: p.sync(timeout=10))
    attempt("after", "close", p.close)
    emit("done")


if __name__ == "__main__":
    main()
