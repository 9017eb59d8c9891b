"""``mempager export``, ``import`` and ``backup``: moving memories between stores, copying a store.

    mempager export [--actor A] [--vectors] [-o FILE] > f.jsonl    JSON lines (mempager.export.v1)
    mempager import f.jsonl | -  [--keep-actor]                   idempotent; progress on stderr
    mempager backup DEST                                          a consistent copy of a DuckDB store

``export`` writes the memories to stdout (or ``-o FILE``) and its summary to stderr, so the
output is only the file. The format and what an import keeps are described in
``mempager.maintenance.transfer_format`` and ``mempager.maintenance.transfer``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

COMMANDS = frozenset({"export", "import", "backup"})


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the three subcommands to ``sub`` (the main parser's subparsers), sharing ``common``."""
    p = sub.add_parser("export", parents=[common], help="write this actor's memories as JSON lines")
    p.add_argument(
        "--vectors", action="store_true", help="include every stored vector (float32, little-endian, base64)"
    )
    p.add_argument("-o", "--output", default="-", help="file to write (default: stdout)")
    p = sub.add_parser("import", parents=[common], help="import memories from a `mempager export` file (or -)")
    p.add_argument("file", help="a mempager.export.v1 JSON lines file, or - for stdin")
    p.add_argument(
        "--keep-actor",
        action="store_true",
        help="write each memory for the actor its line names (default: the --actor this command opens)",
    )
    p = sub.add_parser("backup", parents=[common], help="a consistent copy of the store file, taken while in use")
    p.add_argument("dest", help="the new store file (or an existing directory to put it in)")


def run(args: argparse.Namespace, open_pager: Callable[[argparse.Namespace], Any]) -> int:
    """Run ``args.command`` (one of ``COMMANDS``) on the pager ``open_pager(args)`` opens."""
    as_json = bool(getattr(args, "json", False))
    with contextlib.redirect_stdout(sys.stderr):  # nothing but the export may reach stdout
        pager = open_pager(args)
    with pager:
        if args.command == "export":
            return _export(pager, args, as_json)
        if args.command == "import":
            return _import(pager, args, as_json)
        path = pager.backup(args.dest)
        _say(
            {"backup": str(path), "store": pager.store.location}, f"backed up {pager.store.location} to {path}", as_json
        )
        return 0


def _export(pager: Any, args: argparse.Namespace, as_json: bool) -> int:
    to_stdout = args.output == "-"
    if to_stdout:
        sys.stdout.flush()
        count = pager.export(sys.stdout.buffer, vectors=args.vectors)
        sys.stdout.buffer.flush()
    else:
        count = pager.export(args.output, vectors=args.vectors)
    where = "stdout" if to_stdout else args.output
    result = {"exported": count, "actor": pager.actor, "vectors": bool(args.vectors), "output": where}
    _say(result, f"exported {count} memories of {pager.actor} to {where}", as_json, err=to_stdout)
    return 0


def _import(pager: Any, args: argparse.Namespace, as_json: bool) -> int:
    from tqdm import tqdm

    source = sys.stdin.buffer if args.file == "-" else args.file
    bars: list[Any] = []  # made on the first report: a refused file prints its one error line, no bar

    def show(done: int, total: int) -> None:
        if not bars:
            bars.append(tqdm(total=total, desc="import", unit="memory", file=sys.stderr))
        bars[0].update(done - bars[0].n)

    try:
        report = pager.import_memories(source, keep_actor=args.keep_actor, progress=show)
    finally:
        for bar in bars:
            bar.close()
    pending = pager.stats()["pending_embeddings"]
    summary = (
        f"imported {report.added} memories ({report.skipped} already there, skipped), "
        f"{report.vectors} vectors stored, from {report.read} lines"
    )
    if report.crystals or report.spores or report.tiers_skipped:
        summary += f"; {report.crystals} crystals and {report.spores} spores ({report.tiers_skipped} already there)"
    if pending:  # this command embeds nothing: say what will
        summary += f"; {pending} memories wait for {pager.semantic.model}: `mempager reembed` embeds them now"
    _say({**asdict(report), "pending_embeddings": pending}, summary, as_json)
    return 0


def _say(result: dict[str, Any], line: str, as_json: bool, *, err: bool = False) -> None:
    out = sys.stderr if err else sys.stdout
    print(json.dumps(result, sort_keys=True) if as_json else line, file=out)
