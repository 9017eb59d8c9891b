"""The ``mempager`` command line. User mistakes print one clear line and exit non-zero."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, is_dataclass
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any

from mempager import __version__
from mempager.config import EMBEDDER_CHOICES, PagerConfig
from mempager.errors import PagerError

DEFAULT_STORE = ".mempager/store.duckdb"
EXIT_USER_ERROR = 2


def _jsonable(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return _jsonable(asdict(value))
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def _print_json(value: Any) -> None:
    print(json.dumps(_jsonable(value), indent=2, ensure_ascii=False, sort_keys=True))


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    common.add_argument("--store", help=f"store file (default $MEMPAGER_STORE or {DEFAULT_STORE})")
    common.add_argument("--actor", help="whose memories (default $MEMPAGER_ACTOR or 'default')")
    common.add_argument("--embedder", choices=EMBEDDER_CHOICES, help="force one embedder")
    common.add_argument("--json", action="store_true", help="machine-readable output")
    return common


def build_parser() -> argparse.ArgumentParser:
    common = _common()
    parser = argparse.ArgumentParser(
        prog="mempager",
        parents=[common],
        description="A memory pager for LLM agents: pin, page-fault, write back.",
    )
    parser.add_argument("--version", action="version", version=f"mempager {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("init", parents=[common], help="create the store (idempotent)")
    p = sub.add_parser("remember", parents=[common], help="store a memory")
    p.add_argument("text")
    p.add_argument("--type", default="fact", help="identity, rule, constraint, profile, fact, event, ...")
    p.add_argument("--tag", action="append", default=[], dest="tags")
    p.add_argument("--created-at", dest="created_at", default=None)
    p = sub.add_parser("retrieve", parents=[common], help="page-fault memories for a query")
    p.add_argument("query")
    p.add_argument("-k", type=int, default=None)
    p = sub.add_parser("pinned", parents=[common], help="print the pinned block")
    p.add_argument("--goal", default=None)
    p = sub.add_parser("page", parents=[common], help="assemble the per-turn page")
    p.add_argument("--goal", default=None)
    p.add_argument("--query", required=True)
    p.add_argument("--explain", action="store_true", help="print the paging report as a table")
    p = sub.add_parser("recall", parents=[common], help="deliberate look-up with filters")
    p.add_argument("query", nargs="?", default=None)
    p.add_argument("--type", action="append", dest="types", default=None)
    p.add_argument("--since", default=None)
    p.add_argument("--until", default=None)
    p.add_argument(
        "--source",
        action="append",
        dest="sources",
        default=None,
        help="user, observed, llm or consolidation (repeat for any of several)",
    )
    p.add_argument(
        "--tag",
        "--tags",
        action="append",
        dest="tags",
        default=None,
        help="only memories carrying this tag (repeat: all of them)",
    )
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--offset", type=int, default=0)
    p = sub.add_parser("forget", parents=[common], help="hard-delete a memory by uri")
    p.add_argument("uri")
    sub.add_parser("stats", parents=[common], help="counts, embedder, embedding lag")
    p = sub.add_parser("review", parents=[common], help="list or decide queued memories and inversions")
    p.add_argument("--accept", metavar="ID", default=None)
    p.add_argument("--reject", metavar="ID", default=None)
    p.add_argument("--all", action="store_true", help="include decided items")
    p = sub.add_parser("audit", parents=[common], help="list audit entries, or `audit verify` the chain")
    p.add_argument("action", nargs="?", choices=["list", "verify"], default="list")
    p.add_argument("--since", default=None, help="e.g. 7d, 12h, or an ISO time")
    p.add_argument("--limit", type=int, default=1000)
    p = sub.add_parser("reembed", parents=[common], help="embed every memory with the active model (resumable)")
    p.add_argument("--finalize", action="store_true", help="then drop other models' vectors")
    sub.add_parser("sweep", parents=[common], help="decay, promote/demote patterns, propose inversions")
    p = sub.add_parser("feedback", parents=[common], help="success/failure for the patterns a turn injected")
    p.add_argument("turn")
    p.add_argument("outcome", choices=["success", "failure"])
    p.add_argument(
        "--used",
        action="append",
        default=None,
        metavar="LABEL",
        help="credit only this injected pattern (label or uri; repeatable)",
    )
    sub.add_parser("demo", parents=[common], help="play a scripted agent session and show the page")
    p = sub.add_parser("bench", parents=[common], help="offline benchmarks: `bench locomo --data locomo10.json`")
    p.add_argument("suite", choices=["locomo"])
    p.add_argument("--data", required=True, help="path to locomo10.json")
    p.add_argument("--out", default=None, help="results directory (default benchmarks/results if present)")
    p.add_argument("--limit", type=int, default=None, help="only the first N conversations")
    p = sub.add_parser("serve", parents=[common], help="run the MCP server (stdio, or streamable HTTP on 127.0.0.1)")
    p.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--goal", default=None, help="goal for the pinned-block resource")
    return parser


def _open(args: argparse.Namespace) -> Any:
    import mempager

    store = getattr(args, "store", None) or os.environ.get("MEMPAGER_STORE") or DEFAULT_STORE
    actor = getattr(args, "actor", None) or os.environ.get("MEMPAGER_ACTOR") or "default"
    overrides: dict[str, Any] = {"embedder": args.embedder} if getattr(args, "embedder", None) else {}
    target = store if store.startswith(("postgres://", "postgresql://")) else Path(store)
    return mempager.open(target, actor=actor, config=PagerConfig.from_env(**overrides))


def _settle(p: Any, timeout: float) -> None:
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


def _memory_line(m: Any) -> str:
    text = " ".join(m.text.split())
    return f"{m.uri}  [{m.type.value} · {m.created_at:%Y-%m-%d %H:%M}]  {text}"


def _review(p: Any, args: argparse.Namespace, as_json: bool) -> None:
    if args.accept or args.reject:
        uri = p.decide(args.accept or args.reject, accept=bool(args.accept))
        result = {"decided": args.accept or args.reject, "accepted": bool(args.accept), "uri": uri}
        _print_json(result) if as_json else print(
            f"{'accepted' if args.accept else 'rejected'}{': ' + uri if uri else ''}"
        )
        return
    items = p.review(status=None if args.all else "pending")
    if as_json:
        _print_json(items)
        return
    for item in items:
        # a decided item keeps no text (forget must be able to erase it): show what it became
        shown = item.payload.get("text") or (f"-> {item.result_uri}" if item.result_uri else "(text not kept)")
        print(f"{item.id}  [{item.kind} · {item.status}]  {shown}")
    if not items:
        print("(review queue empty)")


def _reembed(p: Any, args: argparse.Namespace, as_json: bool) -> int:
    from tqdm import tqdm

    total = p.store.pending_stats(p.actor, p.semantic.model).count
    with tqdm(total=total, desc=f"reembed {p.semantic.model}", unit="memory", file=sys.stderr) as bar:

        def show(done: int, _total: int) -> None:
            bar.update(done - bar.n)

        p.reembed(progress=show)
    dropped = p.finalize_migration() if args.finalize else {}
    result = {"model": p.semantic.model, "embedded": total, "dropped": dropped}
    _print_json(result) if as_json else print(
        f"{total} memories embedded with {p.semantic.model}"
        + (f"; dropped {dropped}" if args.finalize else "; old vectors kept (use --finalize to drop them)")
    )
    return 0


def _audit(p: Any, args: argparse.Namespace, as_json: bool) -> int:
    if args.action == "verify":
        report = p.verify_audit()
        if as_json:
            _print_json(report)
        elif report.ok:
            print(f"audit chain intact: {report.checked} entries")
        else:
            print(f"audit chain BROKEN at entry {report.first_broken}: {report.reason}")
        return 0 if report.ok else 1
    entries = p.audit(since=args.since, limit=args.limit)
    if as_json:
        _print_json(entries)
    for e in [] if as_json else entries:
        print(f"{e.seq:>6} {e.at:%Y-%m-%d %H:%M:%S} {e.op:<9} {e.uri}  {e.content_hash[:12]}  {e.hash[:12]}")
    return 0


def _bench(args: argparse.Namespace) -> int:
    from mempager.embedders import EmbedderSettings, pick_embedder
    from mempager.evaluation.bench_locomo import run

    forced = getattr(args, "embedder", None) or "auto"
    choice = pick_embedder(EmbedderSettings.from_env(None, actor="bench", force=forced))
    print(f"mempager bench locomo: embedder {choice.embedder.name}", file=sys.stderr)
    out = (
        Path(args.out)
        if args.out
        else (Path("benchmarks/results") if Path("benchmarks/results").is_dir() else Path("mempager-bench"))
    )
    result = run(Path(args.data), choice.embedder, PagerConfig.from_env(), out, limit=args.limit)
    default = next(n for n in result["configurations"] if n.startswith("fused") and n.endswith("default)"))
    r10 = result["configurations"][default]["at_k"][10]
    print(f"fused R@10 {r10:.3f} over {result['questions']} questions; results in {out}/locomo.md")
    return 0


def _serve(args: argparse.Namespace) -> int:
    """``mempager serve``: open the pager here (the usual defaults), hand it to the MCP server, close it."""
    # imported first: without the MCP SDK this fails with one clear line before the store is touched
    from mempager.mcp.server import configure_logging, serve

    configure_logging()
    with contextlib.redirect_stdout(sys.stderr):  # model-loading chatter must never reach the stdio wire
        pager = _open(args)
    with pager:  # closed (index saved) when serving ends, also on SIGTERM (SystemExit from serve)
        return int(
            serve(
                pager,
                goal=getattr(args, "goal", None),
                http=bool(getattr(args, "http", False)),
                port=int(getattr(args, "port", 8765)),
            )
        )


def _run(args: argparse.Namespace) -> int:
    as_json = getattr(args, "json", False)
    if args.command == "demo":
        from mempager.evaluation.demo import run_demo

        return run_demo(store=getattr(args, "store", None), as_json=as_json, embedder=getattr(args, "embedder", None))
    if args.command == "bench":
        return _bench(args)
    if args.command == "serve":
        return _serve(args)
    with _open(args) as p:
        cmd = args.command
        if cmd == "init":
            _print_json(p.stats()) if as_json else print(f"store ready: {p.store.location} (actor {p.actor})")
        elif cmd == "remember":
            uri = p.remember(args.type, args.text, tags=args.tags, created_at=args.created_at)
            _settle(p, timeout=30)
            _print_json({"uri": uri}) if as_json else print(uri)
        elif cmd == "retrieve":
            snippets = p.retrieve(args.query, k=args.k)
            if as_json:
                _print_json(snippets)
            for s in [] if as_json else snippets:
                lanes = " ".join(f"{k}#{h.rank}" for k, h in sorted(s.lanes.items()))
                print(f"{s.score:.4f}  {s.uri}  ({lanes})\n    {' '.join(s.text.split())}")
        elif cmd == "pinned":
            block = p.pinned_block(args.goal)
            _print_json(block) if as_json else print(block.text)
        elif cmd == "page":
            page = p.page(args.goal, args.query)
            if as_json:
                _print_json({"page": page.render(), "report": page.report.to_dict()})
            else:
                print(page.render())
                if args.explain:
                    print("\n" + page.report.table())
        elif cmd == "recall":
            rows = p.recall(
                args.query,
                types=args.types,
                since=args.since,
                until=args.until,
                limit=args.limit,
                offset=args.offset,
                source=args.sources,
                tags=args.tags,
            )
            _print_json(rows) if as_json else print("\n".join(_memory_line(m) for m in rows) or "(none)")
        elif cmd == "forget":
            p.forget(args.uri)
            _print_json({"forgotten": args.uri}) if as_json else print(f"forgotten: {args.uri}")
        elif cmd == "review":
            _review(p, args, as_json)
        elif cmd == "audit":
            return _audit(p, args, as_json)
        elif cmd == "reembed":
            return _reembed(p, args, as_json)
        elif cmd == "sweep":
            counts = p.sweep()
            _print_json(counts) if as_json else print(", ".join(f"{k} {v}" for k, v in counts.items()))
        elif cmd == "feedback":
            n = p.feedback(args.turn, args.outcome, used=args.used)
            _print_json({"updated": n}) if as_json else print(f"{args.outcome} applied to {n} patterns")
        elif cmd == "stats":
            stats = p.stats()
            if as_json:
                _print_json(stats)
            for key, value in [] if as_json else stats.items():
                print(f"{key:>22}: {value}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _run(args)
    except PagerError as exc:
        print(f"mempager: error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("mempager: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
