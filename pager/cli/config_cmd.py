"""``mempager config``: every setting with its variable, current value, default and source.

It reads the environment only: no store is opened and no model loaded. The settings come from
``mempager.settings_table`` (the README's table is generated from the same place).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from mempager.settings_docs import GROUPS, Resolved
from mempager.settings_table import redact_url, resolve, shown

COMMAND = "config"
# options of the common parser that win over a variable, as the other commands apply them
_FLAGS = {"store": "MEMPAGER_STORE", "actor": "MEMPAGER_ACTOR", "embedder": "MEMPAGER_EMBEDDER"}
_HEADER = ("VARIABLE", "VALUE", "DEFAULT", "SOURCE")


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``config`` to ``sub`` (the main parser's subparsers), sharing ``common``."""
    sub.add_parser(
        COMMAND,
        parents=[common],
        help="every setting: variable, current value, default, source (opens no store)",
        description="Print every setting with its environment variable, current value, default and where "
        "the value came from. Exits 1 when a variable holds a value mempager would reject.",
    )


def rows(args: argparse.Namespace) -> list[Resolved]:
    """The resolved settings, with ``--store``/``--actor``/``--embedder`` given here shown as such."""
    flags = {env: getattr(args, name) for name, env in _FLAGS.items() if getattr(args, name, None)}
    out = []
    for r in resolve():
        if r.setting.env in flags:
            r = Resolved(r.setting, redact_url(flags[r.setting.env]), "command line")
        out.append(r)
    return out


def run(args: argparse.Namespace) -> int:
    resolved = rows(args)
    if getattr(args, "json", False):
        print(json.dumps([_object(r) for r in resolved], indent=2, ensure_ascii=False))
    elif not (sys.stdout.isatty() and rich_table(resolved, sys.stdout)):
        print(plain_table(resolved))
    invalid = [r.setting.env for r in resolved if r.source.startswith("invalid")]
    if invalid:
        names = ", ".join(dict.fromkeys(invalid))
        print(f"mempager: {len(set(invalid))} invalid setting(s): {names}", file=sys.stderr)
        return 1
    return 0


def _object(r: Resolved) -> dict[str, Any]:
    s = r.setting
    return {
        "env": s.env,
        "name": s.name,
        "group": s.group,
        "value": r.value,
        "default": s.default,
        "source": r.source,
        "secret": s.secret,
        "read_by": s.read_by,
        "description": s.description,
    }


def plain_table(resolved: list[Resolved]) -> str:
    """Aligned columns, a title line per group: one setting per line, so ``grep`` finds it."""
    cells = [(r.setting.env, shown(r.value), shown(r.setting.default), r.source) for r in resolved]
    widths = [max(len(row[i]) for row in [_HEADER, *cells]) for i in range(3)]

    def line(row: tuple[str, str, str, str]) -> str:
        return "  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[3]])

    lines = [line(_HEADER)]
    for group in GROUPS:
        members = [c for r, c in zip(resolved, cells, strict=True) if r.setting.group == group]
        if members:
            lines += ["", f"# {group}"]
        lines += [line(row) for row in members]
    return "\n".join(lines)


def rich_table(resolved: list[Resolved], stream: TextIO, width: int | None = None) -> bool:
    """The table drawn by rich (on a terminal); False when rich is not installed."""
    try:
        from rich import box
        from rich.console import Console
        from rich.table import Column, Table
        from rich.text import Text
    except ImportError:
        return False
    # the variable is never cut (it is what one searches for); a long value folds onto more lines
    columns = [Column(_HEADER[0], no_wrap=True), *(Column(h, overflow="fold") for h in _HEADER[1:])]
    table = Table(*columns, box=box.SIMPLE_HEAD, header_style="bold")
    for group in GROUPS:
        members = [r for r in resolved if r.setting.group == group]
        if not members:
            continue
        table.add_row(Text(group, style="bold"))
        for r in members:
            style = "red" if r.source.startswith("invalid") else ("green" if r.source != "default" else None)
            cells = (r.setting.env, shown(r.value), shown(r.setting.default), r.source)
            table.add_row(*(Text(c) for c in cells), style=style)  # Text: a value is never read as markup
        table.add_section()
    Console(file=stream, highlight=False, width=width).print(table)
    return True
