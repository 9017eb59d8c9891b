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
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mempager.embedders.loopback import Handler, LoopbackServer

JSON = "application/json"
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


class ChatServer(LoopbackServer):
    name = "chat server"

    def __init__(self, responder: Responder | None = None, *, model: str = "scripted") -> None:
        self.responder = responder
        self.model = model
        self.requests: list[Recorded] = []
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        super().__init__()

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self._script.extend(replies)

    def handle(self, handler: Handler) -> None:
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
            handler.send(404, _error(f"no route {handler.path}"), JSON)
        elif reply is not None and reply.status is not None:
            handler.send(
                reply.status, reply.body if reply.body is not None else _error(f"scripted {reply.status}"), JSON
            )
        elif reply is not None:
            handler.send(200, self._completion(reply.content), JSON)
        elif self.responder is not None and isinstance(body, Mapping):
            handler.send(200, self._completion(self.responder(body)), JSON)
        else:
            handler.send(500, _error("no scripted reply left"), JSON)

    def _completion(self, content: str | None) -> bytes:
        message = {"role": "assistant", "content": content}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return json.dumps(
            {"id": "chatcmpl-test", "object": "chat.completion", "model": self.model, "choices": [choice]}
        ).encode()


def _error(message: str) -> bytes:
    return json.dumps({"error": {"message": message}}).encode()
