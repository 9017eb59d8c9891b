"""Cue matching for the two on-cue tiers: a spore's cue and a crystal's words against a turn.

Both use the lexical lane's own analysis (``index.tokenize``: stemmed, stopwords dropped), so a
cue matches the turn as recall would match a memory: deterministic, no model needed (a pager
whose embedder is down still fires its spores), and cheap enough to run on every page.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mempager.index.tokenize import Tokenizer


@functools.cache
def _tokenizer() -> Tokenizer:
    from mempager.index.tokenize import Tokenizer  # lazily: numpy stays out of `import mempager`

    return Tokenizer()


def terms(text: str) -> frozenset[str]:
    """The distinct terms of ``text`` as the lexical lane indexes them."""
    return frozenset(_tokenizer().terms(text))


def cued(cue: frozenset[str], turn: frozenset[str]) -> bool:
    """A cue matches a turn that shares two of its terms (every term of a one-term cue)."""
    return bool(cue) and len(cue & turn) >= min(2, len(cue))
