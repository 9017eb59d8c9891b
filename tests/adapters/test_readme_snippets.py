"""Each framework snippet of the README ("In a framework") runs as pasted, in a fresh process.

The snippets are taken from README.md by their ``<!-- snippet: NAME -->`` markers and run
unchanged in an empty directory with the hash embedder. The OpenAI Agents one would call OpenAI:
a prelude (run before it, not edited into it) makes the SDK's default model provider return a
scripted model, so no network is reached. The Claude Code settings are parsed and each hook
command in them is run with a recorded hook input.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
SNIPPET = re.compile(r"<!-- snippet: (?P<name>[\w-]+) -->\n```(?P<lang>\w+)\n(?P<code>.*?)\n```", re.S)
OFFLINE_MODEL = """
import re
from agents.items import ModelResponse
from agents.models.interface import Model, ModelProvider
from agents.models.multi_provider import MultiProvider
from agents.usage import Usage
from openai.types.responses import ResponseOutputMessage, ResponseOutputText


class _Scripted(Model):
    async def get_response(self, system_instructions, input, *args, **kwargs):
        found = re.findall(r"secret/[\\w/-]*\\w", system_instructions or "")
        text = f"It is in vault at {found[0]}." if found else "I don't know."
        part = ResponseOutputText(text=text, type="output_text", annotations=[], logprobs=[])
        message = ResponseOutputMessage(id="m", type="message", role="assistant", status="completed", content=[part])
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError


MultiProvider.get_model = lambda self, name: _Scripted()
"""


def snippets() -> dict[str, tuple[str, str]]:
    return {m["name"]: (m["lang"], m["code"]) for m in SNIPPET.finditer(README.read_text(encoding="utf-8"))}


def run_python(code: str, cwd: Path) -> str:
    env = {**os.environ, "MEMPAGER_EMBEDDER": "hash", "HF_HUB_OFFLINE": "1", "OPENAI_API_KEY": "sk-test-offline"}
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_every_framework_has_a_snippet_of_about_five_lines() -> None:
    found = snippets()
    assert set(found) == {"langgraph", "openai-agents", "llama-index", "claude-code"}
    for name, (_lang, code) in found.items():
        assert len(code.splitlines()) <= 6, name


def test_langgraph_snippet(tmp_path: Path) -> None:
    pytest.importorskip("langgraph")
    assert run_python(snippets()["langgraph"][1], tmp_path).strip() == "{'text': 'Ana takes her tea without sugar'}"


def test_openai_agents_snippet(tmp_path: Path) -> None:
    pytest.importorskip("agents")
    out = run_python(OFFLINE_MODEL + "\n" + snippets()["openai-agents"][1], tmp_path)
    assert out.strip() == "It is in vault at secret/billing/deploy."


def test_llama_index_snippet(tmp_path: Path) -> None:
    pytest.importorskip("llama_index.core")
    out = run_python(snippets()["llama-index"][1], tmp_path)
    assert "secret/billing/deploy" in out and '<memories note="data recalled' in out


def test_claude_code_settings_snippet(tmp_path: Path) -> None:
    settings = json.loads(snippets()["claude-code"][1])
    inputs = {
        "SessionStart": {"hook_event_name": "SessionStart", "session_id": "s1", "source": "startup"},
        "UserPromptSubmit": {"hook_event_name": "UserPromptSubmit", "session_id": "s1", "prompt": "where is it?"},
        "Stop": {"hook_event_name": "Stop", "session_id": "s1", "stop_hook_active": False},
    }
    assert set(settings["hooks"]) == set(inputs)
    env = {**os.environ, "MEMPAGER_EMBEDDER": "hash", "HF_HUB_OFFLINE": "1"}
    for event, groups in settings["hooks"].items():
        [group] = groups
        [entry] = group["hooks"]
        assert entry["type"] == "command"
        argv = shlex.split(entry["command"])
        argv[0] = str(Path(sys.executable).parent / argv[0])  # the venv's console script
        done = subprocess.run(
            argv, input=json.dumps(inputs[event]), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr
        answer = json.loads(done.stdout)
        assert isinstance(answer, dict)
        if event == "UserPromptSubmit":
            assert answer == {} or answer["hookSpecificOutput"]["hookEventName"] == event
    assert (tmp_path / ".mempager" / "store.duckdb").exists()  # the default store, in the project
