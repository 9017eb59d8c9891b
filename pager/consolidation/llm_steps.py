"""Builds each LLM consolidation step from a pager's parts, so ``Pager`` needs one line per step:

    def merge(self, type=None, scope=None, *, dry_run=False, llm=None):
        return llm_steps.merger(self, llm).merge(type=type, scope=scope, dry_run=dry_run)

The steps are cheap to build (no connection is opened until the LLM is asked), so one is built
per call and holds no state between calls. Their modules (and pydantic) are imported on first
use: ``import mempager`` stays light.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from mempager.config import PagerConfig
from mempager.protocols import Store
from mempager.types import PutResult

if TYPE_CHECKING:
    from mempager.consolidation.auto_wrap import AutoWrapper
    from mempager.consolidation.distill import Distiller
    from mempager.consolidation.merge import Merger
    from mempager.consolidation.reflection import Reflector
    from mempager.consolidation.replay import Replayer
    from mempager.consolidation.steps import LLMProvider, StepLock
    from mempager.consolidation.wrap import Consolidator


class WriterLike(Protocol):
    """``Writer`` (writing/writeback.py), as far as the steps use it."""

    def remember_many(self, items: Sequence[Mapping[str, Any]]) -> list[str]: ...

    def after_write(self, results: Sequence[PutResult]) -> None: ...


class PagerParts(Protocol):
    """What the steps take from a ``Pager`` (its public collaborators); read-only, so covariant."""

    @property
    def store(self) -> Store: ...

    @property
    def actor(self) -> str: ...

    @property
    def config(self) -> PagerConfig: ...

    @property
    def writer(self) -> WriterLike: ...

    @property
    def consolidation(self) -> Consolidator: ...

    @property
    def clock(self) -> Callable[[], datetime]: ...


def _common(p: PagerParts, llm: object) -> tuple[LLMProvider, StepLock]:
    from mempager.consolidation.steps import StepLock, llm_provider

    return llm_provider(llm, p.config), StepLock(p.store.consolidation, p.config)


def merger(p: PagerParts, llm: object = None) -> Merger:
    from mempager.consolidation.merge import Merger

    provider, lock = _common(p, llm)
    return Merger(p.store, p.actor, p.config, llm=provider, lock=lock, clock=p.clock, after_write=p.writer.after_write)


def replayer(p: PagerParts, llm: object = None) -> Replayer:
    from mempager.consolidation.replay import Replayer

    provider, lock = _common(p, llm)
    return Replayer(p.config, remember=p.writer.remember_many, llm=provider, lock=lock)


def reflector(p: PagerParts, llm: object = None) -> Reflector:
    from mempager.consolidation.reflection import Reflector

    provider, lock = _common(p, llm)
    return Reflector(p.config, remember=p.writer.remember_many, llm=provider, lock=lock)


def distiller(p: PagerParts, llm: object = None) -> Distiller:
    from mempager.consolidation.distill import Distiller

    provider, lock = _common(p, llm)
    return Distiller(p.store, p.actor, p.config, llm=provider, lock=lock, clock=p.clock)


def auto_wrapper(p: PagerParts, llm: object = None) -> AutoWrapper:
    from mempager.consolidation.auto_wrap import AutoWrapper

    provider, lock = _common(p, llm)
    return AutoWrapper(p.consolidation, llm=provider, lock=lock)
