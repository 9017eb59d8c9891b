"""``mempager ui``: the local web inspector (pager/ui) on 127.0.0.1.

mempager ui [--store S] [--actor A] [--port P] [--admin]

It prints one address carrying this run's token; opening it signs the browser in. The token
changes every run. Without ``--admin`` the browser sees ``--actor``'s memories only.
"""

from __future__ import annotations

import argparse
import secrets
from collections.abc import Callable
from typing import Any

COMMAND = "ui"
DEFAULT_PORT = 8766  # serve --http takes 8765


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        COMMAND, parents=[common], help="the local web inspector: memories, page simulator, procedures, audit"
    )
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port on 127.0.0.1 (default {DEFAULT_PORT}; 0: any)")
    p.add_argument("--admin", action="store_true", help="let the browser switch between every actor of the store")


def run(args: argparse.Namespace, open_pager: Callable[[argparse.Namespace], Any]) -> int:
    # imported here: the rest of the command line never pays for Starlette and Jinja2
    from mempager.ui import Pagers, UiSettings, create_app
    from mempager.ui.serving import UiServer

    token = secrets.token_urlsafe(32)  # per run: a stale link from an earlier run signs nobody in

    def opener(actor: str) -> Any:
        return open_pager(argparse.Namespace(**{**vars(args), "actor": actor}))

    with open_pager(args) as pager:
        pagers = Pagers(pager, opener if args.admin else None)
        try:
            server = UiServer(create_app(pagers, UiSettings(token=token, admin=bool(args.admin))), args.port)
            scope = "every actor (--admin)" if args.admin else f"actor {pager.actor!r}"
            print(
                f"mempager ui: {pager.store.location}, {scope}\n"
                f"  open {server.url}/login?token={token}\n"
                "  (the link carries this run's token: do not share it; Ctrl-C stops the server)",
                flush=True,
            )
            server.run()
        finally:
            pagers.close()
    return 0
