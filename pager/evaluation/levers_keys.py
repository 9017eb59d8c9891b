"""What each lane indexes for a memory, under a ``Knobs``: BM25 over own text or context keys, key vectors.

* lexical: Okapi BM25 over the terms of the product's own tokeniser (``index.tokenize``), scored
  operation for operation as ``index.lexquery.bm25`` does; with a window, a memory's keys are its
  text plus its session's neighbours (``index.lexical_context``: weighted term frequencies and
  lengths, df over keys, and the common terms on own text, own df and own average length);
* semantic: the memory's MiniLM vector, or one with its neighbours' averaged in or its window's
  text embedded.

LoCoMo's sessions are the product's episodes (no two turns of one session more than 30 minutes
apart, no two sessions closer), so neighbours are taken within a session.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from mempager.evaluation.levers_data import Conv, Floats, Ints, Knobs, VectorCache
from mempager.index.lexical_context import SPREAD_CAP, SPREAD_FLOOR
from mempager.index.tokenize import Tokenizer, TokenizerConfig

# -- lexical lane: what BM25 indexes for a memory ----------------------------------------


class Analyzer:
    """The product tokeniser's terms (``index.tokenize``) under one stemming mode."""

    def __init__(self, stem: str) -> None:
        if stem not in ("snowball", "light", "plural", "none"):
            raise ValueError(f"unknown stem mode {stem!r}")
        self.stem = stem
        self._tok = Tokenizer(TokenizerConfig(stem=stem))  # type: ignore[arg-type]

    def document(self, text: str) -> list[str]:
        return list(self._tok.analyse(text)[0])

    def query(self, text: str) -> list[str]:
        return list(dict.fromkeys(self._tok.terms(text)))


_ANALYZERS: dict[str, Analyzer] = {}


def analyzer(stem: str) -> Analyzer:
    if stem not in _ANALYZERS:
        _ANALYZERS[stem] = Analyzer(stem)
    return _ANALYZERS[stem]


def window_weights(before: int, after: int, decay: float) -> list[tuple[int, float]]:
    """(offset, weight) of the turns folded into a memory's keys, itself included at weight 1."""
    return [(0, 1.0)] + [(-d, decay**d) for d in range(1, before + 1)] + [(d, decay**d) for d in range(1, after + 1)]


def neighbours(session: Ints, offsets: Sequence[int]) -> list[Ints]:
    """For each offset, the index of the turn that far away in the same session (-1: none)."""
    n = len(session)
    idx = np.arange(n)
    out = []
    for off in offsets:
        j = idx + off
        ok = (j >= 0) & (j < n)
        j = np.where(ok, j, 0)
        out.append(np.where(ok & (session[j] == session), j, -1))
    return out


_OWN: dict[tuple[str, int, str, bool], tuple[dict[str, int], Floats, Floats]] = {}


def own_terms(conv: Conv, stem: str, date_keys: bool) -> tuple[dict[str, int], Floats, Floats]:
    """Vocabulary, term frequencies (memories x terms) and lengths of each memory's own keys."""
    key = (conv.sample_id, conv.n, stem, date_keys)
    got = _OWN.get(key)
    if got is None:
        a = analyzer(stem)
        docs = [a.document(t) for t in conv.texts]
        if date_keys:
            docs = [d + a.document(f"{c.day} {c:%B %Y}") for d, c in zip(docs, conv.created, strict=True)]
        vocab: dict[str, int] = {}
        for d in docs:
            for t in d:
                vocab.setdefault(t, len(vocab))
        own = np.zeros((conv.n, len(vocab)), np.float64)
        rows = np.repeat(np.arange(conv.n), [len(d) for d in docs])
        cols = np.fromiter((vocab[t] for d in docs for t in d), np.int64)
        np.add.at(own, (rows, cols), 1.0)
        lens = np.array([len(d) for d in docs], np.float64)
        got = _OWN[key] = (vocab, own, lens)
    return got


class Bm25:
    """BM25 of one conversation's memories under one ``Knobs.lex_key`` (keys may be richer than text).

    Term frequencies are weighted sums over the window (``lex_decay``), the document length is the
    same weighted sum of lengths, df counts documents whose keys hold the term. With no window it
    is the product's index exactly (``index.lexquery.bm25``'s arithmetic, same order).
    """

    def __init__(self, conv: Conv, knobs: Knobs) -> None:
        self.analyzer = analyzer(knobs.stem)
        self.k1, self.b = knobs.k1, knobs.b
        self.vocab, own, lens = own_terms(conv, knobs.stem, knobs.date_keys)
        n = conv.n
        tf, dl = own.copy(), lens.copy()
        weights = window_weights(knobs.lex_before, knobs.lex_after, knobs.lex_decay)[1:]
        for (_, w), j in zip(weights, neighbours(conv.session, [o for o, _ in weights]), strict=True):
            has = j >= 0
            tf[has] += w * own[j[has]]
            dl[has] += w * lens[j[has]]
        self.tf = tf  # dense: a conversation is ~600 memories and ~3k terms
        self.own = own
        self.lens = lens
        self.doclen = dl
        self.df = ((own if knobs.lex_own_df else tf) > 0).sum(axis=0).astype(np.int64)
        self.own_df = (own > 0).sum(axis=0).astype(np.int64)
        self.n_docs = n
        # index.lexical_context.spread_terms: context keys only for terms at most `limit` own texts hold
        share = knobs.lex_ctx_share
        self.limit = math.inf if share >= 1.0 else min(max(share * n, SPREAD_FLOOR), SPREAD_CAP)
        self.total_len = float(dl.sum())
        self._columns: dict[int, Floats] = {}

    def column(self, t: int) -> Floats:
        """Every memory's BM25 contribution of term ``t`` (0 where it lacks it)."""
        got = self._columns.get(t)
        if got is None:
            plain = self.own_df[t] > self.limit
            tf = self.own[:, t] if plain else self.tf[:, t]
            rows = np.flatnonzero(tf > 0)
            df = float(self.own_df[t] if plain else self.df[t])
            weight = np.log1p((self.n_docs - df + 0.5) / (df + 0.5)) * (self.k1 + 1.0)
            f = tf[rows].copy()
            lens, total = (self.lens, float(self.lens.sum())) if plain else (self.doclen, self.total_len)
            norm = lens[rows].copy()  # operation for operation as index.lexquery.bm25
            norm *= self.k1 * self.b * self.n_docs / total
            norm += self.k1 * (1.0 - self.b)
            norm += f
            np.divide(f, norm, out=f)
            f *= weight
            got = np.zeros(self.n_docs)
            got[rows] = f
            self._columns[t] = got
        return got

    def ids(self, terms: Sequence[str]) -> list[int]:
        return [i for i in dict.fromkeys(self.vocab.get(t, -1) for t in terms) if i >= 0 and self.df[i] > 0]

    def scores(self, weighted: Sequence[tuple[int, float]]) -> Floats:
        """Sum of term contributions in query order, each times its query weight (1: untouched)."""
        out = np.zeros(self.n_docs)
        for t, w in weighted:
            out = out + (self.column(t) if w == 1.0 else w * self.column(t))
        return out

    def rm3(self, first: Floats, query: Sequence[int], knobs: Knobs, feedback: Ints) -> list[tuple[int, float]]:
        """RM3: the query model mixed with a relevance model of the feedback documents.

        P(t|R) = sum over feedback documents of p(d) * tf(t, d) / |d| (their own text, p(d) from
        ``first``); terms held by more than a tenth of the memories (speaker names) are left out.
        """
        if not len(feedback):
            return [(t, 1.0) for t in query]
        p = np.maximum(first[feedback], 0.0)
        p = p / p.sum() if p.sum() > 0 else np.full(len(feedback), 1.0 / len(feedback))
        rel = (p[:, None] * self.own[feedback] / np.maximum(self.lens[feedback], 1.0)[:, None]).sum(axis=0)
        rel[self.df > 0.1 * self.n_docs] = 0.0
        top = np.argsort(-rel, kind="stable")[: knobs.prf_terms]
        top = top[rel[top] > 0]
        model: dict[int, float] = {t: (1.0 - knobs.prf_weight) / max(len(query), 1) for t in query}
        total = float(rel[top].sum())
        for t in top.tolist():
            model[t] = model.get(t, 0.0) + knobs.prf_weight * float(rel[t]) / total
        return list(model.items())


# -- semantic lane: what the vector index holds for a memory -----------------------------


def window_text(conv: Conv, before: int, after: int) -> list[str]:
    """Each turn with its neighbours of the same session, in order, one per line."""
    offs = list(range(-before, after + 1))
    near = neighbours(conv.session, offs)
    return ["\n".join(conv.texts[int(j[i])] for j in near if j[i] >= 0) for i in range(conv.n)]


def semantic_keys(conv: Conv, knobs: Knobs, cache: VectorCache | None) -> npt.NDArray[np.float32]:
    """The vectors the semantic lane indexes for each memory under ``knobs``."""
    v = conv.vectors.astype(np.float64)
    if knobs.sem_window_text > 0:
        if cache is None:
            raise ValueError("window-text vectors need the vector cache")
        w = cache.get(window_text(conv, 1, 1)).astype(np.float64)  # the one window embedded
        v = (1.0 - knobs.sem_window_text) * v + knobs.sem_window_text * w
    elif knobs.sem_alpha > 0:
        acc = v.copy()
        offsets = [o for o, _ in window_weights(knobs.sem_before, knobs.sem_after, 1.0)[1:]]
        for off, j in zip(offsets, neighbours(conv.session, offsets), strict=True):
            has = j >= 0
            acc[has] += knobs.sem_alpha * knobs.sem_decay ** (abs(off) - 1) * v[j[has]]
        v = acc
    else:
        return conv.vectors
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v.astype(np.float32)
