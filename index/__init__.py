"""Adapters that turn vectors (or words) into neighbours. Import only pager.types/protocols/errors."""

from .exact import ExactIndex

__all__ = ["ExactIndex"]
