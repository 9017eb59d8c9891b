"""Secrets: API keys never appear in logs, exceptions, stats, audit entries or the store's files.

A canary provider key and gateway token sit in the environment the way a user configures them, every
logger is at DEBUG, and the pager is opened through the normal embedder chain (``embedder="auto"``).
Three ways the HTTP embedders can meet trouble, all on 127.0.0.1 (no network):

* a dead port: connection refused, the chain falls back to the hash embedder;
* a gateway that answers 401 and echoes the presented key in its error text (as real APIs do);
* a gateway that works at start-up and then starts answering 401-with-echo while memories are
  being embedded in the background and while queries are embedded.

After remember / retrieve / recall / page / stats / audit / sync / close, the canaries must be in no
log record (message, arguments, traceback, extra fields), no exception text (chained causes
included), no ``stats()`` value, no audit entry and no byte of any file the store owns.
"""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import mempager
from mempager.embedders.hashing import HashEmbedder
from mempager.embedders.testing import EmbeddingServer, Reply

from .conftest import child_env, python, record

KEY = "sk-canary-reliab-7d1f0c9e5a3b"
TOKEN = "gw-canary-reliab-2e8a4c6f1b9d"
CANARIES = (KEY, TOKEN)
ECHO_STATUS = 401


class Capture(logging.Handler):
    """Every record of every logger, formatted with its traceback and with its raw fields."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.texts: list[str] = []
        self.names: set[str] = set()
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.names.add(record.name)
        self.texts.append(self.format(record))
        self.texts.append(repr(record.__dict__))


@pytest.fixture
def logs() -> Iterator[Capture]:
    capture = Capture()
    root = logging.getLogger()
    saved: list[tuple[logging.Logger, int]] = [(root, root.level)]
    root.setLevel(logging.DEBUG)
    root.addHandler(capture)
    detached = []
    for logger in list(logging.Logger.manager.loggerDict.values()):
        if isinstance(logger, logging.Logger):
            saved.append((logger, logger.level))
            logger.setLevel(logging.DEBUG)
            if not logger.propagate:
                logger.addHandler(capture)
                detached.append(logger)
    try:
        yield capture
    finally:
        root.removeHandler(capture)
        for logger in detached:
            logger.removeHandler(capture)
        for logger, level in saved:
            logger.setLevel(level)


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed on exit: nothing listens there


def configure(monkeypatch: pytest.MonkeyPatch, gateway: str, provider: str) -> dict[str, str]:
    env = {
        "MEMPAGER_GATEWAY_URL": gateway,
        "MEMPAGER_GATEWAY_TOKEN": TOKEN,
        "MEMPAGER_PROVIDER_URL": provider,
        "MEMPAGER_PROVIDER_API_KEY": KEY,
        "MEMPAGER_PROVIDER_MODEL": "text-embedding-3-small",
        "MEMPAGER_LOCAL_MODEL": "off",
        "MEMPAGER_EMBED_MAX_ATTEMPTS": "2",
        "MEMPAGER_EMBED_CONNECT_TIMEOUT": "1",
        "MEMPAGER_EMBED_READ_TIMEOUT": "5",
        "MEMPAGER_EMBED_PROBE_TIMEOUT": "5",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


def error_texts(exc: BaseException) -> list[str]:
    """What a user or a log aggregator could see of an exception, chained causes included."""
    return [str(exc), repr(exc), "".join(traceback.format_exception(exc)), repr(getattr(exc, "__dict__", {}))]


def file_hits(root: Path) -> list[str]:
    return [
        f"{f} holds {c}"
        for f in root.rglob("*")
        if f.is_file()
        for c in CANARIES
        if c.encode() in f.read_bytes() or c.encode("utf-16-le") in f.read_bytes()
    ]


def exercise(store: Path, seen: list[str]) -> dict[str, Any]:
    """A session touching every read and write path; collects what a user can see."""
    with mempager.open(store, actor="neo") as p:
        uris = [
            p.remember_fact("the deploy key is in vault at secret/billing"),
            *p.remember_many([{"type": "event", "text": f"deploy {i} went out"} for i in range(5)]),
        ]
        p.reinforce_pattern(mempager.PatternSpec(name="cut a release", steps=["branch", "tag"]))
        seen += [repr(s) for s in p.retrieve("where is the deploy key?", k=5)]
        seen += [repr(m) for m in p.recall("deploy", limit=50)]
        page = p.page(goal="ship the release", query="deploy key")
        seen += [page.render(), repr(page.report)]
        p.sync(timeout=3)
        stats = p.stats()
        seen += [json.dumps(stats, default=str, sort_keys=True), repr(stats)]
        seen += [repr(e) for e in p.audit(limit=10_000)] + [repr(p.verify_audit())]
        for call in (lambda: p.get("mem://neo/fact/0123456789abcdef"), lambda: p.forget(uris[0])):
            try:
                call()
            except mempager.PagerError as exc:
                seen += error_texts(exc)
    return stats


def assert_clean(logs: Capture, seen: list[str], root: Path, what: str) -> None:
    assert logs.texts, "nothing was logged: DEBUG capture is not working and the test proves nothing"
    for canary in CANARIES:
        leaked = [t for t in logs.texts if canary in t]
        assert not leaked, f"{what}: the canary is in a log record: {leaked[0][:500]}"
        shown = [t for t in seen if canary in t]
        assert not shown, f"{what}: the canary is in user-visible output: {shown[0][:500]}"
    assert not file_hits(root), f"{what}: the canary is in a file the store owns: {file_hits(root)}"


def test_dead_port(tmp_path: Path, logs: Capture, monkeypatch: pytest.MonkeyPatch) -> None:
    port = dead_port()
    env = configure(monkeypatch, f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port}/v1")
    seen: list[str] = []
    stats = exercise(tmp_path / "agent.duckdb", seen)
    assert stats["embedder"].startswith("hash"), stats["embedder_candidates"]
    assert [c["status"] for c in stats["embedder_candidates"][:2]] == ["failed", "failed"]
    assert any(n.startswith(("httpx", "httpcore")) for n in logs.names), "HTTP clients logged nothing at DEBUG"
    for forced in ("gateway", "provider"):  # a forced dead embedder opens as "down": its reasons must be clean too
        with mempager.open(tmp_path / "agent.duckdb", actor="neo", config=mempager.PagerConfig(embedder=forced)) as p:
            forced_stats = p.stats()
            (chosen,) = [c for c in forced_stats["embedder_candidates"] if c["kind"] == forced]
            assert chosen["status"] == "down", forced_stats["embedder_candidates"]
            seen += [json.dumps(forced_stats, default=str), *(s.text for s in p.retrieve("deploy key"))]
    cli = subprocess.run(
        [python(), "-m", "mempager", "stats", "--json", "--store", str(tmp_path / "agent.duckdb"), "--actor", "neo"],
        capture_output=True,
        text=True,
        env=child_env(**env),
        timeout=120,
    )
    assert cli.returncode == 0 and '"embedder_candidates"' in cli.stdout, cli.stderr
    seen += [cli.stdout, cli.stderr]
    assert_clean(logs, seen, tmp_path, "dead port")
    record("secrets", scenario="dead port", log_records=len(logs.texts) // 2, loggers=sorted(logs.names))


def test_gateway_echoes_the_key_at_start_up(tmp_path: Path, logs: Capture, monkeypatch: pytest.MonkeyPatch) -> None:
    # The server wants another token, so every request is a 401 whose text repeats the one we sent.
    with EmbeddingServer(HashEmbedder(384), token="the-right-token") as gateway:
        configure(monkeypatch, gateway.url, gateway.url + "/v1")
        seen: list[str] = []
        stats = exercise(tmp_path / "agent.duckdb", seen)
        assert gateway.requests, "the chain never asked the gateway: the test proves nothing"
        assert any(TOKEN in r.headers.get("authorization", "") for r in gateway.requests)
    assert stats["embedder"].startswith("hash"), stats["embedder_candidates"]
    assert_clean(logs, seen, tmp_path, "401 echo at start-up")
    record("secrets", scenario="401 echo at start-up", log_records=len(logs.texts) // 2, requests=len(gateway.requests))


def test_gateway_fails_with_an_echo_while_embedding(
    tmp_path: Path, logs: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    echo = json.dumps({"error": {"message": f"Incorrect API key provided: {TOKEN}"}}).encode()
    with EmbeddingServer(HashEmbedder(384), token=TOKEN) as gateway:
        configure(monkeypatch, gateway.url, gateway.url + "/v1")
        p = mempager.open(tmp_path / "agent.duckdb", actor="neo")
        seen: list[str] = []
        try:
            assert not p.stats()["embedder"].startswith("hash"), "the gateway should have passed its probe"
            gateway.script(*[Reply(status=ECHO_STATUS, body=echo)] * 50)  # from now on every call fails
            p.remember_fact("the deploy key is in vault at secret/billing")
            p.remember_many([{"type": "event", "text": f"deploy {i} went out"} for i in range(5)])
            assert not p.sync(timeout=2), "embedding should be failing"
            seen += [repr(s) for s in p.retrieve("where is the deploy key?", k=5)]  # the query embed fails too
            stats = p.stats()
            seen += [json.dumps(stats, default=str, sort_keys=True)]
            assert stats["failing_embeddings"] or stats["last_embed_error"], stats
            seen += [repr(e) for e in p.audit(limit=10_000)]
        finally:
            p.close()
    assert_clean(logs, seen, tmp_path, "401 echo while embedding")
    record(
        "secrets",
        scenario="401 echo while embedding",
        log_records=len(logs.texts) // 2,
        requests=len(gateway.requests),
        last_embed_error=stats["last_embed_error"],
    )
