"""A compiled module of ours under AddressSanitizer and UBSan, for the kernels' sanitizer tests: one
way to build it into tmp_path and run a child process that loads it in place of the installed one.

A memory error aborts the child with the sanitizer's report (exit 86 for ASan, 87 for UBSan),
which the caller's assertion shows.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest


def _runtime(name: str) -> str | None:
    """The path gcc links its sanitizer runtime from, or None when it has none."""
    if shutil.which("gcc") is None:
        return None
    done = subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True, text=True, check=False)
    path = done.stdout.strip()
    return path if done.returncode == 0 and os.path.isabs(path) and Path(path).is_file() else None


def run_sanitized(source: Path, module: str, child: str, args: list[str], tmp_path: Path) -> str:
    """Build ``source`` as ``module`` (its last dotted part names the file) with the sanitizers, run
    ``child`` (Python code; ``sys.argv[1]`` is the built file, then ``args``) with their runtimes
    preloaded, and return its stdout; skips when gcc has no sanitizer runtimes."""
    asan, ubsan = _runtime("libasan.so"), _runtime("libubsan.so")
    if asan is None or ubsan is None:
        pytest.skip(
            "gcc with its AddressSanitizer and UBSan runtimes (Debian gcc) is needed to build the sanitized kernel"
        )
    built = tmp_path / (module.rsplit(".", 1)[-1] + str(sysconfig.get_config_var("EXT_SUFFIX")))
    compiled = subprocess.run(
        [
            "gcc",
            "-O1",
            "-g",
            "-fno-omit-frame-pointer",
            "-fsanitize=address,undefined",
            "-fno-sanitize-recover=undefined",
            "-ffp-contract=off",
            "-fPIC",
            "-shared",
            f"-I{sysconfig.get_paths()['include']}",
            str(source),
            "-o",
            str(built),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert compiled.returncode == 0, compiled.stderr
    env = {
        **os.environ,
        "LD_PRELOAD": f"{asan}:{ubsan}",
        "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0:exitcode=86",  # CPython's own allocations are not ours
        "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1:exitcode=87",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONMALLOC": "malloc",  # the kernel's PyMem blocks through malloc, where the sanitizer sees them
    }
    done = subprocess.run(
        [sys.executable, "-c", child, str(built), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    return done.stdout
