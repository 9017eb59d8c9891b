"""The processes the damaged-store tests run (not collected by pytest).

    python _damage_child.py build STORE   checkpointed writes, then acknowledged writes left in the WAL
    python _damage_child.py open STORE    open, report, close; then the same again (no crash loop)

``build`` prints one JSON object: the texts written before the clean close (checkpointed into the main
file, indexes saved) and the texts acknowledged after it, then ends with ``os._exit`` so those stay in
the WAL only. ``open`` prints one JSON object per open (the texts the store holds, how each lane opened,
whether a page fault finds a checkpointed fact), or, when the open is refused, the typed error; it
exits 3 then. A signal (a segfault, an abort) shows as a negative return code in the parent.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import mempager
from mempager import PagerConfig, PagerError

CONFIG = PagerConfig(embedder="hash")
CHECKPOINTED = [f"checkpointed fact {i}: the deploy key rotates on day {i}" for i in range(12)]
IN_WAL = [f"wal fact {i}: the vault path is secret/billing/{i}" for i in range(8)]


def build(path: str) -> None:
    with mempager.open(path, actor="neo", config=CONFIG) as p:
        for text in CHECKPOINTED:
            p.remember_fact(text)
        assert p.sync(timeout=60)
    p = mempager.open(path, actor="neo", config=CONFIG)
    acked = []
    for text in IN_WAL:
        p.remember_fact(text)
        acked.append(text)  # remember_fact returned: the write is durable in the WAL
    print(json.dumps({"checkpointed": CHECKPOINTED, "wal": acked}), flush=True)
    os._exit(0)  # no close: no checkpoint, no index save; the WAL holds the last writes


def report(p: mempager.Pager) -> dict[str, Any]:
    hits = p.retrieve("when does the deploy key rotate on day 3", k=20)
    return {
        "texts": sorted(m.text for m in p.recall(limit=1_000)),
        "semantic": p.semantic.opened_how,
        "lexical": p.lexical.opened_how,
        "found": any(s.text == CHECKPOINTED[3] for s in hits),
        "audit_ok": p.verify_audit().ok,
    }


def open_twice(path: str) -> int:
    for attempt in ("first", "second"):
        try:
            with mempager.open(path, actor="neo", config=CONFIG) as p:
                body = {"open": attempt, **report(p)}
        except PagerError as exc:
            print(json.dumps({"open": attempt, "error": type(exc).__name__, "message": str(exc)}), flush=True)
            return 3
        print(json.dumps(body), flush=True)
    return 0


if __name__ == "__main__":
    mode, store = sys.argv[1], sys.argv[2]
    if mode == "build":
        build(store)
    sys.exit(open_twice(store))
