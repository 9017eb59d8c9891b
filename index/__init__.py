"""Adapters that turn vectors (or words) into neighbours. Import only mempager.types/protocols/errors.

Submodules load lazily so that ``import mempager.index`` pulls in neither hnswlib nor the tokenizer.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ExactIndex", "HnswIndex", "LexicalIndex", "QuerySyntaxError", "parse_query"]

_WHERE = {
    "ExactIndex": "mempager.index.exact",
    "HnswIndex": "mempager.index.hnsw",
    "LexicalIndex": "mempager.index.lexical",
    "QuerySyntaxError": "mempager.index.lexquery",
    "parse_query": "mempager.index.lexquery",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'index' has no attribute {name!r}")
