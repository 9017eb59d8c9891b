"""The script the exit-without-close tests run in a child process (not collected by pytest).

    python _exit_child.py LOCATION EMBEDDER ENDING

Opens a pager on LOCATION (a DuckDB file or a PostgreSQL URL) with EMBEDDER (hash, local,
gateway: its settings come from the environment), writes memories one by one and as a batch,
printing one JSON ``ack`` line after each call returns, and then ends by ENDING without ever
calling ``close()``:

    end       falls off the end of the script (status 0)
    exit      ``sys.exit(3)``
    raise     an uncaught ``RuntimeError`` (status 1 and its traceback)
    sigterm   prints ``ready`` and keeps writing (and acknowledging) until SIGTERM arrives
    thread    ``sys.exit(0)`` while a non-daemon thread still writes through the pager
    closed    closes the pager itself, then ``sys.exit(4)`` (the exit hooks find nothing to close)
    handler   installs its own SIGTERM handler before opening (exits 7), prints ``ready``, waits
    idle      opens and closes a pager, prints ``ready``, waits (SIGTERM must kill it as by default)

The writes end right before the ending, so the embedding workers are still busy (in DuckDB,
PostgreSQL, torch, ONNX Runtime or a socket) when the interpreter shuts down.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from typing import Any

import mempager
from mempager import PagerConfig

SINGLES = 30
BATCH = 10


def emit(**fields: Any) -> None:
    sys.stdout.write(json.dumps(fields, sort_keys=True) + "\n")
    sys.stdout.flush()


def text(ending: str, n: int) -> str:
    # a token of its own per memory ("zq0007x"), so each one can be found by its words
    return f"{ending} memory {n}: the deploy key note zq{n:04d}x for the release"


def remember(p: mempager.Pager, ending: str, n: int) -> None:
    body = text(ending, n)
    emit(ack=p.remember_fact(body), text=body)


def write(p: mempager.Pager, ending: str) -> int:
    for n in range(SINGLES):
        remember(p, ending, n)
    bodies = [text(ending, n) for n in range(SINGLES, SINGLES + BATCH)]
    for uri, body in zip(p.remember_many([{"type": "fact", "text": b} for b in bodies]), bodies, strict=True):
        emit(ack=uri, text=body)
    return SINGLES + BATCH


def main() -> None:
    location, embedder, ending = sys.argv[1:4]
    if ending == "handler":

        def own(signum: int, frame: object) -> None:
            sys.stdout.write("own handler\n")
            sys.stdout.flush()
            sys.exit(7)

        signal.signal(signal.SIGTERM, own)
    config = PagerConfig(embedder=embedder)
    p = mempager.open(location, actor="neo", config=config)
    if ending == "idle":
        p.close()
    else:
        n = write(p, ending)
    if ending in ("idle", "handler"):
        emit(ready=True)
        time.sleep(600)
    elif ending == "end":
        return
    elif ending == "exit":
        sys.exit(3)
    elif ending == "raise":
        raise RuntimeError("the child's own failure")
    elif ending == "closed":
        p.close()
        sys.exit(4)
    elif ending == "thread":

        def late() -> None:
            time.sleep(0.5)  # the main thread is gone by then
            for k in range(n, n + 5):
                remember(p, ending, k)

        threading.Thread(target=late, name="user-writer").start()
        sys.exit(0)
    elif ending == "sigterm":
        emit(ready=True)
        for k in range(n, n + 100_000):  # until SIGTERM: every write acknowledged after it returns
            remember(p, ending, k)
            time.sleep(0.01)
        time.sleep(600)
    else:
        raise SystemExit(f"unknown ending {ending!r}")


if __name__ == "__main__":
    main()
