"""The adapters are optional: ``import mempager`` loads none of them, and a missing framework names its extra."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

FRAMEWORKS = ("langgraph", "agents", "llama_index", "mempager.adapters")


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_import_mempager_loads_no_adapter_and_no_framework() -> None:
    loaded = f"sorted(m for m in sys.modules if m.startswith({FRAMEWORKS!r}))"
    done = run(f"import json, sys, mempager, mempager.cli.main; print(json.dumps({loaded}))")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


@pytest.mark.parametrize(
    ("module", "blocked", "extra"),
    [
        ("mempager.adapters.langgraph", "langgraph", "langgraph"),
        ("mempager.adapters.openai_agents", "agents", "openai-agents"),
        ("mempager.adapters.llama_index", "llama_index", "llama-index"),
    ],
)
def test_a_missing_framework_names_its_extra(module: str, blocked: str, extra: str) -> None:
    code = f"""
import sys
sys.modules[{blocked!r}] = None  # as if the framework were not installed
from mempager.adapters import AdapterUnavailable
try:
    import {module}
except AdapterUnavailable as exc:
    assert isinstance(exc, ModuleNotFoundError), type(exc).__mro__
    print(exc)
"""
    done = run(code)
    assert done.returncode == 0, done.stderr
    assert f"pip install 'mempager[{extra}]'" in done.stdout
