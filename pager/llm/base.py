"""The LLM seam: messages in, text out; ``ask`` turns the text into a validated pydantic object.

An ``LLM`` is anything with ``name`` and ``complete(messages, schema=..., schema_name=...)``: the
OpenAI-compatible ``ChatClient`` (llm/http.py) or any plain Python callable wrapped by
``CallableLLM`` (``fn(messages) -> str | dict``). Every failure is an ``LLMError``; the
consolidation steps turn it into a skipped step with the reason and change nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ValidationError

from mempager.errors import ConfigError, LLMError, LLMReplyInvalid

Message = Mapping[str, str]  # {"role": "system" | "user" | "assistant", "content": "..."}
M = TypeVar("M", bound=BaseModel)
_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n(.*)\n\s*```\s*$", re.DOTALL)
SHOWN = 160  # characters of a bad reply quoted in an error (replies are not secret; keep logs short)


@runtime_checkable
class LLM(Protocol):
    @property
    def name(self) -> str:
        """What answered (logged with every skipped step)."""
        ...

    def complete(
        self, messages: Sequence[Message], *, schema: Mapping[str, Any] | None = None, schema_name: str = "reply"
    ) -> str:
        """The assistant's text. With ``schema``, the text should be one JSON object of that schema."""
        ...


LLMLike = LLM | Callable[[list[dict[str, str]]], object]


class CallableLLM:
    """A plain function as the LLM: ``fn(messages) -> str`` (or a dict, taken as the JSON object)."""

    def __init__(self, fn: Callable[[list[dict[str, str]]], object], name: str | None = None) -> None:
        self.fn = fn
        self._name = name or f"callable:{getattr(fn, '__name__', type(fn).__name__)}"

    @property
    def name(self) -> str:
        return self._name

    def complete(
        self, messages: Sequence[Message], *, schema: Mapping[str, Any] | None = None, schema_name: str = "reply"
    ) -> str:
        try:
            reply = self.fn([dict(m) for m in messages])
        # The callable wraps some foreign client (an SDK, a local model) whose errors we cannot
        # know: any Exception it raises is that LLM failing, so the step is skipped with the
        # original chained; BaseException (KeyboardInterrupt, SystemExit) still propagates.
        except Exception as exc:  # noqa: BLE001
            raise LLMError(f"the LLM callable {self._name} raised {type(exc).__name__}: {exc}") from exc
        if isinstance(reply, Mapping):
            return json.dumps(dict(reply))
        if not isinstance(reply, str):
            raise LLMReplyInvalid(f"the LLM callable {self._name} returned {type(reply).__name__}, not text")
        return reply


def as_llm(llm: object) -> LLM:
    """An ``LLM`` as given, or a callable wrapped in ``CallableLLM``; anything else is a ConfigError."""
    if isinstance(llm, LLM):
        return llm
    if callable(llm):
        return CallableLLM(llm)
    raise ConfigError(f"llm must be an LLM (complete(messages)) or a callable, got {type(llm).__name__}")


def ask(llm: LLM, messages: Sequence[Message], model: type[M]) -> M:
    """Ask for one JSON object of ``model``'s schema; ``LLMReplyInvalid`` unless it validates."""
    schema = model.model_json_schema()
    instruction = "Answer with one JSON object and nothing else, following this JSON schema:\n" + json.dumps(
        schema, sort_keys=True
    )
    asked = [*messages, {"role": "system", "content": instruction}]
    return parse_reply(llm.complete(asked, schema=schema, schema_name=model.__name__), model)


def parse_reply(text: str, model: type[M]) -> M:
    """The reply as ``model``: a JSON object, optionally in one markdown code fence."""
    if not text or not text.strip():
        raise LLMReplyInvalid("the LLM's reply was empty")
    fenced = _FENCE.match(text)
    body = fenced.group(1) if fenced else text
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise LLMReplyInvalid(f"the LLM's reply is not JSON ({exc}): {text[:SHOWN]!r}") from exc
    if not isinstance(data, dict):
        raise LLMReplyInvalid(f"the LLM's reply is JSON but not an object: {text[:SHOWN]!r}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(root)"
        raise LLMReplyInvalid(
            f"the LLM's reply does not follow the {model.__name__} schema ({exc.error_count()} errors; "
            f"first at {where}: {first['msg']})"
        ) from exc
