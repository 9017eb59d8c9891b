"""Explicit-recall query syntax for the lexical lane: parse to an AST, evaluate to a set of rows.

Grammar (operators are upper case; lower-case "and"/"or"/"not" are ordinary words)::

    query   := or_expr
    or_expr := and_expr ("OR" and_expr)*
    and_expr:= unary ("AND"? unary)*          whitespace between terms means AND
    unary   := ("NOT" | "-") unary | primary  "-" only when glued to what it negates: -draft
    primary := "(" or_expr ")" | '"' phrase '"' | word* | word

A word is analysed like document text. An identifier (``src/app/main.py``) matches a document holding
it whole or holding its parts in order (``main.py`` inside ``src/app/main.py``); several tokens in one
word (``foo,bar``) must appear as a phrase. ``pref*`` expands against the indexed vocabulary, i.e.
terms as indexed (case-folded and lightly stemmed: "meet*" finds "meeting", stored as "meet", but
"meeti*" does not); more than ``MAX_PREFIX_TERMS`` expansions raise QueryTooBroad rather than
silently dropping some. Words that analyse to nothing (stopwords) drop out of the query; a query left
with nothing matches nothing. A query that only excludes ("-draft") is rejected: it would return
nearly everything, unranked.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Protocol

import numpy as np
import numpy.typing as npt

from mempager.errors import InvalidInput
from mempager.index.tokenize import Tokenizer

MAX_PREFIX_TERMS = 512
RowArray = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]


class QuerySyntaxError(InvalidInput):
    """An explicit-recall query could not be parsed; the message says how to fix it."""


class QueryTooBroad(InvalidInput):
    """A prefix expands to more vocabulary terms than the bound allows."""


@dataclass(frozen=True, slots=True)
class Term:
    text: str


@dataclass(frozen=True, slots=True)
class Phrase:
    text: str


@dataclass(frozen=True, slots=True)
class Prefix:
    text: str  # without the trailing "*"


@dataclass(frozen=True, slots=True)
class Not:
    child: Query


@dataclass(frozen=True, slots=True)
class And:
    children: tuple[Query, ...]


@dataclass(frozen=True, slots=True)
class Or:
    children: tuple[Query, ...]


Query = Term | Phrase | Prefix | Not | And | Or

_LEX = re.compile(r'\s*(?:(?P<open>\()|(?P<close>\))|(?P<phrase>"[^"]*"?)|(?P<neg>-)(?=[^\s\-)])|(?P<word>[^\s()"]+))')
_OPERATORS = frozenset({"AND", "OR", "NOT"})
_EXAMPLE = "e.g. 'deploy AND (staging OR prod) -draft \"exact phrase\" conf*'"
_END = ("end", "")


def _lex(text: str) -> list[tuple[str, str]]:
    """(kind, text) tokens; kind is open/close/phrase/neg/op/word ("-" is neg only glued to a term)."""
    tokens: list[tuple[str, str]] = []
    for m in _LEX.finditer(text.rstrip()):
        kind = m.lastgroup or "word"
        value = m.group(kind)
        if kind == "phrase" and (len(value) < 2 or not value.endswith('"')):
            raise QuerySyntaxError(f'unbalanced quote in {text!r}: close the phrase with " or remove the stray "')
        tokens.append(("op" if value in _OPERATORS else kind, value))
    return tokens


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _lex(text)
        self.i = 0

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.i] if self.i < len(self.tokens) else _END

    def take(self) -> tuple[str, str]:
        self.i += 1
        return self.tokens[self.i - 1]

    def fail(self, problem: str) -> QuerySyntaxError:
        return QuerySyntaxError(f"{problem} in query {self.text!r}; {_EXAMPLE}")

    def or_expr(self) -> Query:
        children = [self.and_expr()]
        while self.peek() == ("op", "OR"):
            self.take()
            children.append(self.and_expr())
        return children[0] if len(children) == 1 else Or(tuple(children))

    def and_expr(self) -> Query:
        children = [self.unary()]
        while self.peek()[0] not in ("end", "close") and self.peek() != ("op", "OR"):
            if self.peek() == ("op", "AND"):
                self.take()
            children.append(self.unary())
        return children[0] if len(children) == 1 else And(tuple(children))

    def unary(self) -> Query:
        if self.peek() in (("op", "NOT"), ("neg", "-")):
            _, tok = self.take()
            if self.peek()[0] in ("end", "close", "op") and self.peek() != ("op", "NOT"):
                raise self.fail(f"{tok} needs a term after it (write 'cat NOT dog' or 'cat -dog')")
            return Not(self.unary())
        return self.primary()

    def primary(self) -> Query:
        kind, tok = self.peek()
        if kind in ("end", "close", "op"):
            where = "at the end" if kind == "end" else f"before {tok!r}"
            raise self.fail(f"a term is missing {where} (AND/OR need a term on each side, () must not be empty)")
        self.take()
        if kind == "open":
            inner = self.or_expr()
            if self.peek()[0] != "close":
                raise self.fail("unbalanced parenthesis: add the missing ')'")
            self.take()
            return inner
        if kind == "phrase":
            if not tok[1:-1].strip():
                raise self.fail('empty phrase "": put words between the quotes or remove them')
            return Phrase(tok[1:-1])
        if tok.endswith("*"):
            stem = tok.rstrip("*")
            if not any(ch.isalnum() for ch in stem):
                raise self.fail(f"prefix {tok!r} needs at least one letter or digit before '*'")
            return Prefix(stem)
        return Term(tok)


def parse_query(text: str) -> Query:
    """Parse explicit-recall syntax; raises QuerySyntaxError with a fix for malformed input."""
    if not text.strip():
        raise QuerySyntaxError(f"empty query: type at least one word to look for, {_EXAMPLE}")
    parser = _Parser(text)
    query = parser.or_expr()
    if parser.peek() != _END:  # only a stray ")" stops both loops early
        raise parser.fail("unbalanced parenthesis: remove the extra ')' or add a matching '('")
    if not _has_positive(query):
        raise parser.fail("NOT/-term only excludes; add a term to look for (write 'cat NOT dog')")
    return query


def _has_positive(node: Query) -> bool:
    if isinstance(node, Not):
        return False
    if isinstance(node, And | Or):
        return any(_has_positive(c) for c in node.children)
    return True


# -- evaluation ---------------------------------------------------------------------------------


class Corpus(Protocol):
    """What evaluation needs from an index snapshot; every row array is sorted and holds live rows."""

    def rows_with(self, term: str) -> RowArray: ...

    def phrase_rows(self, slots: Sequence[tuple[str, int]]) -> RowArray: ...

    def prefix_terms(self, prefix: str, limit: int) -> list[str]: ...

    def all_rows(self) -> RowArray: ...


@dataclass(frozen=True, slots=True)
class Matched:
    rows: RowArray
    positive_terms: tuple[str, ...]  # what ranks the rows (terms under NOT do not)


def evaluate(query: Query, corpus: Corpus, tokenizer: Tokenizer) -> Matched | None:
    """The rows ``query`` matches; None when every term dropped out (stopwords only)."""
    return _Evaluator(corpus, tokenizer).run(query)


_EMPTY: RowArray = np.empty(0, dtype=np.int64)


class _Evaluator:
    def __init__(self, corpus: Corpus, tokenizer: Tokenizer) -> None:
        self.corpus = corpus
        self.tokenizer = tokenizer

    def run(self, node: Query) -> Matched | None:
        if isinstance(node, Term | Phrase):
            return self.text(node.text)
        if isinstance(node, Prefix):
            return self.prefix(node.text)
        if isinstance(node, Not):
            inner = self.run(node.child)
            if inner is None:
                return None
            return Matched(np.setdiff1d(self.corpus.all_rows(), inner.rows, assume_unique=True), ())
        if isinstance(node, Or):
            parts = [m for m in map(self.run, node.children) if m is not None]
            if not parts:
                return None
            rows = reduce(np.union1d, (m.rows for m in parts))
            return Matched(rows, tuple(t for m in parts for t in m.positive_terms))
        return self.conjunction(node)

    def conjunction(self, node: And) -> Matched | None:
        wanted = [m for c in node.children if not isinstance(c, Not) and (m := self.run(c)) is not None]
        unwanted = [m for c in node.children if isinstance(c, Not) and (m := self.run(c.child)) is not None]
        if not wanted:
            return None  # exclusions alone, after stopwords dropped out, would return everything
        rows = reduce(lambda a, b: np.intersect1d(a, b, assume_unique=True), (m.rows for m in wanted))
        for m in unwanted:
            rows = np.setdiff1d(rows, m.rows, assume_unique=True)
        return Matched(rows, tuple(t for m in wanted for t in m.positive_terms))

    def text(self, text: str) -> Matched | None:
        units = self.tokenizer.units(text)
        slots: list[tuple[str, int]] = []
        pos = 0
        for unit in units:
            slots.extend((leaf, pos + i) for i, leaf in enumerate(unit.leaves))
            pos += unit.width
        if not slots:
            return None
        rows = self.corpus.phrase_rows(slots)
        if len(units) == 1:  # an identifier found whole ("v1.2.3" also stands as "1.2.3")
            for whole in units[0].wholes:
                rows = np.union1d(rows, self.corpus.rows_with(whole))
        return Matched(rows, tuple(dict.fromkeys(t for u in units for t in u.terms)))

    def prefix(self, text: str) -> Matched:
        prefix = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
        terms = self.corpus.prefix_terms(prefix, MAX_PREFIX_TERMS + 1)
        if len(terms) > MAX_PREFIX_TERMS:
            raise QueryTooBroad(
                f"prefix {text + '*'!r} matches {len(terms)} indexed terms (at most "
                f"{MAX_PREFIX_TERMS}); type more letters before the '*'"
            )
        rows = reduce(np.union1d, (self.corpus.rows_with(t) for t in terms), _EMPTY)
        return Matched(rows, tuple(terms))


# -- scoring kernels (pure numpy over the index's arrays) ---------------------------------------


def query_ids(ids: Mapping[str, int], df: RowArray, terms: Iterable[str]) -> list[int]:
    """The distinct known term ids of ``terms``, in query order, of terms some live document holds."""
    return [t for t in dict.fromkeys(ids.get(x, -1) for x in terms) if t >= 0 and df[t] > 0]


def idf_weights(n_docs: int, df: Floats, k1: float) -> Floats:
    """Each term's idf times (k1 + 1): idf = ln(1 + (N - df + 0.5) / (df + 0.5)), never negative.

    Every BM25 path (this module's ``bm25``, the pruned and context searches, the compiled kernel's
    caller) takes its weights from here: the kernel's scores equal the numpy ones bit for bit only
    while the weights do, and numpy's ``log1p`` is not the C library's on every machine."""
    weights: Floats = np.log1p((n_docs - df + 0.5) / (df + 0.5)) * (k1 + 1.0)
    return weights


def bm25(
    postings: Sequence[npt.NDArray[np.int32]],
    df: RowArray,
    n_docs: int,
    total_len: int,
    doclen: Floats,
    k1: float,
    b: float,
) -> Floats:
    """Okapi BM25 of every row for one query: ``postings[i]`` holds (row, tf) pairs of term i.

    idf = ln(1 + (N - df + 0.5) / (df + 0.5)) (never negative); rows that match nothing score 0.
    Summation runs term by term in query order, so equal inputs give bit-identical scores.
    """
    lens = np.fromiter(map(len, postings), np.int64, len(postings))
    post = np.concatenate(postings)
    dfs = df.astype(np.float64)
    weight = np.repeat(idf_weights(n_docs, dfs, k1), lens)
    rows, tf = post[:, 0].astype(np.intp), post[:, 1].astype(np.float64)
    if b:  # then, in place (this is the hot loop): tf / (tf + k1 * (1 - b + b * dl / avgdl))
        norm = doclen[rows]
        norm *= k1 * b * n_docs / total_len
        norm += k1 * (1.0 - b)
        norm += tf
    else:  # b = 0 (the default) ignores lengths: skip gathering them, same bits (0 * dl + k1 = k1)
        norm = tf + k1
    np.divide(tf, norm, out=tf)
    tf *= weight
    return np.bincount(rows, weights=tf, minlength=len(doclen)).astype(np.float64, copy=False)


def phrase_hits(doc: RowArray, tok: npt.NDArray[np.int32], slots: Sequence[tuple[int, int]]) -> RowArray:
    """Rows (``doc`` of each token) where every slot's term id sits at one start + the slot's offset."""
    keys = []
    for term_id, offset in slots:
        hit = tok[:, 0] == term_id
        start = tok[hit, 1].astype(np.int64) - offset
        ok = start >= 0
        keys.append(np.unique(doc[hit][ok] << 32 | start[ok]))  # each (row, start) once per slot
    found, seen = np.unique(np.concatenate(keys), return_counts=True)
    return np.unique(found[seen == len(slots)] >> 32)


def ranked(row_label: RowArray, rows: RowArray, scores: Floats, k: int | None = None) -> list[tuple[int, float]]:
    """(label, score) of ``rows`` best first, ties to the lower label; the top ``k`` only when given."""
    got = scores[rows]
    if k is not None and len(got) > k:
        # Keep every row tied with the k-th score, so the cut (not only the order) prefers lower labels.
        keep = got >= np.partition(got, len(got) - k)[len(got) - k]
        rows, got = rows[keep], got[keep]
    labels = row_label[rows]  # gathered after the cut: only a few survive it
    order = np.lexsort((labels, -got))[:k]
    return list(zip(labels[order].tolist(), got[order].tolist(), strict=True))


def allowed(labels: RowArray, allow: frozenset[int]) -> npt.NDArray[np.bool_]:
    """Which ``labels`` are in ``allow``, walking whichever of the two is smaller."""
    if len(allow) < len(labels):
        return np.isin(labels, np.fromiter(allow, np.int64, len(allow)))
    return np.fromiter((x in allow for x in labels.tolist()), bool, len(labels))
