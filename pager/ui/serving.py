"""Running the inspector: uvicorn on a socket bound to 127.0.0.1, in the foreground or a thread.

The socket is bound here, before uvicorn starts, so port 0 (any free port) works and the URL to
print is known up front. uvicorn's access log stays off: the login link carries the token.
"""

from __future__ import annotations

import socket
import threading
import time

import uvicorn
from starlette.types import ASGIApp

from mempager.errors import ConfigError

HOST = "127.0.0.1"  # never a public interface: the store holds the agent's whole memory

# How the browser tests and the screenshot script run Debian's chromium headless (Playwright's own
# browser download cannot run here): no sandbox (containers), and no background traffic, which on
# a machine without network floods the log with refused connections.
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def bind(port: int, host: str = HOST) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port} ({exc.strerror or exc}); pick another --port") from exc
    return sock


class UiServer:
    """One uvicorn server for ``app`` on ``127.0.0.1:port`` (0: a free port, see ``port``)."""

    def __init__(self, app: ASGIApp, port: int = 0) -> None:
        self.sock = bind(port)
        self.port = int(self.sock.getsockname()[1])
        config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off")
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def run(self) -> None:
        """Serve until SIGINT/SIGTERM (uvicorn's own handlers, in the main thread)."""
        try:
            self.server.run(sockets=[self.sock])
        finally:
            self.sock.close()

    def start(self, timeout: float = 30.0) -> UiServer:
        """Serve from a daemon thread; returns once it accepts connections."""
        self._thread = threading.Thread(target=self.run, name="mempager-ui", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise ConfigError(f"the inspector did not start on {self.url}; see the log above")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
