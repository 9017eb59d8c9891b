"""``mempager ui`` and ``mempager serve --http``'s /ui as real processes: what they bind, print and let in."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import mempager
from mempager import PagerConfig

from .conftest import child_env

STARTUP = 60.0  # seconds: a cold interpreter imports numpy, duckdb, starlette...
SERVE_TOKEN = "serve-token-" + "s" * 32


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_listening(proc: subprocess.Popen[str], port: int) -> None:
    deadline = time.monotonic() + STARTUP
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listened on 127.0.0.1:{port}")


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=30)


def _spawn(started: list[subprocess.Popen[str]], store: Path, *argv: str, **env: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mempager", *argv, "--store", str(store), "--actor", "neo", "--embedder", "hash"],
        cwd=store.parent,
        env={**child_env(), **env},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C as at a terminal: a runner that ignores SIGINT (a test worker can) passes that on,
        # and a CLI started with SIGINT ignored rightly keeps ignoring it (it then exited 0)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    started.append(proc)
    return proc


def test_ui_binds_loopback_only_and_prints_a_link_that_signs_in(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    proc = _spawn(processes, tmp_path / "s.duckdb", "ui", "--port", "0")
    assert proc.stdout is not None
    lines = [proc.stdout.readline() for _ in range(2)]
    found = re.search(r"open (http://([\d.]+):(\d+))/login\?token=([\w-]+)", "".join(lines))
    assert found is not None, lines
    base, host, port, token = found.group(1), found.group(2), int(found.group(3)), found.group(4)
    assert host == "127.0.0.1"
    _wait_listening(proc, port)
    # bound to 127.0.0.1 itself, not to every address: another loopback address is refused
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.2", port), timeout=2).close()
    with httpx.Client(base_url=base, follow_redirects=False) as client:
        assert client.get("/memories").status_code == 303  # no session yet
        signed = client.get(f"/login?token={token}")
        assert signed.status_code == 303
        page = client.get("/memories")
        assert page.status_code == 200 and 'id="actor">neo<' in page.text
    with httpx.Client(base_url=base) as stranger:
        assert stranger.get("/login?token=" + "x" * len(token)).status_code == 401
    proc.send_signal(signal.SIGINT)  # Ctrl-C: uvicorn shuts down, then the CLI exits as on any interrupt
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "interrupted" in err, (proc.returncode, err)  # the status tells a signal death
    assert token not in err  # printed once on stdout, never logged
    with mempager.open(tmp_path / "s.duckdb", actor="neo", config=PagerConfig(embedder="hash")) as p:
        assert p.stats()["memories"] == 0  # the store was let go of: it opens here


@pytest.mark.slow  # about 5 s: a cold `serve --http` imports the MCP SDK
def test_serve_http_mounts_the_inspector_behind_its_guard(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    port = _free_port()
    proc = _spawn(
        processes, tmp_path / "s.duckdb", "serve", "--http", "--port", str(port), MEMPAGER_HTTP_TOKEN=SERVE_TOKEN
    )
    _wait_listening(proc, port)
    base = f"http://127.0.0.1:{port}"
    with httpx.Client(base_url=base, follow_redirects=False) as client:
        assert client.get("/mcp").status_code == 401  # the MCP endpoint still needs the bearer header
        first = client.get("/ui/memories")
        assert first.status_code == 303 and first.headers["location"] == "/ui/login"
        assert client.get("/ui/login?token=" + "w" * 44).status_code == 401
        assert client.get("/ui/memories", headers={"Host": f"evil.example:{port}"}).status_code == 403  # the guard
        signed = client.get(f"/ui/login?token={SERVE_TOKEN}")
        assert signed.status_code == 303 and signed.headers["location"] == "/ui/memories"
        assert "path=/ui/" in signed.headers["set-cookie"].lower()
        page = client.get("/ui/memories")
        assert page.status_code == 200 and 'href="/ui/static/app.css"' in page.text
        assert client.post("/ui/review/abc", data={"decision": "accept"}).status_code == 403  # no CSRF token
        assert client.get("/mcp").status_code == 401  # the UI's cookie is no bearer token
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert f"web inspector at http://127.0.0.1:{port}/ui/login" in err
    assert SERVE_TOKEN not in err


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX only")
def test_ui_refuses_a_port_it_cannot_bind(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "mempager",
                "ui",
                "--store",
                str(tmp_path / "s.duckdb"),
                "--embedder",
                "hash",
                "--port",
                str(port),
            ],
            cwd=tmp_path,
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=STARTUP,
        )
    assert done.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr and "pick another --port" in done.stderr
