"""Adapters that turn text into vectors. Import only ``mempager.types/protocols/errors`` from here.

``import mempager.embedders`` never imports torch: ``LocalEmbedder`` imports sentence-transformers when it
is constructed. ``pick_embedder(EmbedderSettings.from_env(os.environ, actor=...))`` runs the
selection chain gateway → provider → local model → hash.
"""

from mempager.embedders.base import check_vectors
from mempager.embedders.chain import CandidateReport, EmbedderChoice, pick_embedder
from mempager.embedders.down import DownEmbedder
from mempager.embedders.hashing import HashEmbedder
from mempager.embedders.http import HttpEmbedder, HttpOptions
from mempager.embedders.local import LocalEmbedder
from mempager.embedders.settings import EmbedderSettings

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
