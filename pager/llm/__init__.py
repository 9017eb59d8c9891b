"""The LLM seam of the consolidation steps (issue 21): messages in, text or a validated object out.

    from mempager.llm import ChatClient, CallableLLM
    llm = ChatClient("http://127.0.0.1:8080", "qwen2.5-7b-instruct")   # any OpenAI-compatible server
    llm = CallableLLM(lambda messages: my_client.chat(messages))       # or any function

Unconfigured, the steps read ``MEMPAGER_LLM_URL`` / ``MEMPAGER_LLM_MODEL`` / ``MEMPAGER_LLM_API_KEY``
(``LLMSettings``); with none, every LLM step is skipped with the reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mempager.llm.settings import LLMSettings

if TYPE_CHECKING:
    from mempager.llm.base import LLM, CallableLLM, LLMLike, Message, as_llm, ask, parse_reply
    from mempager.llm.http import ChatClient

__all__ = ["LLM", "CallableLLM", "ChatClient", "LLMLike", "LLMSettings", "Message", "as_llm", "ask", "parse_reply"]
_HOMES = {"ChatClient": "mempager.llm.http"}


def __getattr__(name: str) -> Any:
    """The client and the pydantic-based helpers on first use: reading the settings stays light."""
    if name not in __all__:
        raise AttributeError(f"module 'mempager.llm' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_HOMES.get(name, "mempager.llm.base")), name)
