"""The crystallized tier and spores on the command line: the same calls as the library.

mempager crystal list                          crystals, and the continuity's 3x patterns ready to crystallize
mempager crystal recall QUERY [-k N]           crystals QUERY cues (their words, or an evidence edge)
mempager crystal add NAME [--body TEXT]        propose the 3x pattern NAME for review; --body: write one yourself
mempager crystal forget ID|NAME                delete a crystal (its bytes erased like a hard forget's)
mempager spore add TEXT [--cue C] [--due WHEN] an intention, shown in a page when cued or due
mempager spore list [--done | --all]           open spores (or completed ones, or all)
mempager spore done ID | spore drop ID         complete it (cleaned after spore_retention_days) / delete it now
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

COMMANDS = frozenset({"crystal", "spore"})


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("crystal", parents=[common], help="the crystallized tier: proven patterns recalled on cue")
    steps = p.add_subparsers(dest="crystal_step", required=True, metavar="STEP")
    steps.add_parser("list", parents=[common], help="the crystals, and the 3x patterns ready to crystallize")
    q = steps.add_parser("recall", parents=[common], help="the crystals a query cues")
    q.add_argument("query")
    q.add_argument("-k", type=int, default=3)
    q = steps.add_parser("add", parents=[common], help="propose a 3x pattern of the continuity (review queue)")
    q.add_argument("name", help="the pattern's text as the continuity has it")
    q.add_argument("--body", default=None, help="write the crystal yourself (no review): its body")
    q = steps.add_parser("forget", parents=[common], help="delete a crystal and erase its bytes")
    q.add_argument("which", metavar="ID|NAME")
    p = sub.add_parser("spore", parents=[common], help="spores: intentions shown in a page when cued or due")
    steps = p.add_subparsers(dest="spore_step", required=True, metavar="STEP")
    q = steps.add_parser("add", parents=[common], help="remember to do something")
    q.add_argument("text")
    q.add_argument("--cue", default=None, help="words that bring it into a page (default: its own text)")
    q.add_argument("--due", default=None, help='when it is due: a time, or "30m", "2h", "3d", "1w" from now')
    q = steps.add_parser("list", parents=[common], help="open spores")
    shown = q.add_mutually_exclusive_group()
    shown.add_argument("--done", action="store_true", help="completed ones (until they are cleaned)")
    shown.add_argument("--all", action="store_true", help="open and completed")
    for step, what in (("done", "complete a spore"), ("drop", "delete a spore now")):
        q = steps.add_parser(step, parents=[common], help=what)
        q.add_argument("id")


def run(args: argparse.Namespace, open_pager: Callable[[argparse.Namespace], Any]) -> int:
    as_json = bool(getattr(args, "json", False))
    with open_pager(args) as p:
        if args.command == "crystal":
            _crystal(p, args, as_json)
        else:
            _spore(p, args, as_json)
    return 0


def _crystal(p: Any, args: argparse.Namespace, as_json: bool) -> None:
    step = args.crystal_step
    if step == "list":
        crystals, ready = p.crystals(), p.tiers.crystals.eligible()
        lines = [f"{c.id}  [{c.source}]  {c.name}" for c in crystals] or ["(no crystals yet)"]
        lines += [f"ready to crystallize: {name}" for name in ready]
        _print({"crystals": [_crystal_dict(c) for c in crystals], "ready": ready}, "\n".join(lines), as_json)
    elif step == "recall":
        hits = p.crystal_recall(args.query, k=args.k)
        body = [{**_crystal_dict(h.crystal), "score": h.score, "cue": h.why} for h in hits]
        text = "\n".join(f"{h.score:.3f}  {h.crystal.uri}  ({h.why})\n    {h.crystal.body}" for h in hits)
        _print({"crystals": body}, text or "(no crystal matches)", as_json)
    elif step == "add" and args.body is not None:
        crystal = p.tiers.crystals.add(args.name, args.body)
        _print(_crystal_dict(crystal), f"crystallized: {crystal.uri}", as_json)
    elif step == "add":
        ids = p.crystallize(args.name)
        _print({"review": ids}, "\n".join(f"queued for review: mempager review --accept {i}" for i in ids), as_json)
    else:
        which = args.which
        uri = which if which.startswith("crystal://") else None
        if uri is None:
            found = [c for c in p.crystals() if which in (c.id, c.name)]
            uri = found[0].uri if found else f"crystal://{p.actor}/{which}"
        count = p.forget(uri)
        _print({"forgotten": count}, f"forgot {count} crystal", as_json)


def _spore(p: Any, args: argparse.Namespace, as_json: bool) -> None:
    step = args.spore_step
    if step == "add":
        spore = p.spore(args.text, cue=args.cue, due=args.due)
        _print(_spore_dict(spore), spore.uri, as_json)
    elif step == "list":
        spores = p.spores("all" if args.all else "done" if args.done else "open")
        lines = [
            f"{s.id}  [{s.status}{' · due ' + s.due_at.strftime('%Y-%m-%d %H:%M') if s.due_at else ''}]  {s.text}"
            + (f"  (cue: {s.cue})" if s.cue else "")
            for s in spores
        ]
        _print({"spores": [_spore_dict(s) for s in spores]}, "\n".join(lines) or "(no spores)", as_json)
    else:
        spore = p.complete_spore(args.id) if step == "done" else p.drop_spore(args.id)
        _print(_spore_dict(spore), f"{'completed' if step == 'done' else 'dropped'}: {spore.uri}", as_json)


def _crystal_dict(c: Any) -> dict[str, Any]:
    return {
        "uri": c.uri,
        "id": c.id,
        "name": c.name,
        "body": c.body,
        "source": c.source,
        "evidence": [e.id for e in c.evidence],
        "created_at": c.created_at.isoformat(),
    }


def _spore_dict(s: Any) -> dict[str, Any]:
    return {
        "uri": s.uri,
        "id": s.id,
        "text": s.text,
        "cue": s.cue,
        "due_at": s.due_at.isoformat() if s.due_at else None,
        "status": s.status,
        "created_at": s.created_at.isoformat(),
        "done_at": s.done_at.isoformat() if s.done_at else None,
    }


def _print(body: dict[str, Any], line: str, as_json: bool) -> None:
    print(json.dumps(body, default=str, ensure_ascii=False) if as_json else line)
