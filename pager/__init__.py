"""mempager: a memory pager for LLM agents.

    import mempager
    p = mempager.open("agent.duckdb", actor="neo")
    p.remember_fact("The deploy key lives in vault at secret/deploy")
    print(p.page(goal="ship the release", query="where is the deploy key?").render())

``import mempager`` stays light: no torch until a local model is actually used.
"""

from __future__ import annotations

from mempager.api import open
from mempager.config import PagerConfig
from mempager.core import Pager
from mempager.errors import (
    ConfigError,
    DimensionMismatch,
    EmbedderError,
    EmbedderUnavailable,
    EmptyText,
    IndexStale,
    InvalidActor,
    InvalidInput,
    InvalidText,
    InvalidTime,
    InvalidUri,
    MemoryNotFound,
    NonFiniteVector,
    PagerError,
    SchemaTooNew,
    StoreError,
    StoreFull,
    StoreLocked,
    TextTooLong,
    UnknownType,
)
from mempager.paging.page import Page, PageReport
from mempager.patterns import Pattern, PatternSpec
from mempager.tokens import estimate_tokens, truncate_tokens
from mempager.turns import AsyncTurnMemory, TurnContext, TurnMemory, TurnRecord
from mempager.types import LaneHit, Memory, MemoryType, Scope, Snippet, Source

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "DimensionMismatch",
    "EmbedderError",
    "EmbedderUnavailable",
    "EmptyText",
    "IndexStale",
    "InvalidActor",
    "InvalidInput",
    "InvalidText",
    "InvalidTime",
    "InvalidUri",
    "LaneHit",
    "Memory",
    "MemoryNotFound",
    "MemoryType",
    "NonFiniteVector",
    "Page",
    "PageReport",
    "Pager",
    "PagerConfig",
    "PagerError",
    "Pattern",
    "PatternSpec",
    "SchemaTooNew",
    "Scope",
    "Snippet",
    "Source",
    "StoreError",
    "StoreFull",
    "StoreLocked",
    "TextTooLong",
    "UnknownType",
    "estimate_tokens",
    "open",
    "truncate_tokens",
    "TurnMemory",
    "AsyncTurnMemory",
    "TurnContext",
    "TurnRecord",
]
