"""A real OpenAI-compatible ``/v1/embeddings`` server on 127.0.0.1, for tests and benchmarks.

It serves any ``Embedder`` (the real local model in our tests) over real HTTP, so the HTTP
embedder is exercised end to end: sockets, headers, JSON, timeouts. Answers list ``data`` in a
shuffled order by default, as a server is allowed to. ``script()`` queues misbehaviour for the
next requests (a status, a canned body, a delay, or an edit of the valid JSON), ``break_with()``
answers every request that way until ``heal()`` (an outage of unknown length), and ``requests``
records what arrived so a test can count retries and check headers.

    with EmbeddingServer(LocalEmbedder(), token="t") as server:
        server.script(Reply(status=429, headers={"Retry-After": "1"}))
        HttpEmbedder.provider(server.url, model="all-MiniLM-L6-v2", api_key="t").embed(["hi"])

Only ``http.server`` from the standard library: no extra dependency, no network beyond loopback.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mempager.embedders.loopback import Handler, LoopbackServer
from mempager.embedders.wire import response_body
from mempager.protocols import Embedder


@dataclass(frozen=True, kw_only=True)
class Reply:
    """One scripted answer. ``status`` set: send ``body`` instead of embeddings (a JSON error by
    default). Otherwise embed normally, then apply ``mutate`` to the JSON payload. ``delay`` first.
    """

    status: int | None = None
    body: bytes | None = None
    content_type: str = "application/json"
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    mutate: Callable[[dict[str, Any]], Any] | None = None


@dataclass(frozen=True)
class Recorded:
    """One request as it arrived: path, headers (lower-case names) and decoded JSON body."""

    path: str
    headers: Mapping[str, str]
    body: Any


class EmbeddingServer(LoopbackServer):
    """Serves ``embedder`` as model ``model`` (any name if None); requires ``Bearer token`` if set."""

    name = "embedding server"

    def __init__(
        self,
        embedder: Embedder,
        *,
        token: str | None = None,
        model: str | None = None,
        shuffle: bool = True,
        seed: int = 0,
    ) -> None:
        self.embedder = embedder
        self.token = token
        self.model = model
        self.shuffle = shuffle
        self.requests: list[Recorded] = []
        self._random = random.Random(seed)
        self._script: deque[Reply] = deque()
        self._fault: Reply | None = None
        self._lock = threading.Lock()
        super().__init__()

    # -- scripting ------------------------------------------------------------------------
    def script(self, *replies: Reply) -> None:
        """Queue ``replies`` for the next requests, in order; after them, answers are normal."""
        with self._lock:
            self._script.extend(replies)

    def break_with(self, reply: Reply) -> None:
        """An outage: answer every request with ``reply`` (once the script is used up) until ``heal()``."""
        with self._lock:
            self._fault = reply

    def heal(self) -> None:
        """End an outage and drop the scripted replies not yet used: from now on answers are normal."""
        with self._lock:
            self._fault = None
            self._script.clear()

    def count(self) -> int:
        with self._lock:
            return len(self.requests)

    # -- serving --------------------------------------------------------------------------
    def handle(self, handler: Handler) -> None:
        length = int(handler.headers.get("Content-Length", "0"))
        raw = handler.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        with self._lock:
            self.requests.append(Recorded(handler.path, {k.lower(): v for k, v in handler.headers.items()}, body))
            reply = self._script.popleft() if self._script else self._fault
        if reply is not None and reply.delay:
            time.sleep(reply.delay)
        if reply is not None and reply.status is not None:
            canned = reply.body if reply.body is not None else _error(f"scripted HTTP {reply.status}")
            handler.send(reply.status, canned, reply.content_type, reply.headers)
            return
        status, payload = self._answer(handler, body)
        if status == 200 and reply is not None and reply.mutate is not None:
            payload = reply.mutate(payload)
        headers = reply.headers if reply is not None else {}
        handler.send(status, json.dumps(payload).encode("utf-8"), "application/json", headers)

    def _answer(self, handler: Handler, body: Any) -> tuple[int, Any]:
        if not handler.path.endswith("/v1/embeddings"):
            return 404, {"error": {"message": f"no route {handler.path}"}}
        given = handler.headers.get("Authorization", "")
        if self.token is not None and given != f"Bearer {self.token}":
            # Echo the key back, as real APIs do in their 401 text: the client must redact it.
            return 401, {"error": {"message": f"Incorrect API key provided: {given.removeprefix('Bearer ')}"}}
        if not isinstance(body, dict) or not isinstance(body.get("model"), str):
            return 400, {"error": {"message": "body must be JSON with 'model' and 'input'"}}
        if self.model is not None and body["model"] != self.model:
            return 404, {"error": {"message": f"the model {body['model']!r} does not exist"}}
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            return 400, {"error": {"message": "'input' must be a string or a non-empty list of strings"}}
        vectors = self.embedder.embed(texts, role="document")
        order = list(range(len(texts)))
        if self.shuffle:
            with self._lock:
                self._random.shuffle(order)
        return 200, response_body(vectors, body["model"], order)


def _error(message: str) -> bytes:
    return json.dumps({"error": {"message": message}}).encode("utf-8")
