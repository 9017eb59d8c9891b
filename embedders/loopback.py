"""A scripted HTTP server on 127.0.0.1 for tests and benchmarks: its lifecycle and its handler.

The embedding server (``embedders.testing``) and the chat-completions server (``llm.testing``)
differ only in how they answer a POST; ``LoopbackServer`` is the rest (start on a free port,
stop, url, context manager) and ``Handler`` the request side. It lives here, the lowest layer
that serves HTTP, so both may import it. Only ``http.server``: no dependency, no network.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # typing.Self is 3.11+; the package supports 3.10
    from typing_extensions import Self

log = logging.getLogger("mempager.testing")


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True  # a handler still sleeping for a timeout test must not block shutdown
    app: LoopbackServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # The client hanging up (it timed out, as a test asked it to) is expected, not a crash.
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            log.debug("client %s hung up before the answer was sent", client_address)
            return
        super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like a real API server
    # Headers and body go out in two writes; with Nagle on, the client's delayed ACK stalls the
    # second one ~40 ms, which would be charged to the client in every benchmark.
    disable_nagle_algorithm = True
    server: _HTTPServer

    def do_POST(self) -> None:  # noqa: N802 - the name http.server dispatches to
        self.server.app.handle(self)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("%s " + format, self.address_string(), *args)

    def send(self, status: int, body: bytes, content_type: str, headers: Mapping[str, str] = {}) -> None:  # noqa: B006
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


class LoopbackServer:
    """Subclasses answer a POST in ``handle``; ``name`` names the serving thread and the errors."""

    name = "loopback-server"

    def __init__(self) -> None:
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def handle(self, handler: Handler) -> None:
        raise NotImplementedError

    def start(self) -> Self:
        self._httpd = _HTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.app = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name=self.name, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError(f"the {self.name} is not running; call start()")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"
