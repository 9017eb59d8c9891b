"""Framework adapters: mempager behind each agent framework's own memory seam.

One module per framework, each importing its framework (an optional extra) when it is imported:

    mempager.adapters.langgraph      MempagerStore, a langgraph ``BaseStore``   (pip install 'mempager[langgraph]')
    mempager.adapters.openai_agents  MempagerSession, paged_instructions        (pip install 'mempager[openai-agents]')
    mempager.adapters.llama_index    MempagerMemoryBlock for ``Memory``         (pip install 'mempager[llama-index]')

The Claude Code hooks are a CLI command (``mempager hook ...``, ``mempager.cli.hook_cmd``): they
need no framework package. Nothing here is imported by ``import mempager``, and the kernel never
imports this package (an import-linter contract in pyproject.toml).
"""

from __future__ import annotations

from mempager.errors import PagerError


class AdapterUnavailable(PagerError, ModuleNotFoundError):
    """The framework an adapter wraps is not installed; the message names the extra to install.

    A ``ModuleNotFoundError`` whose ``name`` is the missing module, so code that skips optional
    modules by catching that (tests/packaging does) treats an adapter like any other extra.
    """


def missing(module: str, extra: str, exc: ImportError) -> AdapterUnavailable:
    """The error an adapter module raises when its framework cannot be imported."""
    return AdapterUnavailable(f"this adapter needs {module}: pip install 'mempager[{extra}]' ({exc})", name=exc.name)


__all__ = ["AdapterUnavailable", "missing"]
