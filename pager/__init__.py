"""mempager: a memory pager for LLM agents.

    import pager
    p = pager.open("agent.duckdb", actor="neo")
    p.remember_fact("The deploy key lives in vault at secret/deploy")
    print(p.page(goal="ship the release", query="where is the deploy key?").render())

``import pager`` stays light: no torch until a local model is actually used.
"""

from __future__ import annotations

from .api import open
from .config import PagerConfig
from .core import Pager
from .errors import (
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
from .page import Page, PageReport
from .patterns import Pattern, PatternSpec
from .tokens import estimate_tokens, truncate_tokens
from .turns import AsyncTurnMemory, TurnContext, TurnMemory, TurnRecord
from .types import LaneHit, Memory, MemoryType, Scope, Snippet, Source

__version__ = "0.1.0"

__all__ = [
    "ConfigError", "DimensionMismatch", "EmbedderError", "EmbedderUnavailable", "EmptyText",
    "IndexStale", "InvalidActor", "InvalidInput", "InvalidText", "InvalidTime", "InvalidUri",
    "LaneHit", "Memory", "MemoryNotFound", "MemoryType", "NonFiniteVector", "Page", "PageReport",
    "Pager", "PagerConfig", "PagerError", "Pattern", "PatternSpec", "SchemaTooNew", "Scope",
    "Snippet", "Source", "StoreError", "StoreFull", "StoreLocked", "TextTooLong", "UnknownType",
    "estimate_tokens", "open", "truncate_tokens", "TurnMemory", "AsyncTurnMemory", "TurnContext", "TurnRecord",
]
