# PYTHON_ARGCOMPLETE_OK
"""The ``mempager`` command line. User mistakes print one clear line and exit non-zero."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from mempager import __version__
from mempager.cli import (
    bench_cmd,
    config_cmd,
    consolidate_cmd,
    doctor_cmd,
    handlers,
    hook_cmd,
    relay,
    tier_cmd,
    ui_cmd,
    wrap_cmd,
)
from mempager.cli import transfer as transfer_cli
from mempager.config import EMBEDDER_CHOICES, PagerConfig
from mempager.errors import InvalidInput, PagerError

DEFAULT_STORE = ".mempager/store.duckdb"
EXIT_USER_ERROR = 2


class _Parser(argparse.ArgumentParser):
    """argparse, whose usage errors follow ``--json`` too: one JSON object on stderr, exit 2."""

    json_errors = False

    def error(self, message: str) -> NoReturn:
        if not self.json_errors:
            super().error(message)
        body = {"error": {"type": "UsageError", "message": f"{self.prog}: {message}", "exit_code": 2}}
        print(json.dumps(body, ensure_ascii=False), file=sys.stderr)
        raise SystemExit(2)


def _common() -> _Parser:
    common = _Parser(add_help=False, argument_default=argparse.SUPPRESS)
    common.add_argument("--store", help=f"store file (default $MEMPAGER_STORE or {DEFAULT_STORE})")
    common.add_argument("--actor", help="whose memories (default $MEMPAGER_ACTOR or 'default')")
    common.add_argument("--embedder", choices=EMBEDDER_CHOICES, help="force one embedder")
    common.add_argument("--json", action="store_true", help="machine-readable output")
    return common


def _meta_pair(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` for ``--meta``; the value is read as JSON when it parses (numbers, true), else text."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--meta takes KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(raw)
    except ValueError:
        return key, raw


def _filters(p: argparse.ArgumentParser, tags: bool = True) -> None:
    if tags:
        p.add_argument("--tag", action="append", dest="tags", default=None, help="only memories with this tag (repeat)")
    p.add_argument(
        "--meta",
        action="append",
        dest="meta",
        type=_meta_pair,
        default=None,
        metavar="KEY=VALUE",
        help="only memories whose metadata has KEY equal to VALUE (repeat: all of them)",
    )


def build_parser() -> argparse.ArgumentParser:
    common = _common()
    parser = _Parser(
        prog="mempager",
        parents=[common],
        description="A memory pager for LLM agents: pin, page-fault, write back.",
    )
    parser.add_argument("--version", action="version", version=f"mempager {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("init", parents=[common], help="create the store (idempotent)")
    p = sub.add_parser("remember", parents=[common], help="store a memory")
    p.add_argument("text", help="the memory's text; - reads it from standard input")
    p.add_argument("--type", default="fact", help="identity, rule, constraint, profile, fact, event, ...")
    p.add_argument("--tag", action="append", default=[], dest="tags")
    p.add_argument("--created-at", dest="created_at", default=None)
    p = sub.add_parser("retrieve", parents=[common], help="page-fault memories for a query")
    p.add_argument("query")
    _filters(p)
    p.add_argument("-k", type=int, default=None)
    p = sub.add_parser("pinned", parents=[common], help="print the pinned block")
    p.add_argument("--goal", default=None)
    p = sub.add_parser("page", parents=[common], help="assemble the per-turn page")
    p.add_argument("query", nargs="?", default=None, help="what the turn is about (as in the API and MCP tool)")
    p.add_argument("--goal", default=None)
    p.add_argument("--query", dest="query_option", default=None, help=argparse.SUPPRESS)  # the older spelling
    _filters(p)
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
    _filters(p, tags=False)
    p = sub.add_parser("forget", parents=[common], help="hard-delete a memory by uri")
    p.add_argument("uri")
    sub.add_parser("stats", parents=[common], help="counts, embedder, embedding lag")
    p = sub.add_parser("get", parents=[common], help="one memory in full, by uri")
    p.add_argument("uri")
    p = sub.add_parser("history", parents=[common], help="the audit events of one memory, oldest first")
    p.add_argument("uri")
    p = sub.add_parser("review", parents=[common], help="list or decide queued memories and inversions")
    p.add_argument("--accept", metavar="ID", default=None)
    p.add_argument("--reject", metavar="ID", default=None)
    p.add_argument("--all", action="store_true", help="include decided items")
    p = sub.add_parser("audit", parents=[common], help="list audit entries, or `audit verify` the chain")
    p.add_argument("action", nargs="?", choices=["list", "verify"], default="list")
    p.add_argument("--since", default=None, help="e.g. 7d, 12h, or an ISO time")
    p.add_argument("--limit", type=int, default=1000)
    p = sub.add_parser("reembed", parents=[common], help="embed every memory with the active model (resumable)")
    p.add_argument("--finalize", action="store_true", help="then drop other models' vectors (needs --yes)")
    p.add_argument("--yes", action="store_true", help="confirm --finalize: the other models' vectors are deleted")
    p = sub.add_parser(
        "model", parents=[common], help="the active embedding model; `model use` switches to --embedder's"
    )
    p.add_argument("action", nargs="?", choices=["show", "use"], default="show")
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
    bench_cmd.add_parser(sub, common)  # bench locomo|longmemeval
    p = sub.add_parser("serve", parents=[common], help="run the MCP server (stdio, or streamable HTTP on 127.0.0.1)")
    p.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--goal", default=None, help="goal for the pinned-block resource")
    p.add_argument("--allow-host", action="append", default=[], metavar="HOST[:PORT]", help="--http: also accept Host")
    p.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN", help="--http: also accept Origin")
    p.add_argument("--max-body-bytes", type=int, default=None, help="--http: larger bodies get 413 (default 1 MiB)")
    p.add_argument("--rate-limit", type=float, default=None, help="--http: requests/s per client (default 100; 0: off)")
    transfer_cli.add_parsers(sub, common)  # export, import, backup
    config_cmd.add_parser(sub, common)  # config: reads the environment only
    wrap_cmd.add_parsers(sub, common)  # wrap prepare|save|auto, continuity, graph, diff
    consolidate_cmd.add_parsers(sub, common)  # merge, replay, reflect, distill
    tier_cmd.add_parsers(sub, common)  # crystal list|recall|add|forget, spore add|list|done|drop
    hook_cmd.add_parser(sub, common)  # hook session-start|user-prompt-submit|stop (Claude Code)
    doctor_cmd.add_parser(sub, common)  # doctor [--repair]: each file of a DuckDB store
    ui_cmd.add_parsers(sub, common)  # ui: the local web inspector (pager/ui)
    return parser


# Commands that embed (a query, or what they wrote before they exit). Every other command embeds
# nothing: it runs without embedding workers, so it never loads the model (issue 17: `stats`,
# `recall`, `pinned`, `get`, `audit` answer in a fraction of a second).
EMBEDDING_COMMANDS = frozenset(
    {"remember", "retrieve", "page", "reembed", "serve", "model", hook_cmd.COMMAND, ui_cmd.COMMAND}
)


def _open(args: argparse.Namespace) -> Any:
    import mempager

    store = getattr(args, "store", None) or os.environ.get("MEMPAGER_STORE") or DEFAULT_STORE
    actor = getattr(args, "actor", None) or os.environ.get("MEMPAGER_ACTOR") or "default"
    # the model loads on its first embed, whichever command this is: opening never waits for it
    overrides: dict[str, Any] = {"defer_model_load": True}
    if args.command not in EMBEDDING_COMMANDS:
        overrides["embed_workers"] = 0
    if getattr(args, "embedder", None):
        overrides["embedder"] = args.embedder
    target = store if store.startswith(("postgres://", "postgresql://")) else Path(store)
    return mempager.open(target, actor=actor, config=PagerConfig.from_env(**overrides))


def _serve(args: argparse.Namespace) -> int:
    """``mempager serve``: open the pager here (the usual defaults), hand it to the MCP server, close it."""
    # imported first: without the MCP SDK this fails with one clear line before the store is touched
    from mempager.mcp.arenas import cap_malloc_arenas
    from mempager.mcp.server import configure_logging, options_from_args, serve

    cap_malloc_arenas()  # before the pager's threads start: glibc keeps freed memory in each thread's arena
    configure_logging()
    with contextlib.redirect_stdout(sys.stderr):  # model-loading chatter must never reach the stdio wire
        pager = _open(args)
    store = _store_of(args)
    server_relay = None if store.startswith(("postgres://", "postgresql://")) else _relay(store, pager)
    with pager:  # closed (index saved) when serving ends, also on SIGTERM (SystemExit from serve)
        try:
            return int(
                serve(
                    pager,
                    goal=getattr(args, "goal", None),
                    http=bool(getattr(args, "http", False)),
                    port=int(getattr(args, "port", 8765)),
                    guard=options_from_args(args, store),
                )
            )
        finally:
            if server_relay is not None:
                server_relay.stop()


def _relay(store: str, pager: Any) -> relay.Relay | None:
    """Other CLI commands on this store run here while the server holds it (``cli.relay``)."""

    def opener(args: argparse.Namespace) -> Any:
        if args.actor == pager.actor and not getattr(args, "embedder", None):
            return contextlib.nullcontext(pager)  # the server's own pager: not closed by the command
        return _open(args)  # another actor: its own pager on the same (shared) store object

    def execute(argv: list[str], stdin: str | None) -> int:
        _Parser.json_errors = "--json" in argv
        args = build_parser().parse_args(argv)
        saved = sys.stdin
        sys.stdin = _text_stream(stdin or "")
        try:
            return _execute(args, opener)
        finally:
            sys.stdin = saved

    server = relay.Relay(store, execute)
    return server if server.start() else None


def _run(args: argparse.Namespace, opener: Callable[[argparse.Namespace], Any]) -> int:
    if args.command == config_cmd.COMMAND:  # before anything opens a store or loads a model
        return config_cmd.run(args)
    as_json = getattr(args, "json", False)
    if args.command == "demo":
        from mempager.evaluation.demo import run_demo

        return run_demo(store=getattr(args, "store", None), as_json=as_json, embedder=getattr(args, "embedder", None))
    if args.command == bench_cmd.COMMAND:
        return bench_cmd.run(args)
    if args.command == "serve":
        return _serve(args)
    for commands in (transfer_cli, wrap_cmd, consolidate_cmd, tier_cmd):  # each module: COMMANDS and run()
        if args.command in commands.COMMANDS:
            return int(commands.run(args, opener))
    if args.command == doctor_cmd.COMMAND:
        return doctor_cmd.run(args, opener, DEFAULT_STORE)
    if args.command == hook_cmd.COMMAND:
        return hook_cmd.run(args, opener)
    if args.command == ui_cmd.COMMAND:
        return ui_cmd.run(args, opener)
    with opener(args) as p:
        cmd = args.command
        if cmd == "init":
            handlers.print_json(p.stats()) if as_json else print(f"store ready: {p.store.location} (actor {p.actor})")
        elif cmd == "remember":
            text = sys.stdin.read() if args.text == "-" else args.text
            uri = p.remember(args.type, text, tags=args.tags, created_at=args.created_at)
            handlers.settle(p, timeout=30)
            handlers.print_json({"uri": uri}) if as_json else print(uri)
        elif cmd == "retrieve":
            snippets = p.retrieve(args.query, k=args.k, tags=args.tags, metadata=dict(args.meta or ()))
            if as_json:
                handlers.print_json(snippets)
            for s in [] if as_json else snippets:
                lanes = " ".join(f"{k}#{h.rank}" for k, h in sorted(s.lanes.items()))
                print(f"{s.score:.4f}  {s.uri}  ({lanes})\n    {' '.join(s.text.split())}")
        elif cmd == "pinned":
            block = p.pinned_block(args.goal)
            handlers.print_json(block) if as_json else print(block.text)
        elif cmd == "page":
            query = args.query if args.query is not None else args.query_option
            if query is None:
                raise InvalidInput("page needs a query: mempager page QUERY [--goal GOAL]")
            page = p.page(query, goal=args.goal, tags=args.tags, metadata=dict(args.meta or ()))
            if as_json:
                handlers.print_json({"page": page.render(), "report": page.report.to_dict()})
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
                metadata=dict(args.meta or ()),
            )
            handlers.print_json(rows) if as_json else print(
                "\n".join(handlers.memory_line(m) for m in rows) or "(none)"
            )
        elif cmd == "forget":
            p.forget(args.uri)
            handlers.print_json({"forgotten": args.uri}) if as_json else print(f"forgotten: {args.uri}")
        elif cmd == "review":
            handlers.review(p, args, as_json)
        elif cmd == "audit":
            return handlers.audit(p, args, as_json)
        elif cmd == "model":
            return handlers.model(p, args, as_json)
        elif cmd == "reembed":
            return handlers.reembed(p, args, as_json)
        elif cmd == "sweep":
            counts = p.sweep()
            handlers.print_json(counts) if as_json else print(", ".join(f"{k} {v}" for k, v in counts.items()))
        elif cmd == "feedback":
            n = p.feedback(args.turn, args.outcome, used=args.used)
            handlers.print_json({"updated": n}) if as_json else print(f"{args.outcome} applied to {n} patterns")
        elif cmd == "get":
            memory = p.get(args.uri)
            handlers.print_json(memory) if as_json else print(handlers.memory_full(memory))
        elif cmd == "history":
            events = p.history(args.uri)
            handlers.print_json(events) if as_json else print(
                "\n".join(f"{e.seq:>6}  {e.at:%Y-%m-%d %H:%M:%S}  {e.op:<10} {e.content_hash[:12]}" for e in events)
            )
        elif cmd == "stats":
            stats = p.stats()
            if as_json:
                handlers.print_json(stats)
            for key, value in [] if as_json else stats.items():
                print(f"{key:>22}: {value}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _Parser.json_errors = "--json" in argv
    parser = build_parser()
    _complete(parser)
    args = parser.parse_args(argv)
    try:
        routed = _route(args, argv)
    except BrokenPipeError:
        return _closed_pipe()
    if routed is not None:
        return routed
    return _execute(args, _open)


# Commands that never open a store (or open their own), so never go to a running server.
UNROUTED = frozenset({"serve", "demo", bench_cmd.COMMAND, config_cmd.COMMAND, doctor_cmd.COMMAND, ui_cmd.COMMAND})


def _store_of(args: argparse.Namespace) -> str:
    return getattr(args, "store", None) or os.environ.get("MEMPAGER_STORE") or DEFAULT_STORE


def _route(args: argparse.Namespace, argv: list[str]) -> int | None:
    """Run the command in the ``mempager serve`` that owns this DuckDB store, if one does (relay)."""
    store = _store_of(args)
    if args.command in UNROUTED or store.startswith(("postgres://", "postgresql://")):
        return None
    stdin = _read_stdin() if "-" in argv or args.command == hook_cmd.COMMAND else None  # hooks read stdin
    actor = getattr(args, "actor", None) or os.environ.get("MEMPAGER_ACTOR") or "default"
    full = [*argv, "--store", str(Path(store).resolve()), "--actor", actor]
    reply = relay.forward(store, full, stdin)
    if reply is None:
        if stdin is not None:  # already read: hand it on to the command that runs here
            sys.stdin = _text_stream(stdin)
        return None
    code, out, err = reply
    sys.stdout.write(out)
    sys.stdout.flush()
    sys.stderr.write(err)
    return code


def _text_stream(text: str) -> io.TextIOWrapper:
    """Standard input that was already read, readable again as text or bytes (``.buffer``)."""
    # surrogateescape: bytes that are not UTF-8 travel on as they came, for the command to refuse by name
    return io.TextIOWrapper(
        io.BytesIO(text.encode("utf-8", "surrogateescape")), encoding="utf-8", errors="surrogateescape"
    )


def _read_stdin() -> str:
    """Standard input as text whatever its bytes (not UTF-8: kept as surrogate escapes, see ``_text_stream``)."""
    raw = getattr(sys.stdin, "buffer", None)
    return raw.read().decode("utf-8", "surrogateescape") if raw is not None else sys.stdin.read()


def _execute(args: argparse.Namespace, opener: Callable[[argparse.Namespace], Any]) -> int:
    as_json = bool(getattr(args, "json", False))
    try:
        return _run(args, opener)
    except PagerError as exc:
        return _fail(exc, as_json)
    except BrokenPipeError:
        return _closed_pipe()
    except KeyboardInterrupt:
        print("mempager: interrupted", file=sys.stderr)
        return 130


def _fail(exc: PagerError, as_json: bool) -> int:
    """One line on stderr: JSON (``{"error": {...}}``) with ``--json``, plain text without; exit 2 either way."""
    if as_json:
        body = {"error": {"type": type(exc).__name__, "message": str(exc), "exit_code": EXIT_USER_ERROR}}
        print(json.dumps(body, ensure_ascii=False), file=sys.stderr)
    else:
        print(f"mempager: error: {exc}", file=sys.stderr)
    return EXIT_USER_ERROR


def _closed_pipe() -> int:
    """The reader went away (``mempager recall x | head -1``): stop quietly, as Unix tools do.

    stdout is pointed at /dev/null first, so the interpreter's own flush at exit cannot raise again.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 141  # 128 + SIGPIPE: what a shell reports for a writer whose pipe closed


def _complete(parser: argparse.ArgumentParser) -> None:
    """Shell completion (argcomplete): a no-op unless the shell's completion hook is asking.

    Enable it once with ``eval "$(register-python-argcomplete mempager)"``.
    """
    if "_ARGCOMPLETE" not in os.environ:
        return  # the common case pays no import
    import argcomplete

    argcomplete.autocomplete(parser)


if __name__ == "__main__":
    sys.exit(main())
