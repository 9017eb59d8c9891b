"""The serve process caps glibc's malloc arenas (issue 24: the soak's RSS growth was freed memory
kept in per-thread arenas). A real child process: cap, then 8 threads allocate at once, and glibc's
own report (malloc_info) counts the arenas."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent(
    """
    import ctypes, re, sys, tempfile, threading
    from mempager.mcp.arenas import cap_malloc_arenas
    if sys.argv[1] == "cap":
        assert cap_malloc_arenas(2)
    start = threading.Barrier(8)
    def work():
        start.wait()
        for _ in range(200):
            blocks = [bytearray(4096) for _ in range(64)]
            del blocks
    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads: t.start()
    for t in threads: t.join()
    libc = ctypes.CDLL("libc.so.6")
    libc.fdopen.restype = ctypes.c_void_p
    libc.fdopen.argtypes = [ctypes.c_int, ctypes.c_char_p]
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    with tempfile.TemporaryFile("w+") as f:
        fp = libc.fdopen(__import__("os").dup(f.fileno()), b"w")
        libc.malloc_info(0, fp)
        libc.fclose(fp)
        f.seek(0)
        print(len(re.findall(r'<heap nr="\\d+">', f.read())))
    """
)


def _arenas(mode: str) -> int:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=60, check=True, env=env
    )
    return int(out.stdout.strip())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's arenas: Linux only")
def test_the_cap_bounds_the_arenas_of_a_many_threaded_process() -> None:
    assert _arenas("cap") <= 2
    assert _arenas("none") > 2  # without the cap glibc makes one per contending thread: the test can fail


def test_a_user_setting_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    from mempager.mcp.arenas import cap_malloc_arenas

    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert cap_malloc_arenas(2) is False  # glibc already read the user's choice; it is left alone
    monkeypatch.delenv("MALLOC_ARENA_MAX")
    assert cap_malloc_arenas(0) is False
