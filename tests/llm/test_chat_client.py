"""The LLM seam (issue 21 item 1): the OpenAI-compatible chat client against a real server on
127.0.0.1 with scripted replies, httpx.MockTransport for transport faults, and the callable form.

Seed rule proved throughout (seed 000, compaction): "silently skipped on LLM failure — it never
corrupts existing memory" starts here: every failure is one typed ``LLMError`` the steps turn
into a skip, and the key never appears in an error or a repr.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from pydantic import BaseModel

from mempager.errors import ConfigError, LLMError, LLMHttpError, LLMReplyInvalid, LLMTimeout
from mempager.llm import CallableLLM, ChatClient, LLMSettings, as_llm, ask
from mempager.llm.testing import ChatServer, Reply

KEY = "sk-test-key-never-shown-0123456789"
ASK = [{"role": "user", "content": "how many?"}]


class Count(BaseModel):
    count: int
    note: str = ""


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as s:
        yield s


def client(server: ChatServer, **kw: object) -> ChatClient:
    sleeps: list[float] = []
    args: dict[str, object] = {
        "api_key": KEY,
        "timeout": 5.0,
        "max_attempts": 3,
        "backoff": 0.01,
        "sleep": sleeps.append,
    }
    args.update(kw)
    c = ChatClient(server.url, "scripted-model", **args)  # type: ignore[arg-type]
    c.sleeps = sleeps  # type: ignore[attr-defined]
    return c


def test_valid_reply_is_validated_and_the_request_asks_for_structured_output(server: ChatServer) -> None:
    """Item 1: messages in, a validated object out; JSON-schema structured output; the key as a bearer token."""
    server.script(Reply(content='{"count": 3, "note": "ok"}'))
    got = ask(client(server), ASK, Count)
    assert got == Count(count=3, note="ok")
    [req] = server.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert req.body["model"] == "scripted-model"
    fmt = req.body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"]["required"] == ["count"]


def test_fenced_json_is_accepted() -> None:
    assert ask(CallableLLM(lambda m: '```json\n{"count": 1}\n```'), ASK, Count).count == 1


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (Reply(content="sure! three"), "not JSON"),
        (Reply(content='{"count": "many"}'), "does not follow"),
        (Reply(content='["count", 3]'), "not an object"),
        (Reply(content=""), "empty"),
        (Reply(content=None), "empty"),
    ],
)
def test_invalid_replies_are_one_typed_error(server: ChatServer, reply: Reply, why: str) -> None:
    """Item 1: malformed JSON, the wrong schema or an empty reply is ``LLMReplyInvalid``, never retried."""
    server.script(reply)
    with pytest.raises(LLMReplyInvalid, match=why):
        ask(client(server), ASK, Count)
    assert len(server.requests) == 1


def test_http_500_is_retried_a_bounded_number_of_times_with_backoff(server: ChatServer) -> None:
    server.script(Reply(status=500), Reply(status=503), Reply(status=500))
    c = client(server)
    with pytest.raises(LLMHttpError, match="after 3 tries"):
        ask(c, ASK, Count)
    assert len(server.requests) == 3
    assert c.sleeps == [0.01, 0.02]  # type: ignore[attr-defined]


def test_a_500_then_a_good_reply_succeeds(server: ChatServer) -> None:
    server.script(Reply(status=500), Reply(content='{"count": 2}'))
    assert ask(client(server), ASK, Count).count == 2


def test_4xx_is_not_retried_and_the_echoed_key_is_redacted(server: ChatServer) -> None:
    """The key from the environment is never put in an error message (servers echo it in 401s)."""
    server.script(Reply(status=401, body=json.dumps({"error": f"bad key {KEY}"}).encode()))
    with pytest.raises(LLMHttpError) as caught:
        ask(client(server), ASK, Count)
    assert KEY not in str(caught.value) and "***" in str(caught.value)
    assert len(server.requests) == 1
    assert KEY not in repr(client(server))


def test_a_slow_server_times_out_without_retrying(server: ChatServer) -> None:
    server.script(Reply(content='{"count": 1}', delay=2.0))
    with pytest.raises(LLMTimeout):
        ask(client(server, timeout=0.3), ASK, Count)
    assert len(server.requests) == 1


def test_transport_faults_via_mock_transport() -> None:
    """httpx.MockTransport: a refused connection is retried; a reply without choices is invalid."""
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) == 1:
            raise httpx.ConnectError("refused", request=request)
        if len(calls) == 2:
            return httpx.Response(200, json={"choices": []})
        return httpx.Response(200, json={"choices": [{"message": {"content": '{"count": 5}'}}]})

    c = ChatClient(
        "http://llm.invalid", "m", transport=httpx.MockTransport(handler), backoff=0.01, sleep=lambda s: None
    )
    with pytest.raises(LLMReplyInvalid, match="no chat completion"):
        ask(c, ASK, Count)  # try 1 refused (retried), try 2 has no choices: invalid, not retried
    assert ask(c, ASK, Count).count == 5


def test_callable_llm_and_its_failures() -> None:
    assert ask(as_llm(lambda messages: {"count": 4}), ASK, Count).count == 4

    def broken(messages: list[dict[str, str]]) -> str:
        raise RuntimeError("quota")

    with pytest.raises(LLMError, match="RuntimeError: quota") as caught:
        as_llm(broken).complete(ASK)
    assert isinstance(caught.value.__cause__, RuntimeError)
    with pytest.raises(ConfigError):
        as_llm(42)


def test_settings_from_the_environment() -> None:
    assert LLMSettings.from_env({}).url is None
    s = LLMSettings.from_env({"MEMPAGER_LLM_URL": "http://x", "MEMPAGER_LLM_MODEL": "m", "MEMPAGER_LLM_API_KEY": KEY})
    assert KEY not in repr(s)
    with pytest.raises(ConfigError, match="MEMPAGER_LLM_MODEL"):
        LLMSettings.from_env({"MEMPAGER_LLM_URL": "http://x"})
