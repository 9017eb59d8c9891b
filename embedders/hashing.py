"""Deterministic feature-hashing embedder: the fallback that always works.

blake2b of normalised word tokens and character trigrams, signed, summed with sublinear term
frequency, L2-normalised. Never Python's salted ``hash()``: the same text gives byte-identical
vectors in every process and on every machine. Identifiers ("0xdeadbeef", "src/app.py",
"v1.2.3") are kept whole as word tokens, so an exact identifier still lands on its own feature;
the parts of a compound token ("secret/deploy/0xdeadbeef") are features too, so the identifier
inside a path is found by a query for the identifier alone.

v2 (was v1): compound-token parts added. v1 missed an identifier embedded in a path and ranked
a near-miss ("0xdeadbead") above the exact match; the version is in ``name`` because the vectors
changed, so stores re-embed instead of comparing v1 and v2 vectors.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from mempager.embedders.base import check_role, check_texts
from mempager.errors import ConfigError
from mempager.types import FloatMatrix, Role

_TOKEN = re.compile(r"[\w][\w.:/@#+-]*[\w]|[\w]", re.UNICODE)
_INNER = re.compile(r"[.:/@#+-]+")
VERSION = "v2"


def tokenize(text: str) -> list[str]:
    """Casefolded word tokens; inner punctuation of identifiers, paths and versions kept."""
    return _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold())


@lru_cache(maxsize=262_144)
def _feature(token: str, dim: int) -> tuple[int, float]:
    # surrogatepass: a lone surrogate (possible only in the raw fallback key) must not crash.
    digest = hashlib.blake2b(token.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value % dim, (1.0 if (value >> 63) & 1 else -1.0)


class HashEmbedder:
    """``name`` is "hash-v2-<dim>" (``VERSION``): a different dim or algorithm is a different model."""

    def __init__(self, dim: int = 384, ngram: int = 3, ngram_weight: float = 0.5) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 8:
            raise ConfigError(f"hash embedder dim must be an integer >= 8, got {dim!r}")
        if ngram < 2:
            raise ConfigError(f"hash embedder ngram must be >= 2, got {ngram!r}")
        self._dim = dim
        self._ngram = ngram
        self._ngram_weight = float(ngram_weight)

    @property
    def name(self) -> str:
        return f"hash-{VERSION}-{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def __repr__(self) -> str:
        return f"HashEmbedder(dim={self._dim})"

    def embed(self, texts: Sequence[str], role: Role = "document") -> FloatMatrix:
        # The contract's checks, as every backend makes them: a bare string would otherwise be
        # embedded one character per row, and a role typo would pass here and fail elsewhere.
        items = check_texts(texts)
        check_role(role)  # the hash has no roles; validated so a typo still fails loudly
        out = np.zeros((len(items), self._dim), dtype=np.float32)
        for row, text in enumerate(items):
            out[row] = self._one(text)
        return out

    def _one(self, text: str) -> FloatMatrix:
        counts: dict[str, float] = {}
        words = tokenize(text)
        for word in words:
            counts["w:" + word] = counts.get("w:" + word, 0.0) + 1.0
            parts = [part for part in _INNER.split(word) if part]
            if len(parts) > 1:
                for part in parts:
                    counts["w:" + part] = counts.get("w:" + part, 0.0) + 1.0
            padded = f"<{word}>"
            if len(padded) > self._ngram:
                for i in range(len(padded) - self._ngram + 1):
                    key = "g:" + padded[i : i + self._ngram]
                    counts[key] = counts.get(key, 0.0) + self._ngram_weight
        if not counts:  # punctuation-only text still gets a stable, finite vector
            counts["raw:" + text] = 1.0
        vec = np.zeros(self._dim, dtype=np.float64)
        for key, tf in counts.items():
            index, sign = _feature(key, self._dim)
            vec[index] += sign * (1.0 + np.log(tf)) if tf >= 1 else sign * tf
        norm = float(np.linalg.norm(vec))
        if norm == 0.0:  # all features cancelled out: fall back to one deterministic axis
            index, sign = _feature("raw:" + text, self._dim)
            vec[index] = sign
            norm = 1.0
        return (vec / norm).astype(np.float32)
