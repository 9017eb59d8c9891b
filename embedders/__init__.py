"""Adapters that turn text into vectors. Import only ``pager.types/protocols/errors`` from here."""

from .hashing import HashEmbedder

__all__ = ["HashEmbedder"]
