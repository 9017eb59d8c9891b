"""``mempager serve --http`` lets no one in without the token, a loopback Host/Origin and sane sizes.

Every test runs the real server as a subprocess on a free 127.0.0.1 port (hash embedder, a store
in tmp_path) and talks to it with httpx and with the MCP SDK's own client.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from mempager.mcp import http_guard

from .conftest import child_env, serve_argv

WRONG = "wrong-token-" + "x" * 32
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, store: Path, *extra: str, env: dict[str, str] | None = None) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.proc = subprocess.Popen(
            [sys.executable, *serve_argv(store, "--http", "--port", str(self.port), *extra)],
            cwd=store.parent,
            env=child_env(**(env or {})),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.out = self.err = ""

    def wait(self) -> Server:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.proc.communicate()[1]
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"server did not listen on 127.0.0.1:{self.port}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self.out, self.err = self.proc.communicate(timeout=30)


@pytest.fixture
def serve() -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for server in started:
        if server.proc.returncode is None:
            server.stop()


def _start(started: list[Server], store: Path, *extra: str, env: dict[str, str] | None = None) -> Server:
    server = Server(store, *extra, env=env)
    started.append(server)
    return server.wait()


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", **ACCEPT}


async def _mcp_session(url: str, token: str) -> set[str]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        names = {t.name for t in (await session.list_tools()).tools}
        result = await session.call_tool("memory_remember", {"text": "over an authenticated http"})
        assert not result.is_error, result
        stats = await session.call_tool("memory_stats", {})
        assert stats.structured_content is not None and stats.structured_content["memories"] == 1
        return names


def test_first_start_makes_a_private_token_that_only_it_prints(tmp_path: Path, serve: list[Server]) -> None:
    """No token, a wrong one, a foreign Origin or Host, a body over the cap: each refused with its status;
    the real MCP client with the token works; the token file is 0600 and the token is printed once."""
    store = tmp_path / "s.duckdb"
    server = _start(serve, store, "--max-body-bytes", "4096")
    path = http_guard.token_path(store)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    token = path.read_text().strip()
    assert len(token) >= 40  # 32 random bytes, urlsafe base64

    with httpx.Client(timeout=10) as http:
        missing = http.post(server.url, json=INIT, headers=ACCEPT)
        assert missing.status_code == 401 and missing.headers["www-authenticate"].startswith("Bearer")
        assert http.post(server.url, json=INIT, headers=_auth(WRONG)).status_code == 401
        assert http.post(server.url, json=INIT, headers={"Authorization": token, **ACCEPT}).status_code == 401
        foreign = {**_auth(token), "Origin": "http://evil.example"}
        assert http.post(server.url, json=INIT, headers=foreign).status_code == 403
        # DNS rebinding: a page on evil.example resolved to 127.0.0.1 sends its own name as Host
        assert http.post(server.url, json=INIT, headers={**_auth(token), "Host": "evil.example"}).status_code == 403
        assert http.post(server.url, json=INIT, headers={**_auth(token), "Host": "127.0.0.1:1"}).status_code == 403
        # without the token a rebinding page gets 403 too: it learns nothing about the token
        assert http.post(server.url, json=INIT, headers={"Host": "evil.example", **ACCEPT}).status_code == 403
        big = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "pad": "' + b"x" * 5000 + b'"}'
        typed = {**_auth(token), "Content-Type": "application/json"}
        assert http.post(server.url, content=big, headers=typed).status_code == 413
        # no Content-Length (chunked): the streamed body is counted as it arrives
        assert http.post(server.url, content=iter([big[:3000], big[3000:]]), headers=typed).status_code == 413
        local = http.post(server.url, json=INIT, headers={**_auth(token), "Origin": f"http://localhost:{server.port}"})
        assert local.status_code == 200, local.text  # a loopback Origin with the token is served

    names = asyncio.run(asyncio.wait_for(_mcp_session(server.url, token), 60))
    assert {"memory_page", "memory_remember", "memory_stats"} <= names
    server.stop()
    assert server.proc.returncode == 128 + signal.SIGTERM, server.err
    assert server.out == ""
    assert server.err.count(token) == 1, server.err  # printed once, in the "generated" line
    line = next(line for line in server.err.splitlines() if token in line)
    assert "generated" in line and f"Authorization: Bearer {token}" in line and str(path) in line
    assert WRONG not in server.err  # a rejected credential is not logged either
    assert "refused POST /mcp" in server.err  # rejections are logged, without their headers

    # the second start reads the file, says where it is, and never prints the token
    again = _start(serve, store, "--rate-limit", "5")
    with httpx.Client(timeout=10) as http:
        codes = [http.post(again.url, json=INIT, headers=_auth(token)).status_code for _ in range(20)]
        assert 200 in codes and codes.count(429) >= 10, codes  # a bucket of 5, refilled at 5/s
        limited = http.post(again.url, json=INIT, headers=_auth(token))
        assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
        time.sleep(1.2)  # refilled
        assert http.post(again.url, json=INIT, headers=_auth(token)).status_code == 200
    again.stop()
    assert token not in again.err and token not in again.out, again.err
    assert f"HTTP bearer token in {path}" in again.err
    assert path.read_text().strip() == token  # kept, not regenerated


def test_a_token_file_others_can_read_is_refused(tmp_path: Path, serve: list[Server]) -> None:
    store = tmp_path / "s.duckdb"
    path = http_guard.token_path(store)
    secret = "a" * 43
    path.write_text(secret + "\n")
    path.chmod(0o644)
    port = _free_port()
    done = subprocess.run(
        [sys.executable, *serve_argv(store, "--http", "--port", str(port))],
        cwd=tmp_path,
        env=child_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert f"chmod 600 {path}" in done.stderr and "Traceback" not in done.stderr
    assert secret not in done.stderr and done.stdout == ""


def test_a_token_from_the_environment_is_used_and_never_printed(tmp_path: Path, serve: list[Server]) -> None:
    store = tmp_path / "s.duckdb"
    token = "env-token-" + "k" * 30
    server = _start(serve, store, env={http_guard.TOKEN_ENV: token})
    with httpx.Client(timeout=10) as http:
        assert http.post(server.url, json=INIT, headers=_auth(token)).status_code == 200
        assert http.post(server.url, json=INIT, headers=ACCEPT).status_code == 401
    server.stop()
    assert token not in server.err and f"${http_guard.TOKEN_ENV}" in server.err
    assert not http_guard.token_path(store).exists()  # the environment's token: no file made


def test_token_and_allow_lists_rules() -> None:
    assert http_guard.allowed_hosts(8765) == ("127.0.0.1:8765", "localhost:8765", "[::1]:8765")
    assert "mem.lan:8765" in http_guard.allowed_hosts(8765, ["mem.lan"])
    assert "mem.lan:9000" in http_guard.allowed_hosts(8765, ["mem.lan:9000"])
    origins = http_guard.allowed_origins(["https://app.example/"])
    assert http_guard._matches("http://localhost:6274", origins)
    assert http_guard._matches("https://app.example", origins)
    assert not http_guard._matches("http://localhost.evil.example:80", origins)
    assert not http_guard._matches("null", origins)
    with pytest.raises(http_guard.ConfigError, match="at least 16") as short:
        http_guard.check_token("short-secret", "$MEMPAGER_HTTP_TOKEN")
    assert "short-secret" not in str(short.value)
    with pytest.raises(http_guard.ConfigError, match="MEMPAGER_HTTP_TOKEN"):
        http_guard.resolve_token(http_guard.GuardOptions(token_file=None), environ={})
