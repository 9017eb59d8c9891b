"""mempager: a memory pager for LLM agents.

    import mempager
    p = mempager.open("agent.duckdb", actor="neo")
    p.remember_fact("The deploy key lives in vault at secret/deploy")
    print(p.page(goal="ship the release", query="where is the deploy key?").render())

``import mempager`` stays light: no torch until a local model is actually used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
    NotAStore,
    PagerError,
    SchemaTooNew,
    StoreBusy,
    StoreDamaged,
    StoreError,
    StoreFull,
    StoreLocked,
    StoreTimeout,
    StoreUnavailable,
    TextTooLong,
    UnknownType,
    WalReplayFailed,
)
from mempager.paging.page import Page, PageReport
from mempager.patterns import Pattern, PatternSpec
from mempager.tokens import estimate_tokens, truncate_tokens
from mempager.types import LaneHit, Memory, MemoryType, Scope, Snippet, Source

if TYPE_CHECKING:  # loaded on first use: the turn helpers bring asyncio, which a CLI call never needs
    from mempager.turns import AsyncTurnMemory as AsyncTurnMemory
    from mempager.turns import TurnContext as TurnContext
    from mempager.turns import TurnMemory as TurnMemory
    from mempager.turns import TurnRecord as TurnRecord

_LAZY = {"AsyncTurnMemory", "TurnContext", "TurnMemory", "TurnRecord"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from mempager import turns

        return getattr(turns, name)
    raise AttributeError(f"module 'mempager' has no attribute {name!r}")


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
    "NotAStore",
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
    "StoreBusy",
    "StoreDamaged",
    "StoreError",
    "StoreFull",
    "StoreLocked",
    "StoreTimeout",
    "StoreUnavailable",
    "TextTooLong",
    "UnknownType",
    "WalReplayFailed",
    "estimate_tokens",
    "open",
    "truncate_tokens",
    "TurnMemory",
    "AsyncTurnMemory",
    "TurnContext",
    "TurnRecord",
]
