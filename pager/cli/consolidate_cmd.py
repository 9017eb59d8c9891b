"""The LLM consolidation steps on the command line (the LLM: MEMPAGER_LLM_URL / _MODEL / _API_KEY).

mempager merge [--type T] [--scope S] [--dry-run]      restatements merged, originals superseded
mempager replay FILE|- [--force]                       a session's steps (JSON list) -> rules and lessons
mempager reflect FILE|- [--status S] [--tag T ...]     a transcript -> a diary entry
mempager distill                                       recurring learnings -> playbook patterns (to review)

A step the LLM could not do (none configured, a timeout, an invalid answer) or that another
consolidation holds is reported as skipped with the reason and exits 0: nothing was changed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from mempager.errors import InvalidInput

COMMANDS = frozenset({"merge", "replay", "reflect", "distill"})


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("merge", parents=[common], help="LLM: merge restatements, supersede stale memories")
    p.add_argument("--type", default=None, help="only this memory type (default: every mergeable type)")
    p.add_argument("--scope", choices=("global", "project"), default=None)
    p.add_argument("--dry-run", action="store_true", help="show what would change; change nothing")
    p = sub.add_parser("replay", parents=[common], help="LLM: extract rules and lessons from a session's steps")
    p.add_argument("file", help='a JSON list of steps ({"text": ..., "status": "ok|error|cancelled"}), or -')
    p.add_argument("--force", action="store_true", help="replay even when the heuristics would skip it")
    p = sub.add_parser("reflect", parents=[common], help="LLM: a task transcript becomes a diary entry")
    p.add_argument("file", help="the transcript (text), or - for standard input")
    p.add_argument("--status", choices=("success", "failure", "mixed"), default=None)
    p.add_argument("--tag", action="append", default=[], help="a tag for the entry (repeatable)")
    sub.add_parser("distill", parents=[common], help="LLM: recurring diary learnings become patterns to review")


def run(args: argparse.Namespace, open_pager: Callable[[argparse.Namespace], Any]) -> int:
    as_json = bool(getattr(args, "json", False))
    result: Any  # each step's own result type; all have skipped and to_dict()
    lines: list[str]
    with open_pager(args) as p:
        if args.command == "merge":
            result = p.merge(type=args.type, scope=args.scope, dry_run=args.dry_run)
            lines = [f"{g.kind}: {', '.join(g.originals)} -> {g.review or g.by or g.text}" for g in result.groups]
            done = f"{len(result.groups)} change(s)" + (" (dry run)" if result.dry_run else "")
        elif args.command == "replay":
            steps = _steps(_read(args.file))
            result = p.replay(steps, force=args.force)
            lines = [f"stored {u}" for u in result.stored] + [f"queued {u}" for u in result.queued]
            done = f"{len(result.stored)} stored, {len(result.queued)} waiting in `mempager review`"
        elif args.command == "reflect":
            result = p.reflect(_read(args.file), status=args.status, tags=args.tag)
            lines, done = [], f"diary entry {result.uri}"
        else:
            result = p.distill()
            lines = [f"queued {u}" for u in result.queued] + [f"known: {t}" for t in result.known]
            done = f"{len(result.queued)} pattern(s) waiting in `mempager review` ({result.entries} diary entries read)"
    if as_json:
        print(json.dumps(result.to_dict(), default=str, ensure_ascii=False))
    else:
        print(f"skipped: {result.skipped}" if result.skipped else "\n".join([*lines, done]))
    return 0


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise InvalidInput(f"cannot read {path!r}: {exc.strerror or exc}") from exc


def _steps(text: str) -> list[Any]:
    try:
        steps = json.loads(text)
    except ValueError as exc:
        raise InvalidInput(f"replay takes a JSON list of steps: {exc}") from exc
    if not isinstance(steps, list):
        raise InvalidInput('replay takes a JSON list of steps, e.g. [{"text": "...", "status": "error"}]')
    return steps
