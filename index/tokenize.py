"""The lexical lane's tokeniser: one analysis for documents and queries, so they always agree.

Text is NFKC-normalised and case-folded. A raw token is either

* an ordinary word (letters only, apostrophes allowed): stopwords dropped, possessive ``'s`` and
  apostrophes removed, then lightly stemmed;
* a number (digits only): kept as is, never a stopword;
* an identifier (anything else: ``0xdeadbeef``, ``src/app/main.py``, ``v1.2.3``, ``user@example.com``,
  URLs, ``snake_case``, ``camelCase``): kept *whole*, verbatim, and also split into *parts* at
  separators and camelCase humps (``src``, ``app``, ``main``, ``py``), so a query for ``main.py`` or
  ``app`` still finds it while a whole-token match (a rarer term, so a higher idf) scores higher.

Positions: parts of one identifier take consecutive positions; the whole sits at its first part's
position; a dropped stopword still uses a position, so phrase queries keep their gaps.

Choices measured on LoCoMo evidence recall (benchmarks/results/lexical.md, R@10 at k1=1.2, b=0.5):
light stemming 0.608 vs plurals only 0.586 vs none 0.573 (Snowball, the default since issue 19,
beat the light stemmer on both halves: benchmarks/results/locomo_levers.md); dropping stopwords +0.047; identifier
parts are neutral there (-0.001..+0.003) and exist for identifier queries, which LoCoMo lacks.
Further suffixes (-ly, -er, -ness, -ment, -ful) moved R@10 by at most +0.002, so they stay out.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from mempager.index._tokens import ascii_raw_tokens, unit_ids
from mempager.index.speakers import SPEAKER_MARK, named_terms, speaker_of, speaker_term

StemMode = Literal["none", "plural", "light", "snowball"]
Int64s = npt.NDArray[np.int64]
Int32s = npt.NDArray[np.int32]
# 2: a document's speaker prefix is one more term (index.speakers); older saved indexes are rebuilt
TOKENIZER_VERSION = 2
_CACHE_LIMIT = 200_000

# A token may start with path/handle marks ("/etc", "~/.bashrc", "@neo", "#12", "$5"); connectors stay
# inside only when a word character follows, so trailing punctuation drops off. (A look-behind for the
# leading marks made the whole scan 2.5x slower; leading ellipses are trimmed per distinct token instead.)
RAW_TOKEN_PLAIN = r"[~./@#$]*\w+(?:[.\-/\\@:+#~?=&%'’]+\w+)*"
# The same pattern with possessive quantifiers (Python 3.11+): the marks, the word characters and
# the connectors are disjoint sets, so giving back a character could never let a match go on, and
# the scan stops trying (LoCoMo turns, medians of 15 alternating passes: findall 9.05 -> 7.54 us a
# turn; tests/pager/test_fast_forms.py holds both equal).
RAW_TOKEN_POSSESSIVE = r"[~./@#$]*+\w++(?:[.\-/\\@:+#~?=&%'’]++\w++)*+"
RAW_TOKEN = re.compile(RAW_TOKEN_POSSESSIVE if sys.version_info >= (3, 11) else RAW_TOKEN_PLAIN)
_ELLIPSIS = re.compile(r"^\.{2,}(?!/)")
_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")
_SPLIT = re.compile(r"[\W_]+")
_HUMP = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+|[^\W\d_A-Za-z]+")
_MIXED_CASE = re.compile(r"[a-z][A-Z]|[A-Z]{2}[a-z]{2}")
_VERSION = re.compile(r"v\d+(?:\.\d+)+")

# Written for this project: function words that carry no topic, with contractions squashed the way
# the word normaliser squashes them ("don't" -> "dont").
STOPWORDS = frozenset(
    """
a about above after again against ain all am an and any are aren arent as at be because been before
being below between both but by can cannot could couldn couldnt d did didn didnt do does doesn doesnt
doing don dont down during each few for from further had hadn hadnt has hasn hasnt have haven havent
having he hed hell her here hers herself hes him himself his how hows i im ive if in into is isn isnt
it its itself just ll let lets m ma me mightn more most mustn my myself needn no nor not now o of off
on once only or other ought our ours ourselves out over own re s same shan shant she shed shell shes
should shouldn shouldnt so some such t than that thats the their theirs them themselves then there
theres these they theyd theyll theyre theyve this those through to too under until up ve very was
wasn wasnt we wed well were weren werent weve what whats when whens where wheres which while who
whom whos why whys will with won wont would wouldn wouldnt y you youd youll your youre yours
yourself yourselves youve
""".split()
)

_VOWELS = frozenset("aeiou")


def _undouble_or_restore_e(stem: str) -> str:
    """After stripping -ed/-ing: 'stopp' -> 'stop', 'mak' -> 'make', 'walk' stays."""
    if len(stem) >= 3 and stem[-1] == stem[-2] and stem[-1] not in "lsz" and stem[-1] not in _VOWELS:
        return stem[:-1]
    short_cvc = (
        len(stem) == 3
        and stem[0] not in _VOWELS
        and stem[1] in _VOWELS
        and stem[2] not in _VOWELS
        and stem[2] not in "wxy"
    )
    return stem + "e" if short_cvc else stem


def _strip_plural(word: str) -> str:
    if len(word) <= 3 or not word.endswith("s") or word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes", "zzes")):
        return word[:-2]
    return word[:-1]


_SNOWBALL: list[Any] = []  # the PyStemmer English stemmer, made on first use


def _snowball(word: str) -> str:
    if not _SNOWBALL:
        import Stemmer  # PyStemmer (C); lazily, so `import mempager` stays light

        _SNOWBALL.append(Stemmer.Stemmer("english"))
    return str(_SNOWBALL[0].stemWord(word)) if word.isalpha() else word


def stem_word(word: str, mode: StemMode) -> str:
    """Snowball English (the default), or a small suffix stripper (plurals, -ing, -ed)."""
    if mode == "none":
        return word
    if mode == "snowball":
        return _snowball(word)
    word = _strip_plural(word)
    if mode == "plural":
        return word
    if word.endswith("eed"):
        return word  # "agreed", "need", "proceed": stripping either way guesses wrong too often
    for suffix in ("ing", "ed"):
        stem = word[: -len(suffix)]
        # The stem must keep a vowel and some length, or "sing", "bed", "need" would be mangled.
        if word.endswith(suffix) and len(stem) >= 3 and any(c in _VOWELS for c in stem[:-1] or stem):
            if stem.endswith("i"):
                return stem[:-1] + "y"  # "studied" -> "study"
            return _undouble_or_restore_e(stem)
    return word


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text.casefold())


def _parts(raw: str) -> list[str]:
    """Split an identifier at separators and camelCase humps (before case folding loses the humps)."""
    if not _MIXED_CASE.search(raw):  # then no piece has a hump either (a piece is a substring)
        return [piece for piece in _SPLIT.split(raw) if piece]
    out: list[str] = []
    for piece in _SPLIT.split(raw):
        if piece:
            out.extend(_HUMP.findall(piece) if _MIXED_CASE.search(piece) else (piece,))
    return out


class Unit(NamedTuple):
    """One raw token after analysis: ``wholes`` at its first position, ``leaves`` at consecutive ones.

    An ordinary word or a number has one leaf and no whole; a stopword has neither (but one position);
    an identifier without separators is a single leaf; one with separators has wholes and parts.
    ``terms``/``offsets``/``width`` are precomputed because documents are analysed token by token.
    (A named tuple: a batch of new documents builds one per distinct new token, so it must be cheap.)
    """

    wholes: tuple[str, ...]
    leaves: tuple[str, ...]
    terms: tuple[str, ...]
    offsets: tuple[int, ...]  # of each term, relative to the unit's first position
    width: int  # positions the unit takes

    @classmethod
    def of(cls, wholes: tuple[str, ...], leaves: tuple[str, ...]) -> Unit:
        offsets = (0,) * len(wholes) + tuple(range(len(leaves)))
        return cls(wholes, leaves, wholes + leaves, offsets, max(1, len(leaves)))

    @classmethod
    def leaf(cls, term: str) -> Unit:
        """``Unit.of((), (term,))``: a word or a number, the common case."""
        one = (term,)
        return cls((), one, one, (0,), 1)


_NOTHING = Unit.of((), ())


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenizerConfig:
    # Snowball (PyStemmer) since issue 19: on LoCoMo halves it beat the light stemmer alone
    # (+0.004 / +0.010 mean recall) and beside context keys (+0.006); benchmarks/results/locomo_levers.md
    stem: StemMode = "snowball"
    subtokens: bool = True  # emit identifier parts next to the whole token
    stopwords: bool = True


@dataclass(slots=True)
class Tokenizer:
    config: TokenizerConfig = field(default_factory=TokenizerConfig)
    _cache: dict[str, Unit] = field(default_factory=dict, repr=False)
    _part_memo: dict[str, str] = field(default_factory=dict, repr=False)  # identifier piece -> its term
    _last_units: tuple[str, tuple[Unit, ...]] = field(default=("", ()), repr=False)  # ``units``' memo
    # speaker name as written -> its term: a conversation's few names start most of its documents
    _speakers: dict[str, str | None] = field(default_factory=dict, repr=False)

    @property
    def version(self) -> str:
        """Recorded with a saved index: a different analysis makes a saved index stale."""
        c = self.config
        return f"lex-tok-{TOKENIZER_VERSION}:stem={c.stem}:sub={int(c.subtokens)}:stop={int(c.stopwords)}"

    def raw_tokens(self, text: str) -> list[str]:
        # ASCII text (99% of LoCoMo's turns) goes through the compiled scan, which is the regex's
        # findall at ~a third of its cost; NFKC is the identity there (index/_tokens.c)
        found = ascii_raw_tokens(text)
        return RAW_TOKEN.findall(unicodedata.normalize("NFKC", text)) if found is None else found

    def document_tokens(self, text: str) -> list[str]:
        """A document's raw tokens, then its speaker's term when it starts with one (index.speakers)."""
        raws = self.raw_tokens(text)
        term = self.speaker_term(text)
        if term is not None:
            raws.append(term)
        return raws

    def speaker_term(self, text: str) -> str | None:
        """The index term of the speaker ``text`` starts with, or None."""
        name = speaker_of(text)
        if name is None:
            return None
        try:
            return self._speakers[name]
        except KeyError:
            if len(self._speakers) > _CACHE_LIMIT:
                self._speakers.clear()
            term = self._speakers[name] = speaker_term(self.analyse(name)[0])
            return term

    def named_speakers(self, query: str) -> list[str]:
        """The speaker terms ``query`` could name (look them up in an index's vocabulary)."""
        return named_terms(self.analyse(query)[0])

    def unit(self, raw: str, *, remember: bool = True) -> Unit:
        """The analysis of one raw token, memoised (the memo is bounded and cheap to rebuild) unless
        ``remember`` is false: an index's Vocabulary keeps its own memo of document tokens."""
        unit = self._cache.get(raw)
        if unit is None and not remember:
            return self._analyse(raw)
        if unit is None:
            if len(self._cache) > _CACHE_LIMIT:
                self._cache.clear()
            unit = self._cache[raw] = self._analyse(raw)
        return unit

    def units(self, text: str) -> tuple[Unit, ...]:
        # A page fault analyses its query twice (BM25 terms, then the speakers it names): the last
        # text's units are kept, one (text, units) pair swapped whole, so threads never see half of one.
        last = self._last_units
        if last[0] == text:
            return last[1]
        found = tuple(self.unit(raw) for raw in self.raw_tokens(text))
        self._last_units = (text, found)
        return found

    def analyse(self, text: str) -> tuple[list[str], list[int]]:
        """Every term of ``text`` with its position (a document's postings and phrase positions)."""
        terms: list[str] = []
        positions: list[int] = []
        pos = 0
        for unit in self.units(text):
            if unit.width == 1 and len(unit.terms) == 1:  # the common case, kept cheap
                terms.append(unit.terms[0])
                positions.append(pos)
            elif unit.terms:
                terms.extend(unit.terms)
                positions.extend([pos + off for off in unit.offsets])
            pos += unit.width
        return terms, positions

    def terms(self, text: str) -> list[str]:
        """Distinct terms of a query, in first-seen order."""
        return list(dict.fromkeys(t for unit in self.units(text) for t in unit.terms))

    def _analyse(self, raw: str) -> Unit:
        if raw.startswith(SPEAKER_MARK):  # made by document_tokens, already analysed
            return Unit.leaf(raw)
        if raw.startswith(".."):
            raw = _ELLIPSIS.sub("", raw)
        if raw.isdecimal():  # the same set as ``\d+`` (Unicode category Nd), tested before the regexes
            return Unit.leaf(raw)
        if raw.isascii() and raw.isalpha() and not _MIXED_CASE.search(raw):  # a plain ASCII word
            word = raw.lower()  # what NFKC + casefold do to ASCII letters
            if self.config.stopwords and word in STOPWORDS:
                return _NOTHING
            return Unit.leaf(stem_word(word, self.config.stem))
        if _WORD.fullmatch(raw) and not _MIXED_CASE.search(raw):
            word = _fold(raw).replace("’", "'")
            word = word[:-2] if word.endswith("'s") else word
            word = word.replace("'", "")
            if self.config.stopwords and word in STOPWORDS:
                return _NOTHING
            return Unit.leaf(stem_word(word, self.config.stem))
        if raw.isascii() and raw == raw.lower():  # e.g. "ref-4411", "src/app.py": fold and humps are no-ops
            whole = raw
            parts = [self._part(p) if p.isalpha() else p for p in _parts(raw)]
        else:
            whole = _fold(raw)
            parts = [self._part(p) for p in _parts(raw)]
        if not self.config.subtokens or parts in ([], [whole]):
            return Unit.leaf(whole)
        wholes = (whole, whole[1:]) if _VERSION.fullmatch(whole) else (whole,)
        return Unit.of(wholes, tuple(parts))

    def _part(self, piece: str) -> str:
        part = self._part_memo.get(piece)
        if part is None:
            if len(self._part_memo) > _CACHE_LIMIT:
                self._part_memo.clear()
            folded = _fold(piece)
            # Parts are stemmed like words so "tests/" meets "test", but never dropped as stopwords.
            part = self._part_memo[piece] = stem_word(folded, self.config.stem) if folded.isalpha() else folded
        return part


# -- encoding to arrays -------------------------------------------------------------------------


def grow(arr: npt.NDArray[Any], need: int) -> npt.NDArray[Any]:
    """``arr`` with room for ``need`` rows (doubling, zero-filled), or ``arr`` itself if it has it."""
    if need <= len(arr):
        return arr
    out = np.zeros((max(need, 2 * len(arr), 16), *arr.shape[1:]), dtype=arr.dtype)
    out[: len(arr)] = arr
    return out


def ranges(starts: Int64s, lengths: Int64s) -> Int64s:
    """Concatenated ``arange(s, s + n)`` for each (s, n), without a Python loop."""
    offsets = np.repeat(starts - np.cumsum(lengths) + lengths, lengths)
    return offsets + np.arange(int(lengths.sum()), dtype=np.int64)


class Vocabulary:
    """Term ids, plus each distinct raw token's analysis as term ids (a *unit*) for one index.

    Memoising units makes the per-token work of encoding a dict lookup; the rest is numpy.
    """

    def __init__(self, terms: Sequence[str] = ()) -> None:
        self.terms: list[str] = list(terms)
        self.ids: dict[str, int] = {t: i for i, t in enumerate(self.terms)}
        self.unit_of: dict[str, int] = {}
        # unit u: term ids u_tid[u_start[u] : u_start[u] + u_n[u]] at offsets u_off[...], u_width positions
        self.u_n, self.u_width, self.u_start = (np.zeros(0, np.int64) for _ in range(3))
        self.u_tid, self.u_off = np.zeros(0, np.int32), np.zeros(0, np.int32)
        self.n_utok = 0

    def encode(self, tokenizer: Tokenizer, raws: Sequence[list[str]]) -> tuple[Int64s, Int32s, Int32s]:
        """Per document its number of terms; then every term's id and position, documents back to back.

        Equal to ``tokenizer.analyse`` of each text, mapped to ids (a test holds it to that).
        """
        docs = raws if isinstance(raws, list) else list(raws)
        doc_lens = np.fromiter(map(len, docs), np.int64, len(docs))
        units = self._unit_ids(tokenizer, docs, int(doc_lens.sum()))
        width = self.u_width[units]
        ends = np.cumsum(width)  # positions run across the batch, then restart at each document
        doc_base = np.concatenate(([0], ends))[np.cumsum(doc_lens) - doc_lens]
        pos = ends - width - np.repeat(doc_base, doc_lens)
        n_terms = self.u_n[units]
        idx = ranges(self.u_start[units], n_terms)
        tok_pos = (np.repeat(pos, n_terms) + self.u_off[idx]).astype(np.int32)
        counts = np.bincount(np.repeat(np.arange(len(raws)), doc_lens), n_terms, len(raws)).astype(np.int64)
        return counts, self.u_tid[idx], tok_pos

    def _unit_ids(self, tokenizer: Tokenizer, docs: list[list[str]], total: int) -> Int64s:
        """Each token's unit, back to back (``total`` tokens), adding the units of tokens new here."""
        units = np.empty(total, np.int64)
        new = unit_ids(docs, self.unit_of, units, False)  # the tokens that have no unit yet
        if new:
            self._add_units(new, [tokenizer.unit(raw, remember=False) for raw in new])
            unit_ids(docs, self.unit_of, units, True)
        return units

    def _add_units(self, raws: list[str], units: list[Unit]) -> None:
        ids, terms = self.ids, self.terms
        tids: list[int] = []
        for unit in units:
            for term in unit.terms:
                tid = ids.get(term)
                if tid is None:
                    tid = ids[term] = len(terms)
                    terms.append(term)
                tids.append(tid)
        u0, t0, n, m = len(self.unit_of), self.n_utok, len(units), len(tids)
        self.unit_of.update(zip(raws, range(u0, u0 + n), strict=True))
        self.u_n, self.u_width, self.u_start = (grow(a, u0 + n) for a in (self.u_n, self.u_width, self.u_start))
        self.u_n[u0 : u0 + n] = np.fromiter((len(u.terms) for u in units), np.int64, n)
        self.u_width[u0 : u0 + n] = np.fromiter((u.width for u in units), np.int64, n)
        self.u_start[u0 : u0 + n] = t0 + np.cumsum(self.u_n[u0 : u0 + n]) - self.u_n[u0 : u0 + n]
        self.u_tid, self.u_off = grow(self.u_tid, t0 + m), grow(self.u_off, t0 + m)
        self.u_tid[t0 : t0 + m] = tids
        self.u_off[t0 : t0 + m] = np.fromiter((o for u in units for o in u.offsets), np.int32, m)
        self.n_utok = t0 + m
