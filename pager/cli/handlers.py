"""The command line's output and its per-command handlers that work on an opened pager.

``cli.main`` parses and dispatches; what each command prints lives here.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, is_dataclass
from datetime import datetime
from enum import Enum
from typing import Any

from mempager.errors import InvalidInput


def jsonable(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return jsonable(asdict(value))
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def print_json(value: Any) -> None:
    print(json.dumps(jsonable(value), indent=2, ensure_ascii=False, sort_keys=True))


def settle(p: Any, timeout: float) -> None:
    """Embed what was just written before the process exits, unless the embedder is failing:
    then say so and leave it pending (the store has it; the next open embeds it)."""
    deadline = time.monotonic() + timeout
    while not p.sync(timeout=0.25):
        failing = p.stats()
        if failing["failing_embeddings"] or time.monotonic() >= deadline:
            why = failing["last_embed_error"] or "embedding is slow"
            print(
                f"mempager: note: stored, not yet embedded ({why}); it is embedded when the store is next "
                "opened with a working embedder",
                file=sys.stderr,
            )
            return


def memory_line(m: Any) -> str:
    text = " ".join(m.text.split())
    return f"{m.uri}  [{m.type.value} · {m.created_at:%Y-%m-%d %H:%M}]  {text}"


def memory_full(m: Any) -> str:
    lines = [
        f"{m.uri}",
        f"  type {m.type.value} · source {m.source.value} · scope {m.scope.value}",
        f"  created {m.created_at:%Y-%m-%d %H:%M:%S} · updated {m.updated_at:%Y-%m-%d %H:%M:%S} · "
        f"accessed {m.access_count}x",
        f"  confidence {m.confidence:.2f} · importance {m.importance:.2f} · strength {m.strength:.2f}",
    ]
    if m.tags:
        lines.append(f"  tags {', '.join(m.tags)}")
    if m.metadata:
        lines.append(f"  metadata {json.dumps(m.metadata, ensure_ascii=False, sort_keys=True)}")
    if m.superseded_by or m.valid_until:
        lines.append(f"  superseded by {m.superseded_by} · valid until {m.valid_until}")
    return "\n".join([*lines, "", m.text])


def review(p: Any, args: argparse.Namespace, as_json: bool) -> None:
    if args.accept or args.reject:
        uri = p.decide(args.accept or args.reject, accept=bool(args.accept))
        result = {"decided": args.accept or args.reject, "accepted": bool(args.accept), "uri": uri}
        print_json(result) if as_json else print(
            f"{'accepted' if args.accept else 'rejected'}{': ' + uri if uri else ''}"
        )
        return
    items = p.review(status=None if args.all else "pending")
    if as_json:
        print_json(items)
        return
    for item in items:
        # a decided item keeps no text (forget must be able to erase it): show what it became
        shown = item.payload.get("text") or (f"-> {item.result_uri}" if item.result_uri else "(text not kept)")
        print(f"{item.id}  [{item.kind} · {item.status}]  {shown}")
    if not items:
        print("(review queue empty)")


def model(p: Any, args: argparse.Namespace, as_json: bool) -> int:
    if args.action == "use":
        result = p.use_model()
        print_json(result) if as_json else print(
            f"active model is now {result['active']} (was {result['previous']}); {result['pending']} memories "
            "wait for it: `mempager reembed` embeds them (old vectors stay until `reembed --finalize --yes`)"
        )
        return 0
    stats = p.stats()
    shown = {k: stats[k] for k in ("active_model", "embedder", "embedding", "vector_models", "pending_embeddings")}
    print_json(shown) if as_json else print("\n".join(f"{k:>20}: {v}" for k, v in shown.items()))
    return 0


def reembed(p: Any, args: argparse.Namespace, as_json: bool) -> int:
    from tqdm import tqdm

    if args.finalize and not args.yes:
        doomed = {m: n for m, n in p.store.vector_models(p.actor).items() if m != p.semantic.model}
        raise InvalidInput(
            f"--finalize deletes the vectors of {doomed or 'no other model'} (kept: {p.semantic.model}); "
            "add --yes to confirm"
        )
    total = p.store.pending_stats(p.actor, p.semantic.model).count
    with tqdm(total=total, desc=f"reembed {p.semantic.model}", unit="memory", file=sys.stderr) as bar:

        def show(done: int, _total: int) -> None:
            bar.update(done - bar.n)

        p.reembed(progress=show)
    dropped = p.finalize_migration() if args.finalize else {}
    result = {"model": p.semantic.model, "embedded": total, "dropped": dropped}
    print_json(result) if as_json else print(
        f"{total} memories embedded with {p.semantic.model}"
        + (f"; dropped {dropped}" if args.finalize else "; old vectors kept (use --finalize to drop them)")
    )
    return 0


def audit(p: Any, args: argparse.Namespace, as_json: bool) -> int:
    if args.action == "verify":
        report = p.verify_audit()
        if as_json:
            print_json(report)
        elif report.ok:
            print(f"audit chain intact: {report.checked} entries")
        else:
            print(f"audit chain BROKEN at entry {report.first_broken}: {report.reason}")
        return 0 if report.ok else 1
    entries = p.audit(since=args.since, limit=args.limit)
    if as_json:
        print_json(entries)
    for e in [] if as_json else entries:
        print(f"{e.seq:>6} {e.at:%Y-%m-%d %H:%M:%S} {e.op:<9} {e.uri}  {e.content_hash[:12]}  {e.hash[:12]}")
    return 0
