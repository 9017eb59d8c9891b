"""Session wraps on the command line: the same ``prepare_wrap`` / ``save_continuity`` as the library.

mempager wrap prepare [--json]                      the package for your LLM (opens the wrap)
mempager wrap save FILE|- [--affect-tag T --affect-intensity X] [--allow-shrink]
mempager wrap auto [--session S]                     prepare -> the configured LLM -> save (MEMPAGER_LLM_URL)
mempager continuity                                  the current continuity
mempager graph --format dot|json                     the association graph
mempager diff --wraps N [--plot FILE.png]            metrics across the last N wraps
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from mempager.errors import InvalidInput

COMMANDS = frozenset({"wrap", "continuity", "graph", "diff"})
DIFF_COLUMNS = ("episodes", "patterns_1x", "patterns_2x", "patterns_3x", "graduated", "demoted", "held", "links")


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("wrap", parents=[common], help="session wrap: prepare the package, save the continuity")
    steps = p.add_subparsers(dest="wrap_step", required=True, metavar="STEP")
    q = steps.add_parser("prepare", parents=[common], help="open the wrap and print the package for your LLM")
    q.add_argument("--session", default=None, help="this session's id (the single-consolidator gate)")
    q = steps.add_parser("save", parents=[common], help="validate and save the compressed continuity")
    q.add_argument("file", help="the continuity markdown, or - for standard input")
    q.add_argument("--affect-tag", default=None, help="how compressing felt, e.g. curious")
    q.add_argument("--affect-intensity", type=float, default=None, help="0..1")
    q.add_argument("--allow-shrink", action="store_true", help="accept a deliberate diet of protected sections")
    q.add_argument("--session", default=None, help="this session's id (the single-consolidator gate)")
    q = steps.add_parser("auto", parents=[common], help="prepare, compress with the configured LLM, save")
    q.add_argument("--session", default=None, help="this session's id (the single-consolidator gate)")
    sub.add_parser("continuity", parents=[common], help="print the current continuity")
    p = sub.add_parser("graph", parents=[common], help="the association graph (memories cited together)")
    p.add_argument("--format", choices=("dot", "json"), default="dot")
    p = sub.add_parser("diff", parents=[common], help="metric progression across the last wraps")
    p.add_argument("--wraps", type=int, default=5)
    p.add_argument("--plot", default=None, metavar="FILE.png", help="also draw the metrics (needs matplotlib)")


def run(args: argparse.Namespace, open_pager: Callable[[argparse.Namespace], Any]) -> int:
    as_json = bool(getattr(args, "json", False))
    with open_pager(args) as p:
        if args.command == "continuity":
            text = p.continuity()
            _print(
                {"continuity": text},
                text or "(no continuity yet: run `mempager wrap prepare` at a session end)",
                as_json,
            )
        elif args.command == "graph":
            print(_graph(p, args.format))
        elif args.command == "diff":
            return _diff(p, args, as_json)
        elif args.wrap_step == "auto":
            return _auto(p, args, as_json)
        elif args.wrap_step == "prepare":
            wrap = p.prepare_wrap(session_id=args.session)
            empty = "nothing written since the last wrap: no wrap needed"
            _print(wrap.to_dict(), wrap.package if wrap.status == "ready" else empty, as_json)
        else:
            return _save(p, args, as_json)
    return 0


def _save(p: Any, args: argparse.Namespace, as_json: bool) -> int:
    text = sys.stdin.read() if args.file == "-" else _read(args.file)
    affect = None
    if args.affect_tag is not None or args.affect_intensity is not None:
        if args.affect_tag is None or args.affect_intensity is None:
            raise InvalidInput("--affect-tag and --affect-intensity go together: pass both")
        affect = (args.affect_tag, args.affect_intensity)
    result = p.save_continuity(text, affect=affect, allow_shrink=bool(args.allow_shrink), session_id=args.session)
    if result.capture_only:
        line = "capture-only: another session holds consolidation; the continuity was not changed"
    else:
        line = (
            f"saved continuity v{result.version} (wrap {result.wrap}): {len(result.graduated)} graduated, "
            f"{len(result.demoted)} demoted, {len(result.held)} held, {result.linked.created} links created"
        )
        line += "".join(f"\n  demoted {c.name}: {c.from_level}x -> {c.to_level}x ({c.reason})" for c in result.demoted)
        flags = {k: v for k, v in result.flagged.items() if v}
        line += f"\n  flagged: {json.dumps(flags)}" if flags else ""
    _print(result.to_dict(), line, as_json)
    return 0


def _auto(p: Any, args: argparse.Namespace, as_json: bool) -> int:
    auto = p.auto_wrap(session_id=args.session)
    if auto.save is not None:
        saved = auto.save
        line = f"saved continuity v{saved.version} (wrap {saved.wrap}): {len(saved.graduated)} graduated, "
        line += f"{len(saved.demoted)} demoted, {len(saved.held)} held"
    else:
        line = f"skipped: {auto.skipped}"
    _print(auto.to_dict(), line, as_json)
    return 1 if auto.refused else 0


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise InvalidInput(f"cannot read the continuity file {path!r}: {exc.strerror or exc}") from exc


def _graph(p: Any, fmt: str) -> str:
    links = p.store.consolidation.links(p.actor)
    labels = sorted({x for k in links for x in (k.a, k.b)})
    names = {label: m.id for label, m in p.store.get_many(p.actor, labels).items()}
    if fmt == "json":
        nodes = [{"id": names.get(x, str(x)), "label": x} for x in labels]
        edges = [
            {"a": names.get(k.a), "b": names.get(k.b), "strength": round(k.strength, 4), "affect": k.affect_tag}
            for k in links
        ]
        return json.dumps({"nodes": nodes, "edges": edges}, indent=2)
    lines = ["graph associations {"]
    for k in links:
        mood = f', affect="{k.affect_tag}"' if k.affect_tag else ""
        lines.append(f'  "{names.get(k.a, k.a)}" -- "{names.get(k.b, k.b)}" [weight={k.strength:.3f}{mood}];')
    return "\n".join([*lines, "}"])


def _diff(p: Any, args: argparse.Namespace, as_json: bool) -> int:
    if args.wraps < 1:
        raise InvalidInput(f"--wraps must be at least 1, got {args.wraps}")
    wraps = [w for w in reversed(p.consolidation.wraps(args.wraps)) if w.status == "saved"]
    rows = [{"wrap": w.number, **{c: w.metrics.get(c, 0) for c in DIFF_COLUMNS}} for w in wraps]
    if args.plot:
        _plot(rows, args.plot)
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    print("wrap " + " ".join(f"{c:>11}" for c in DIFF_COLUMNS))
    for row in rows:
        print(f"{row['wrap']:>4} " + " ".join(f"{row[c]:>11}" for c in DIFF_COLUMNS))
    return 0


def _plot(rows: list[dict[str, Any]], path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise InvalidInput("--plot needs matplotlib: pip install matplotlib") from exc
    fig, ax = plt.subplots(figsize=(7, 4))
    for column in DIFF_COLUMNS:
        ax.plot([r["wrap"] for r in rows], [r[column] for r in rows], marker="o", label=column)
    ax.set_xlabel("wrap")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _print(body: dict[str, Any], line: str, as_json: bool) -> None:
    print(json.dumps(body, default=str, ensure_ascii=False) if as_json else line)
