"""A real OpenAI-compatible ``/v1/chat/completions`` server on 127.0.0.1, for tests and benchmarks.

Replies are scripted: ``script(Reply(content=...))`` queues the next answers in order (a text, an
HTTP status with a body, or a delay first); when the script is used up, ``responder(body)``
answers (a function of the request's JSON, e.g. a deterministic "LLM" in a benchmark), else HTTP
500. ``requests`` records what arrived (path, lower-case headers, JSON body).

    with ChatServer() as server:
        server.script(Reply(content='{"merges": []}'), Reply(status=500))
        ChatClient(server.url, "scripted").complete([{"role": "user", "content": "hi"}])

Only ``http.server`` from the standard library: no extra dependency, no network beyond loopback.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

log = logging.getLogger("mempager.llm.testing")
Responder = Callable[[Mapping[str, Any]], str]


@dataclass(frozen=True, kw_only=True)
class Reply:
    """One scripted answer: ``status`` set sends ``body`` (a JSON error by default); otherwise a chat
    completion whose message content is ``content``. ``delay`` seconds pass first."""

    content: str | None = None
    status: int | None = None
    body: bytes | None = None
    delay: float = 0.0


@dataclass(frozen=True)
class Recorded:
    path: str
    headers: Mapping[str, str]
    body: Any


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True  # a handler still sleeping for a timeout test must not block shutdown
    app: ChatServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # the client hanging up (it timed out, as the test asked) is expected, not a crash
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            log.debug("client %s hung up before the answer was sent", client_address)
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _HTTPServer

    def do_POST(self) -> None:  # noqa: N802 - the name http.server dispatches to
        self.server.app.handle(self)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("%s " + format, self.address_string(), *args)

    def send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class ChatServer:
    def __init__(self, responder: Responder | None = None, *, model: str = "scripted") -> None:
        self.responder = responder
        self.model = model
        self.requests: list[Recorded] = []
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> ChatServer:
        self._httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.app = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="chat-server", daemon=True
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

    def __enter__(self) -> ChatServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the chat server is not running; call start()")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self._script.extend(replies)

    def handle(self, handler: _Handler) -> None:
        raw = handler.rfile.read(int(handler.headers.get("Content-Length", "0")))
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        with self._lock:
            self.requests.append(Recorded(handler.path, {k.lower(): v for k, v in handler.headers.items()}, body))
            reply = self._script.popleft() if self._script else None
        if reply is not None and reply.delay:
            time.sleep(reply.delay)
        if not handler.path.endswith("/v1/chat/completions"):
            handler.send(404, _error(f"no route {handler.path}"))
        elif reply is not None and reply.status is not None:
            handler.send(reply.status, reply.body if reply.body is not None else _error(f"scripted {reply.status}"))
        elif reply is not None:
            handler.send(200, self._completion(reply.content))
        elif self.responder is not None and isinstance(body, Mapping):
            handler.send(200, self._completion(self.responder(body)))
        else:
            handler.send(500, _error("no scripted reply left"))

    def _completion(self, content: str | None) -> bytes:
        message = {"role": "assistant", "content": content}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return json.dumps(
            {"id": "chatcmpl-test", "object": "chat.completion", "model": self.model, "choices": [choice]}
        ).encode()


def _error(message: str) -> bytes:
    return json.dumps({"error": {"message": message}}).encode()
