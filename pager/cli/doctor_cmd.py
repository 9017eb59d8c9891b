"""``mempager doctor [--repair]``: the state of each file of a DuckDB store, and the safe recoveries.

    mempager doctor --store S            main file, write-ahead log, indexes, set-aside files, audit chain
    mempager doctor --store S --repair   set a damaged log aside, move a damaged store aside, rebuild indexes

The logic is ``mempager.maintenance.doctor``. Exit status: 0 when every file is healthy (after the
repair, with ``--repair``), 1 when something is still damaged, in use or not a store, 2 for a usage
error. It runs here even while ``mempager serve`` holds the store (it never goes through the server):
it then reports the store in use, and ``--repair`` refuses until the server stops.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mempager.errors import InvalidInput

COMMAND = "doctor"


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        COMMAND,
        parents=[common],
        help="check every file of a DuckDB store; --repair performs the safe recoveries",
        description="Report the main file, the write-ahead log, each saved index, the files earlier recoveries "
        "set aside and the audit chain. --repair keeps a damaged log in <store>.wal.damaged-<time> and replays "
        "its intact entries, moves a store DuckDB cannot open to <store>.damaged-<time>, and rebuilds damaged "
        "indexes from the store. Nothing is ever deleted but indexes, which are rebuilt.",
    )
    p.add_argument("--repair", action="store_true", help="perform the safe recoveries (the store must not be open)")


def run(args: argparse.Namespace, open_pager: Callable[[argparse.Namespace], Any], default_store: str) -> int:
    from mempager.maintenance import doctor

    store = getattr(args, "store", None) or os.environ.get("MEMPAGER_STORE") or default_store
    if store.startswith(("postgres://", "postgresql://")):
        raise InvalidInput("mempager doctor checks DuckDB store files; a PostgreSQL server has its own tools")

    def reopen(actors: list[str]) -> None:
        for actor in actors:  # opening rebuilds a missing index from the store; closing saves it
            with open_pager(argparse.Namespace(**{**vars(args), "actor": actor})):
                pass

    path = Path(store)
    report = doctor.repair(path, reopen) if args.repair else doctor.diagnose(path)
    if getattr(args, "json", False):
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(render(report))
    return 0 if report.healthy else 1


def render(report: Any) -> str:
    lines = [f"store {report.store}: {'healthy' if report.healthy else 'needs attention'}"]
    for f in report.findings:
        lines.append(f"  {f.part:<9} {f.state:<9} {f.path}\n  {'':<9} {'':<9} {f.detail}")
    if report.actions:
        lines.append("repaired:")
        lines += [f"  - {action}" for action in report.actions]
    elif any(f.state == "damaged" for f in report.findings):
        lines.append(f"run `mempager doctor --store {report.store} --repair` for the safe recoveries")
    return "\n".join(lines)
