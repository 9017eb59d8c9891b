"""Who said a memory: the speaker prefix of a transcript line ("Caroline: I went camping", "user: ...").

A memory kept from a conversation usually starts with its speaker's name and a colon. A question
that names a person is mostly answered by what that person said: on LoCoMo, of the questions that
name one of the two speakers, 95-98% of the evidence turns (per category) are that speaker's own
(benchmarks/results/locomo_levers.md, "speaker lane"). The lexical index keeps each memory's
speaker as one extra term (``SPEAKER_MARK`` + the analysed name) so that ``spoken_by`` can answer
"which of these candidates did a speaker this query names say" from postings, with no text read,
and the term is saved and loaded with the index like any other. No query can produce the mark
(raw tokens are word characters), so BM25 never scores the speaker term.

The name is 1-3 words, each starting with a letter, before ``": "`` at the very start of the
text; its key is the tokeniser's analysis of it (case-folded, stemmed, stopwords out), so
"Caroline" in a memory meets "Caroline's" in a question. A name that analyses to nothing (a
stopword) or to more than ``MAX_TERMS`` terms is no speaker.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

SPEAKER_MARK = "\x1f"  # never inside a raw token (index.tokenize.RAW_TOKEN): a query cannot name the term
MAX_TERMS = 3
_PREFIX = re.compile(r"\s*([^\W\d_][\w'’.-]{0,39}(?: [^\W\d_][\w'’.-]{0,39}){0,2})\s*:\s")


def speaker_of(text: str) -> str | None:
    """The speaker prefix of ``text`` as written ("Caroline" of "Caroline: hi"), or None."""
    found = _PREFIX.match(text)
    return found.group(1) if found else None


def speaker_term(name_terms: Sequence[str]) -> str | None:
    """The index term of a speaker whose name analyses to ``name_terms`` (None: no speaker)."""
    if not 0 < len(name_terms) <= MAX_TERMS:
        return None
    return SPEAKER_MARK + " ".join(name_terms)


def named_terms(query_terms: Sequence[str]) -> list[str]:
    """Every speaker term a query could name: each run of 1-``MAX_TERMS`` consecutive terms."""
    out: dict[str, None] = {}
    for n in range(1, MAX_TERMS + 1):
        for i in range(len(query_terms) - n + 1):
            out[SPEAKER_MARK + " ".join(query_terms[i : i + n])] = None
    return list(out)
