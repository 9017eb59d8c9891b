"""``mempager`` as a real subprocess, for the command-line tests: one way to run it.

The environment is the test's own without any ``MEMPAGER_*`` variable (a developer's settings must
not leak in), then a store in ``tmp_path`` and the hash embedder, then ``env``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

STORE = "cli.duckdb"  # the store file in tmp_path that MEMPAGER_STORE names for the CLI


def run_cli(
    tmp_path: Path,
    *args: str,
    ok: bool = True,
    stdin: str | None = None,
    store: str = STORE,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python -m mempager ARGS`` in ``tmp_path``; with ``ok`` its exit status must be 0."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MEMPAGER_")}
    environ |= {
        "MEMPAGER_STORE": str(tmp_path / store),
        "MEMPAGER_EMBEDDER": "hash",
        "HF_HUB_OFFLINE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        **(env or {}),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "mempager", *args],
        capture_output=True,
        text=True,
        env=environ,
        cwd=tmp_path,
        timeout=120,
        input=stdin,
    )
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def open_cli_store(tmp_path: Path, store: str = STORE) -> Any:
    """The pager ``run_cli``'s children open (their store, the default actor, the hash embedder), in
    this process: to seed it in one call, or to read what a command wrote."""
    import mempager  # lazily, as the command-line tests keep their own imports light

    return mempager.open(tmp_path / store, actor="default", config=mempager.PagerConfig(embedder="hash"))
