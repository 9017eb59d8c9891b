"""``LLMSettings``: where the consolidation LLM lives, read from the environment at one edge.

    MEMPAGER_LLM_URL      an OpenAI-compatible server (``{url}/v1/chat/completions``)
    MEMPAGER_LLM_API_KEY  its key (unset for a keyless local server); never shown or logged
    MEMPAGER_LLM_MODEL    the model name sent with every request

Timeouts and retries are ``PagerConfig`` fields (``llm_timeout_seconds``, ``llm_max_attempts``,
``llm_backoff_seconds``). Unset ``MEMPAGER_LLM_URL`` means no LLM: every LLM step is skipped.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mempager.config import PagerConfig
from mempager.errors import ConfigError

if TYPE_CHECKING:
    from mempager.llm.http import ChatClient


@dataclass(frozen=True, kw_only=True)
class LLMSettings:
    url: str | None = None
    model: str | None = None
    api_key: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.url is not None and not self.model:
            raise ConfigError(f"MEMPAGER_LLM_URL is set ({self.url!r}) but MEMPAGER_LLM_MODEL is not: name the model")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LLMSettings:
        env = os.environ if environ is None else environ

        def text(key: str) -> str | None:
            value = env.get(key, "").strip()
            return value or None

        return cls(url=text("MEMPAGER_LLM_URL"), model=text("MEMPAGER_LLM_MODEL"), api_key=text("MEMPAGER_LLM_API_KEY"))

    def client(self, config: PagerConfig) -> ChatClient | None:
        """The configured chat client, or None when no URL is set."""
        if self.url is None or self.model is None:
            return None
        from mempager.llm.http import ChatClient  # lazily: `mempager config` reads these settings without httpx

        return ChatClient(
            self.url,
            self.model,
            api_key=self.api_key,
            timeout=config.llm_timeout_seconds,
            max_attempts=config.llm_max_attempts,
            backoff=config.llm_backoff_seconds,
        )
