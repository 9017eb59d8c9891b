"""Adapters that turn text into vectors. Import only ``pager.types/protocols/errors`` from here.

``import embedders`` never imports torch: ``LocalEmbedder`` imports sentence-transformers when it
is constructed. ``pick_embedder(EmbedderSettings.from_env(os.environ, actor=...))`` runs the
selection chain gateway → provider → local model → hash.
"""

from .base import check_vectors
from .chain import CandidateReport, EmbedderChoice, pick_embedder
from .down import DownEmbedder
from .hashing import HashEmbedder
from .http import HttpEmbedder, HttpOptions
from .local import LocalEmbedder
from .settings import EmbedderSettings

__all__ = [
    "CandidateReport",
    "DownEmbedder",
    "EmbedderChoice",
    "EmbedderSettings",
    "HashEmbedder",
    "HttpEmbedder",
    "HttpOptions",
    "LocalEmbedder",
    "check_vectors",
    "pick_embedder",
]
