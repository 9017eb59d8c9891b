"""Fixtures of the consolidation tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mempager.llm.testing import ChatServer


@pytest.fixture
def server() -> Iterator[ChatServer]:
    """A real chat-completions server on 127.0.0.1 with scripted replies (the LLM-step tests)."""
    with ChatServer() as s:
        yield s
