"""While ``mempager serve`` owns a DuckDB store, other ``mempager`` commands run inside it.

DuckDB lets one process hold a store file. So the server keeps one writer and listens on a Unix
socket beside the store (``<store>.sock``, mode 0600: only this user); a CLI command on that
store finds the socket, sends its arguments (and its standard input), and the server runs the
command against the store it already has open, then returns the exit code and the output. Nothing
is written twice and nothing waits on a file lock. A socket left by a server that died refuses
connections; the command then opens the store itself, as usual.

One JSON line each way: ``{"argv": [...], "stdin": str | null}`` and
``{"code": int, "stdout": str, "stderr": str}``. Commands run one at a time in the server.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import socket
import socketserver
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

log = logging.getLogger("mempager.cli")

Execute = Callable[[list[str], str | None], int]  # argv, stdin -> exit code (output on sys.stdout/err)
MAX_REQUEST = 64 * 1024 * 1024


def socket_path(store: str | Path) -> Path:
    return Path(str(Path(store).resolve()) + ".sock")


def forward(store: str | Path, argv: Sequence[str], stdin: str | None) -> tuple[int, str, str] | None:
    """Run ``argv`` in the server that owns ``store``; None when no server is listening."""
    path = socket_path(store)
    if not path.exists():
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
    except OSError:  # a socket file a dead server left behind: open the store here instead
        conn.close()
        return None
    with conn, conn.makefile("rwb") as stream:
        stream.write(json.dumps({"argv": list(argv), "stdin": stdin}).encode() + b"\n")
        stream.flush()
        reply = json.loads(stream.readline() or b"{}")
    if "code" not in reply:
        return None
    return int(reply["code"]), str(reply.get("stdout", "")), str(reply.get("stderr", ""))


class Relay:
    """The server side: a thread answering ``forward`` for one store."""

    def __init__(self, store: str | Path, execute: Execute) -> None:
        self.path = socket_path(store)
        self._execute = execute
        self._lock = threading.Lock()  # one command at a time: sys.stdout is swapped while it runs
        self._server: socketserver.UnixStreamServer | None = None

    def start(self) -> bool:
        """Listen; False (logged) when the socket cannot be made (a path too long for AF_UNIX...)."""
        relay = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                line = self.rfile.readline(MAX_REQUEST)
                try:
                    request = json.loads(line)
                    argv = [str(a) for a in request["argv"]]
                    stdin = request.get("stdin")
                except (ValueError, KeyError, TypeError):
                    return
                self.wfile.write(json.dumps(relay.run(argv, stdin)).encode() + b"\n")

        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # left by a server that died: nobody answers on it
        old = os.umask(0o177)
        try:
            self._server = socketserver.UnixStreamServer(str(self.path), Handler)
        except OSError as exc:
            log.warning("CLI commands cannot reach this server (no socket at %s: %s)", self.path, exc)
            return False
        finally:
            os.umask(old)
        threading.Thread(target=self._server.serve_forever, name="mempager-relay", daemon=True).start()
        return True

    def run(self, argv: list[str], stdin: str | None) -> dict[str, object]:
        out, err = io.StringIO(), io.StringIO()
        with self._lock, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = self._execute(argv, stdin)
            except SystemExit as exc:  # argparse: --help, usage errors
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
        return {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
