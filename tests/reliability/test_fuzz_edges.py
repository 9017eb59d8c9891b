"""Hostile input at the edges where outside data enters: a JSONL import, a hook's JSON on stdin, HTTP bodies.

Each edge gets ``EXAMPLES`` generated inputs. An input is accepted, or refused the edge's typed way (a
``PagerError``; the hook's exit 1 with one line; an HTTP 4xx, a JSON-RPC error or a tool error), never a
traceback or a 500; and a refused input changes nothing stored: the store's content is compared before
and after every refused example. The import and the hook run in-process through the code the CLI runs
(``Pager.import_memories`` on a binary stream as ``mempager import -`` does; ``hook_cmd.run`` with stdin
made as ``cli.main`` makes it); the HTTP bodies go to a real ``mempager serve --http`` process, started
once for the module, with its bearer token, through httpx.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import io
import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import mempager
from mempager import PagerError
from mempager.cli import hook_cmd
from mempager.cli.main import _text_stream
from mempager.mcp.server import TOOL_NAMES

from .conftest import HASH, child_env, record, scratch_dir

EXAMPLES = 1_000  # per edge: the minimum
EDGE = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
COUNTS: dict[str, dict[str, int]] = {}

SQL = ("'; DROP TABLE memories; --", '" OR 1=1 --', "%", "\\", "NULL", "$1")
chars = (
    st.characters() | st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF) | st.sampled_from(("\x00", "\u202e"))
)
hostile = st.text(chars, max_size=40) | st.sampled_from(SQL) | st.sampled_from(("", " ", "\n", "\x00"))
leaf = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | hostile
    | st.sampled_from(("2024-01-01", "2024-13-45T99:00", "7d", "fact", "mem://neo/fact/x"))
)
json_value = st.recursive(leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(hostile, inner, max_size=3))


def _count(edge: str, outcome: str) -> None:
    bucket = COUNTS.setdefault(edge, {})
    bucket[outcome] = bucket.get(outcome, 0) + 1


# Every row of every actor's memories and vectors, and the audit trail's length, in one query (the
# store's own connection: a fingerprint per example must cost a millisecond, not a recall per actor).
CONTENT = (
    "SELECT (SELECT count(*) FROM memories), (SELECT bit_xor(hash(m)) FROM memories m), "
    "(SELECT count(*) FROM vectors), (SELECT bit_xor(hash(v)) FROM vectors v), (SELECT max(seq) FROM audit)"
)


class Fingerprints:
    """The store's content, computed again only after an example that was accepted (and so may change it)."""

    def __init__(self, p: mempager.Pager) -> None:
        self.p = p
        self.known: tuple[Any, ...] | None = None

    def now(self) -> tuple[Any, ...]:
        self.known = tuple(self.p.store.db.fetch(CONTENT)[0])
        return self.known

    def before(self) -> tuple[Any, ...]:
        return self.known if self.known is not None else self.now()

    def accepted(self) -> None:
        self.known = None


@pytest.fixture(scope="module")
def prints(pager: mempager.Pager) -> Fingerprints:
    return Fingerprints(pager)


@pytest.fixture(scope="module")
def pager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[mempager.Pager]:
    with scratch_dir(tmp_path_factory.mktemp("fuzz-edges")) as directory:
        # no embedding workers: nothing may change the store between two fingerprints but the edge itself
        p = mempager.open(directory / "edges.duckdb", actor="neo", config=replace(HASH, embed_workers=0))
        try:
            for i in range(5):
                p.remember_fact(f"baseline fact {i}: the deploy key is in vault")
            yield p
            assert p.verify_audit().ok
        finally:
            p.close()
            record("fuzz edges", examples={k: sum(v.values()) for k, v in COUNTS.items()}, outcomes=COUNTS)


# -- JSONL import ----------------------------------------------------------------------------------
vector = st.fixed_dictionaries(
    {"model": st.sampled_from(["hash-v2-384", "other-3", ""]) | hostile},
    optional={
        "dim": st.sampled_from([3, 384, 0, -1, True, "3"]) | st.integers(),
        "data": st.binary(max_size=40).map(lambda b: base64.b64encode(b).decode()) | hostile,
        "values": st.lists(st.floats() | st.integers() | hostile, max_size=5) | json_value,
    },
)
memory_line = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["fact", "event", "profile", "pattern", "rule", "nope"]) | hostile,
        "text": hostile | st.sampled_from(["a plain imported fact", "another fact to import"]),
    },
    optional={
        "actor": st.sampled_from(["neo", "trinity", "a" * 200]) | hostile,
        "source": st.sampled_from(["user", "llm", "nope"]) | json_value,
        "scope": st.sampled_from(["global", "project", "x"]) | json_value,
        "confidence": json_value,
        "importance": st.floats() | json_value,
        "strength": json_value,
        "created_at": st.sampled_from(["2023-05-08T13:56:00", "8 May 2023", "yesterday"]) | json_value,
        "updated_at": json_value,
        "last_accessed_at": json_value,
        "valid_until": json_value,
        "tags": st.lists(hostile, max_size=3) | json_value,
        "metadata": st.dictionaries(hostile, json_value, max_size=3) | json_value,
        "access_count": json_value,
        "content_hash": json_value,
        "superseded_by": json_value,
        "id": json_value,
        "uri": json_value,
        "vectors": st.lists(vector, max_size=2) | json_value,
        "surprise": json_value,
    },
)
header = st.fixed_dictionaries(
    {"format": st.sampled_from(["mempager.export.v1", "mempager.export.v0"]) | hostile},
    optional={"count": json_value, "actor": json_value, "models": json_value},
)


def _line(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, allow_nan=True)


lines = st.lists(memory_line.map(_line) | header.map(_line) | json_value.map(_line) | hostile, min_size=1, max_size=4)
import_files = lines.map(lambda ls: "\n".join(ls).encode("utf-8", "surrogatepass")) | st.binary(max_size=200)


@pytest.mark.slow  # 1,000 examples: ~5 s of CPU on a quiet machine
@EDGE
@example(data=b'{"type": "fact", "text": "x", "created_at": 1e308}', keep=False)
@example(data=b'{"type": "fact", "text": "x", "vectors": [{"model": "m", "dim": 1, "values": [1e40]}]}', keep=False)
@example(data=b'{"format": "mempager.export.v1", "count": 2}\n{"type": "fact", "text": "y"}', keep=True)
@example(data=b"\xff\xfe not utf-8", keep=False)
@given(data=import_files, keep=st.booleans())
def test_jsonl_import(pager: mempager.Pager, prints: Fingerprints, data: bytes, keep: bool) -> None:
    before = prints.before()
    try:
        report = pager.import_memories(io.BytesIO(data), keep_actor=keep)
    except PagerError as exc:
        _count("import", type(exc).__name__)
        assert prints.now() == before, f"a refused import ({exc}) changed the store"
        return
    prints.accepted()
    _count("import", "accepted")
    assert report.added + report.skipped == report.read


# -- the hook's JSON on stdin ------------------------------------------------------------------------
EVENT_NAMES = ["SessionStart", "UserPromptSubmit", "Stop", "PreToolUse", ""]
event = st.fixed_dictionaries(
    {},
    optional={
        "hook_event_name": st.sampled_from(EVENT_NAMES) | json_value,
        "prompt": hostile | st.sampled_from(["where is the deploy key?"]) | json_value,
        "session_id": hostile | json_value,
        "source": st.sampled_from(["startup", "resume"]) | json_value,
        "stop_hook_active": st.booleans() | json_value,
        "last_assistant_message": hostile | json_value,
        "transcript_path": json_value,
        "cwd": json_value,
    },
)
hook_inputs = (
    event.map(_line).map(lambda s: s.encode("utf-8", "surrogatepass"))
    | json_value.map(_line).map(lambda s: s.encode("utf-8", "surrogatepass"))
    | st.binary(max_size=100)
)


@pytest.mark.slow  # 1,000 examples: ~5 s of CPU on a quiet machine
@EDGE
@example(raw=b"\xff\xfe{}", name="user-prompt-submit")
@example(raw=b'{"prompt": "\\ud800"}', name="user-prompt-submit")
@example(raw=b'{"hook_event_name": "Stop", "stop_hook_active": "yes"}', name="stop")
@example(raw=b"[1, 2]", name="session-start")
# found by this test: the outcome was stored before prepare_wrap refused the blank session id
@example(raw=b'{"last_assistant_message": "0", "session_id": " "}', name="stop")
@given(raw=hook_inputs, name=st.sampled_from(sorted(hook_cmd.EVENTS)))
def test_hook_json_on_stdin(pager: mempager.Pager, prints: Fingerprints, raw: bytes, name: str) -> None:
    args = argparse.Namespace(event=name, goal=None, outcome="unknown", actor="neo", json=False)
    before = prints.before()
    out, err, saved = io.StringIO(), io.StringIO(), sys.stdin
    # as the CLI hands a hook its stdin (cli.main: read once, then a text stream of the same bytes)
    sys.stdin = _text_stream(raw.decode("utf-8", "surrogateescape"))
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = hook_cmd.run(args, lambda _args: contextlib.nullcontext(pager))
    finally:
        sys.stdin = saved
    if code == 0:
        prints.accepted()
        _count("hook", "accepted")
        assert isinstance(json.loads(out.getvalue()), dict)
        return
    _count("hook", "refused")
    assert code == hook_cmd.EXIT_HOOK_ERROR and not out.getvalue()
    assert err.getvalue().startswith(f"mempager hook {name}: error: ") and err.getvalue().count("\n") == 1
    assert prints.now() == before, f"a refused hook input changed the store: {err.getvalue()}"


# -- HTTP bodies to serve --http ------------------------------------------------------------------------
TOKEN = "fuzz-token-" + "t" * 32
ACCEPT = "application/json, text/event-stream"


class Served:
    def __init__(self, store: Path) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        argv = [sys.executable, "-m", "mempager", "serve", "--http", "--port", str(self.port), "--store", str(store)]
        argv += ["--actor", "neo", "--embedder", "hash", "--rate-limit", "0", "--max-body-bytes", "65536"]
        self.proc = subprocess.Popen(
            argv,
            env=child_env(MEMPAGER_HTTP_TOKEN=TOKEN),
            cwd=store.parent,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.client = httpx.Client(timeout=30, headers={"Authorization": f"Bearer {TOKEN}", "Accept": ACCEPT})
        self.session = ""
        self.next_id = 1000
        self.known: str | None = None  # the content last read, while nothing accepted may have changed it

    def wait(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.proc.communicate()[1]
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError("the server did not listen")

    def rpc(self, method: str, params: dict[str, Any] | None = None) -> tuple[httpx.Response, list[dict[str, Any]]]:
        self.next_id += 1
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}}
        return self.post(json.dumps(body).encode(), self.session)

    def post(self, body: bytes, session: str | None) -> tuple[httpx.Response, list[dict[str, Any]]]:
        headers = {"Content-Type": "application/json"}
        if session:
            headers["Mcp-Session-Id"] = session
        reply = self.client.post(self.url, content=body, headers=headers)
        return reply, _messages(reply)

    def open_session(self) -> None:
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "0"}}
        reply, _ = self.post(
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}).encode(), None
        )
        assert reply.status_code == 200, reply.text
        self.session = reply.headers["mcp-session-id"]
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert self.post(json.dumps(note).encode(), self.session)[0].status_code == 202

    def content(self) -> str:
        """What is stored, as far as the server can be asked: every memory of its actor (uri, type, text, tags)."""
        reply, messages = self.rpc("tools/call", {"name": "memory_recall", "arguments": {"limit": 500}})
        assert reply.status_code == 200, reply.text
        result = messages[0]["result"]
        assert not result.get("isError"), result
        rows = result["structuredContent"]["memories"]
        self.known = json.dumps(sorted((m["uri"], m["type"], m["text"], m["tags"]) for m in rows))
        return self.known

    def stop(self) -> str:
        self.client.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.communicate(timeout=60)[1]


def _messages(reply: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a reply: a JSON body, or the data lines of an event stream."""
    kind = reply.headers.get("content-type", "")
    if "text/event-stream" in kind:
        # an event stream's lines end only at CR or LF (str.splitlines also splits at U+0085 and
        # U+2028, which JSON may carry unescaped inside a string: found with a tool named "\x85")
        lines = reply.text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        raw = [line[5:].strip() for line in lines if line.startswith("data:")]
    elif "json" in kind and reply.content:
        raw = [reply.text]
    else:
        return []
    out: list[dict[str, Any]] = []
    for item in raw:
        if not item:
            continue
        parsed = json.loads(item)
        out += parsed if isinstance(parsed, list) else [parsed]
    return [m for m in out if isinstance(m, dict)]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    directory = tmp_path_factory.mktemp("fuzz-http")
    server = Served(directory / "served.duckdb")
    server.wait()
    server.open_session()
    assert server.rpc("tools/call", {"name": "memory_remember", "arguments": {"text": "baseline over http"}})[0]
    log = ""
    try:
        yield server
    finally:
        log = server.stop()
    assert "Traceback" not in log, log[-3000:]


METHODS = [
    "tools/call",
    "tools/list",
    "resources/read",
    "resources/list",
    "prompts/get",
    "ping",
    "initialize",
    "notifications/initialized",
    "completion/complete",
    "logging/setLevel",
    "nope",
]
tool_names = st.sampled_from(TOOL_NAMES) | st.sampled_from(TOOL_NAMES) | hostile
ARGUMENT_NAMES = [
    "text",
    "type",
    "tags",
    "query",
    "goal",
    "turn",
    "report",
    "uri",
    "limit",
    "offset",
    "since",
    "until",
    "types",
    "outcome",
    "summary",
    "name",
    "trigger",
    "steps",
    "used",
    "verdict",
    "changes",
]
tool_call = st.fixed_dictionaries(
    {
        "name": tool_names,
        "arguments": st.dictionaries(st.sampled_from(ARGUMENT_NAMES) | hostile, json_value, max_size=4),
    }
)
rpc = st.fixed_dictionaries(
    {"jsonrpc": st.sampled_from(["2.0"]) | json_value, "method": st.sampled_from(METHODS) | hostile},
    optional={
        "id": st.integers(min_value=-(2**70), max_value=2**70) | hostile | json_value,
        "params": tool_call | st.dictionaries(hostile, json_value, max_size=3) | json_value,
    },
)
# most bodies are well-formed tool calls with hostile arguments: they reach the tools' own validation
calls = st.builds(
    lambda i, params: {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params},
    st.integers(min_value=1, max_value=2**31),
    tool_call,
)
bodies = (
    calls.map(_line)
    | calls.map(_line)
    | calls.map(_line)
    | rpc.map(_line)
    | st.lists(rpc, min_size=1, max_size=3).map(_line)
    | json_value.map(_line)
    | st.text(chars, max_size=200)
).map(lambda s: s.encode("utf-8", "surrogatepass")) | st.binary(max_size=300)


def _refused(reply: httpx.Response, messages: list[dict[str, Any]]) -> bool:
    if reply.status_code >= 400:
        return True
    results = [m.get("result") for m in messages if isinstance(m.get("result"), dict)]
    return any("error" in m for m in messages) or any(r.get("isError") for r in results)


@pytest.mark.slow  # 1,000 examples: ~5 s of CPU on a quiet machine
@EDGE
@example(body=b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "memory_forget"}}', own=True)
@example(
    body=b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", '
    b'"params": {"name": "memory_remember", "arguments": {"text": "\\u0000"}}}',
    own=True,
)
@example(body=b"\xff\xfe\x00", own=True)
@example(body=b"[]", own=False)
@example(body='{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "\x85"}}'.encode(), own=True)
@given(body=bodies, own=st.sampled_from([True, True, True, False]))
def test_http_bodies(served: Served, body: bytes, own: bool) -> None:
    """``own``: sent in the module's initialised session (else without one, or with a forged id)."""
    before = served.known if served.known is not None else served.content()
    session = served.session if own else (None if len(body) % 2 else "forged-session-id")
    reply, messages = served.post(body, session)
    assert reply.status_code < 500, (reply.status_code, reply.text[:500])
    assert "Traceback" not in reply.text
    if _refused(reply, messages):
        _count("http", f"{reply.status_code}" if reply.status_code >= 400 else "JSON-RPC or tool error")
        assert served.content() == before, f"a refused body changed the store: {reply.text[:300]}"
    else:
        served.known = None  # an accepted body may change the store
        _count("http", "accepted")


@pytest.mark.slow
def test_counts_ran() -> None:
    """Runs last in the module: each edge that ran ran all its examples (hypothesis stops early only on a
    failure), and was both accepted and refused (the generators reach past the first check)."""
    print(json.dumps(COUNTS, indent=1))
    for edge, outcomes in COUNTS.items():
        assert sum(outcomes.values()) >= EXAMPLES, (edge, outcomes)
        assert outcomes.get("accepted") and len(outcomes) > 1, (edge, outcomes)
