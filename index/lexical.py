"""The lexical lane: Okapi BM25 over memory text, keyed by the store's int64 labels.

Behaviours the owner should know:

* Scoring: ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))`` and
  ``score = sum idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))`` over the distinct query
  terms, where N, df and avgdl count live documents only. Exact: no term is capped or skipped.
  Defaults k1=0.6, b=0, chosen with context keys (``index.lexical_context``) on LoCoMo halves:
  conversations 1-5 and 6-10 each pick this point on their own (benchmarks/results/locomo_levers.md,
  per-half choices; was 1.2 / 0.5 before context keys). b=0 drops length normalisation: a low k1
  saturates term frequency early, so a long memory gains little from repeating a word, and an
  episode's context keys (its own text plus its neighbours') are not penalised for being longer.
* Incremental: each document version gets a fresh *row*; per term, postings are an append-only numpy
  buffer of (row, tf). Removing or replacing a document marks its row dead and updates df, N and the
  total length from that document's own tokens, so a write costs O(terms of the document). Dead
  postings go lazily: per term once they are half of its buffer, and all at once (rebuilt off the
  lock, then swapped in; amortised over the deletes that caused it) once dead rows outnumber live
  ones. A large ``add`` becomes visible in chunks of ``_CHUNK`` documents.
* ``search`` is the retrieval lane: any query term may match. ``match`` is explicit recall with the
  boolean/phrase/prefix syntax of ``index.lexquery``; it returns every matching document.
* Thread safety: writers hold a write lock (one at a time) and take the state lock only to mutate;
  readers take the state lock, so they never see a half-applied write.
* ``save``/``load`` (``index.lexical_files``): a content-named ``.npz`` of the live documents'
  tokens plus ``lexical.json``; ``load`` checks format, tokenizer, size, sha256, counts and the
  owner's ``meta``, and raises IndexStale on any difference (the owner then rebuilds from the
  store). The file names leave room for other indexes in the same directory; one directory has
  one saver at a time.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from mempager.errors import InvalidInput
from mempager.index._bm25 import Kernel
from mempager.index.episodes import ContextConfig, Episodes
from mempager.index.labelmap import LabelRows
from mempager.index.lexical_context import context_scored
from mempager.index.lexical_files import MANIFEST, Docs, load_docs, save_docs
from mempager.index.lexical_postings import PostingLists, to_csr
from mempager.index.lexical_search import search_scored as kernel_scored
from mempager.index.lexical_topk import Wanted, on_postings, resolve
from mempager.index.lexquery import (
    QuerySyntaxError,
    QueryTooBroad,
    allowed,
    bm25,
    evaluate,
    parse_query,
    phrase_hits,
    query_ids,
    ranked,
)
from mempager.index.tokenize import Tokenizer, TokenizerConfig, Vocabulary, grow, ranges
from mempager.types import LabelArray

__all__ = ["MANIFEST", "LexicalIndex", "QuerySyntaxError", "QueryTooBroad"]

Int64s = npt.NDArray[np.int64]
Int32s = npt.NDArray[np.int32]
_MIN_COMPACT = 1024  # dead rows tolerated before a full compaction, whatever the live count
# Postings of one term: a (2, capacity) int32 array, rows in [0] and tf in [1] (each contiguous, so a
# search reads a term's rows without copying them out of an interleaved pair array); index.lexical_postings.
_CHUNK = 8192  # documents added per state-lock hold, so searches interleave with a bulk load


class State:
    """Postings, rows and the token store. Not locked: ``LexicalIndex`` serialises access."""

    def __init__(self, terms: Sequence[str] = ()) -> None:
        self.vocab = Vocabulary(terms)
        self.terms, self.ids = self.vocab.terms, self.vocab.ids  # shared, grown by the vocabulary
        self.post = PostingLists(len(terms))  # per term: rows and tfs, grown on append
        # per term: postings in use, live documents, and postings of dead rows not yet dropped
        self.npost, self.df, self.dead = (np.zeros(len(terms), np.int64) for _ in range(3))
        # per term: an upper bound of tf / norm over its postings, valid at any length scale at or
        # above bound_scale (0: not computed yet; -1: computed at scale 0, b = 0); kept by
        # ``index.lexical_topk``, raised on append
        self.bound_ratio, self.bound_scale = np.zeros(len(terms)), np.zeros(len(terms))
        self.bound_base = 0.0  # the k1 * (1 - b) the ratios were computed with
        self.tf_columns: dict[int, npt.NDArray[np.uint8]] = {}  # common terms' tf per row (lexical_topk)
        self.tf_uses: dict[int, int] = {}  # how often each common term was scored (who keeps a column)
        self.row_label = np.zeros(0, np.int64)
        self.doclen = np.zeros(0, np.float64)
        self.alive = np.zeros(0, bool)
        self.tok_start = np.zeros(0, np.int64)
        self.tok = np.zeros((0, 2), np.int32)  # (term id, position) of every row's tokens
        self.nrows = self.ntok = self.total_len = self.dead_rows = 0
        self.label_row = LabelRows()  # live label -> row (4 bytes a label where labels are dense)
        self.kernel: Kernel | None = None  # the compiled search's scratch (index.lexical_search), made when first asked
        self.sorted_terms: list[str] = []  # the prefix search's view of ``terms``, caught up lazily

    # -- writing ------------------------------------------------------------------------------

    def ingest(self, tokenizer: Tokenizer, raws: Sequence[list[str]]) -> tuple[Int64s, Int32s, Int32s]:
        encoded = self.vocab.encode(tokenizer, raws)
        if len(self.vocab.terms) > len(self.post):
            self.post.extend(len(self.vocab.terms) - len(self.post))
            self.npost, self.df, self.dead = (grow(a, len(self.post)) for a in (self.npost, self.df, self.dead))
            self.bound_ratio, self.bound_scale = (grow(a, len(self.post)) for a in (self.bound_ratio, self.bound_scale))
        return encoded

    def append(self, labels: Sequence[int], counts: Int64s, tok_term: Int32s, tok_pos: Int32s) -> None:
        base = self.nrows
        self._rows(labels, counts, tok_term, tok_pos)
        self._post(np.repeat(np.arange(base, self.nrows, dtype=np.int64), counts), tok_term)

    def _rows(self, labels: Sequence[int], counts: Int64s, tok_term: Int32s, tok_pos: Int32s) -> None:
        """New rows for ``labels`` and their tokens (postings are the caller's)."""
        n, base, tbase = len(labels), self.nrows, self.ntok
        for name in ("row_label", "doclen", "alive", "tok_start"):
            setattr(self, name, grow(getattr(self, name), base + n))
        self.row_label[base : base + n] = labels
        self.doclen[base : base + n] = counts
        self.alive[base : base + n] = True
        self.tok_start[base : base + n] = tbase + np.cumsum(counts) - counts
        self.tok = grow(self.tok, tbase + len(tok_term))
        self.tok[tbase : tbase + len(tok_term), 0] = tok_term
        self.tok[tbase : tbase + len(tok_term), 1] = tok_pos
        self.nrows, self.ntok = base + n, tbase + len(tok_term)
        self.total_len += int(counts.sum())
        self.label_row.set_many(np.asarray(labels, dtype=np.int64), np.arange(base, base + n))

    def _post(self, rows: Int64s, tok_term: Int32s) -> None:
        if not len(rows):
            return
        span = int(rows.max()) + 1
        keys, tf = np.unique(tok_term.astype(np.int64) * span + rows, return_counts=True)
        tids, rows = keys // span, keys % span  # sorted by term, then row: buffers stay row-ordered
        cuts = np.flatnonzero(np.diff(tids)) + 1
        starts, ends = np.concatenate(([0], cuts)), np.concatenate((cuts, [len(tids)]))
        np.add.at(self.df, tids[starts], ends - starts)
        on_postings(self, tids, rows, tf)
        block = np.empty((2, len(keys)), np.int32)
        block[0], block[1] = rows, tf
        post, npost = self.post, self.npost
        for t, s, e in zip(tids[starts].tolist(), starts.tolist(), ends.tolist(), strict=True):
            buf, have = post[t], int(npost[t])
            if not have:  # a term new to the index (all of them when loading): a view, no copy
                post[t] = block[:, s:e]  # exactly full, so the term's next append copies it out
                npost[t] = e - s
                continue
            if have + e - s > buf.shape[1]:
                grown = np.empty((2, max(have + e - s, 2 * buf.shape[1], 2)), np.int32)
                grown[:, :have] = buf[:, :have]
                post[t] = buf = grown
            buf[:, have : have + e - s] = block[:, s:e]
            npost[t] = have + e - s

    def remove(self, labels: Iterable[int]) -> None:
        rows = np.fromiter((r for x in labels if (r := self.label_row.pop(x, None)) is not None), np.int64)
        if not len(rows):
            return
        lengths = self.doclen[rows].astype(np.int64)
        tids = self.tok[ranges(self.tok_start[rows], lengths), 0].astype(np.int64)
        doc = np.repeat(np.arange(len(rows), dtype=np.int64), lengths)
        tids = np.unique(doc * len(self.terms) + tids) % len(self.terms)  # each term once per document
        np.subtract.at(self.df, tids, 1)
        np.add.at(self.dead, tids, 1)
        self.alive[rows] = False
        self.total_len -= int(lengths.sum())
        self.dead_rows += len(rows)
        touched = np.unique(tids)
        for t in touched[2 * self.dead[touched] >= self.npost[touched]].tolist():
            buf = self.post[t][:, : self.npost[t]]
            self.post[t] = buf[:, self.alive[buf[0]]]  # exact size: a term that lost most documents shrinks
            self.npost[t], self.dead[t] = self.post[t].shape[1], 0

    def needs_compaction(self) -> bool:
        return self.dead_rows > max(_MIN_COMPACT, len(self.label_row))

    def docs(self) -> Docs:
        """The live documents, in row order, with the vocabulary reduced to live terms."""
        rows = np.flatnonzero(self.alive[: self.nrows])
        counts = self.doclen[rows].astype(np.int64)
        tok = self.tok[ranges(self.tok_start[rows], counts)]
        live = np.flatnonzero(self.df[: len(self.terms)] > 0)
        remap = np.full(len(self.terms), -1, np.int32)
        remap[live] = np.arange(len(live), dtype=np.int32)
        row_map = np.full(self.nrows, -1, np.int32)
        row_map[rows] = np.arange(len(rows), dtype=np.int32)
        ptr, post = to_csr(self.post, self.npost, live, row_map)
        return Docs(
            self.row_label[rows].copy(),
            counts,
            remap[tok[:, 0]],
            tok[:, 1].copy(),
            [self.terms[t] for t in live.tolist()],
            ptr,
            post,
        )

    @classmethod
    def build(cls, docs: Docs) -> State:
        state = cls(docs.terms)
        if docs.post_ptr is None or docs.post is None:  # a save without postings: index the tokens
            state.append(docs.labels.tolist(), docs.counts, docs.tok_term, docs.tok_pos)
            return state
        state._rows(docs.labels.tolist(), docs.counts, docs.tok_term, docs.tok_pos)
        state.post = PostingLists(len(docs.terms), docs.post_ptr, docs.post)
        state.npost = np.diff(docs.post_ptr)
        state.df = state.npost.copy()  # a save holds live documents only
        return state

    # -- reading ------------------------------------------------------------------------------

    def scores(self, terms: Iterable[str], k1: float, b: float) -> npt.NDArray[np.float64]:
        """BM25 of every row (dead rows too: callers mask them) for the distinct known ``terms``."""
        ids = query_ids(self.ids, self.df, terms)
        if not ids:
            return np.zeros(self.nrows)
        postings = [self.post[t][:, :n].T for t, n in zip(ids, self.npost[ids].tolist(), strict=True)]
        return bm25(postings, self.df[ids], len(self.label_row), self.total_len, self.doclen[: self.nrows], k1, b)

    def rows_with(self, term: str) -> Int64s:
        tid = self.ids.get(term)
        if tid is None:
            return np.empty(0, np.int64)
        rows = self.post[tid][0, : self.npost[tid]].astype(np.int64)
        return rows[self.alive[rows]]

    def all_rows(self) -> Int64s:
        return np.flatnonzero(self.alive[: self.nrows]).astype(np.int64)

    def prefix_terms(self, prefix: str, limit: int) -> list[str]:
        """Live terms starting with ``prefix``, in order, at most ``limit``."""
        fresh = self.terms[len(self.sorted_terms) :]  # terms only ever get appended within a state
        if len(fresh) > 1000:
            self.sorted_terms = sorted(self.terms)
        else:
            for term in fresh:  # a few new terms: inserting beats re-sorting a large vocabulary
                bisect.insort(self.sorted_terms, term)
        out: list[str] = []
        ordered = self.sorted_terms
        i = bisect.bisect_left(ordered, prefix)
        while i < len(ordered) and len(out) < limit and ordered[i].startswith(prefix):
            if self.df[self.ids[ordered[i]]] > 0:
                out.append(ordered[i])
            i += 1
        return out

    def phrase_rows(self, slots: Sequence[tuple[str, int]]) -> Int64s:
        """Rows holding each slot's term at (start + its offset) for one start."""
        by_rarity = sorted({t for t, _ in slots}, key=lambda t: len(self.rows_with(t)))
        rows = self.rows_with(by_rarity[0])
        for term in by_rarity[1:]:
            rows = np.intersect1d(rows, self.rows_with(term), assume_unique=True)
        if len(slots) == 1 or not len(rows):
            return rows
        counts = self.doclen[rows].astype(np.int64)
        tok = self.tok[ranges(self.tok_start[rows], counts)]
        return phrase_hits(np.repeat(rows, counts), tok, [(self.ids[t], off) for t, off in slots])


class LexicalIndex:
    """BM25 over memory text. Labels are the store's int64 labels; a cache derived from the store."""

    def __init__(
        self,
        *,
        k1: float = 0.6,
        b: float = 0.0,
        tokenizer: TokenizerConfig | None = None,
        context: ContextConfig | None = None,
    ) -> None:
        if not (k1 > 0 and 0 <= b <= 1):
            raise InvalidInput(f"BM25 needs k1 > 0 and 0 <= b <= 1, got k1={k1!r}, b={b!r}")
        self.k1, self.b = float(k1), float(b)
        self.tokenizer = Tokenizer(tokenizer or TokenizerConfig())
        self._state = State()
        # context keys (index.episodes): None, or the timeline of the memories that have them
        self.episodes = Episodes(context) if context is not None and context.window > 0 else None
        self._lock = threading.Lock()  # guards reading and mutating the state
        self._write_lock = threading.Lock()  # one writer at a time, so a rebuild can run off the state lock

    def __len__(self) -> int:
        return len(self._state.label_row)

    def __contains__(self, label: object) -> bool:
        return isinstance(label, int | np.integer) and label in self._state.label_row

    def labels(self) -> LabelArray:
        with self._lock:
            return self._state.label_row.labels()

    # -- writes ---------------------------------------------------------------------------------

    def add(
        self, labels: Sequence[int] | LabelArray, texts: Sequence[str], times: Sequence[float] | None = None
    ) -> None:
        """Insert or replace; a label repeated in one call keeps its last text.

        ``times`` (epoch seconds, NaN for none) places each memory in its episode when the index
        has context keys; a memory without a time has none. A large batch becomes visible to
        searches in chunks of ``_CHUNK`` documents.
        """
        label_list = np.asarray(labels, dtype=np.int64).reshape(-1).tolist()
        if len(label_list) != len(texts):
            raise InvalidInput(f"add got {len(label_list)} labels but {len(texts)} texts; pass one text per label")
        if times is not None and len(times) != len(label_list):
            raise InvalidInput(f"add got {len(label_list)} labels but {len(times)} times; pass one time per label")
        latest = dict(zip(label_list, texts, strict=True))
        for text in latest.values():
            if not isinstance(text, str):
                raise InvalidInput(f"lexical index texts must be str, got {type(text).__name__}")
        items = list(latest.items())
        with self._write_lock:
            for lo in range(0, len(items), _CHUNK):
                chunk = items[lo : lo + _CHUNK]
                raws = [self.tokenizer.document_tokens(text) for _, text in chunk]
                with self._lock:
                    state = self._state
                    state.remove(label for label, _ in chunk)
                    counts, tok_term, tok_pos = state.ingest(self.tokenizer, raws)
                    state.append([label for label, _ in chunk], counts, tok_term, tok_pos)
            if self.episodes is not None:
                when = dict(zip(label_list, times if times is not None else [math.nan] * len(label_list), strict=True))
                with self._lock:
                    self._place(list(latest), [when[x] for x in latest])
            self._compact_if_due()

    def place(self, labels: Sequence[int], times: Sequence[float]) -> None:
        """Put indexed memories in their episodes (``times`` in epoch seconds, NaN: none).

        For an index loaded from files, whose episodes the owner reads from its store.
        """
        if self.episodes is None:
            return
        with self._write_lock, self._lock:
            self._place(np.asarray(labels, np.int64).tolist(), np.asarray(times, np.float64).tolist())

    def _place(self, labels: list[int], times: list[float]) -> None:
        assert self.episodes is not None
        lab = np.asarray(labels, np.int64)
        t = np.asarray(times, np.float64)
        rows = self._state.label_row.rows_of(lab)
        keep = ~np.isnan(t) & (rows >= 0)
        self.episodes.remove(lab[~keep].tolist())
        self.episodes.add(lab[keep], t[keep], self._state.doclen[rows[keep]])

    def remove(self, labels: Iterable[int]) -> None:
        wanted = [int(x) for x in labels]
        with self._write_lock:
            with self._lock:
                if self.episodes is not None:
                    self.episodes.remove(wanted)
                self._state.remove(wanted)
            self._compact_if_due()

    def _compact_if_due(self) -> None:
        if self._state.needs_compaction():
            fresh = State.build(self._state.docs())  # readers keep using the old state meanwhile
            with self._lock:
                self._state = fresh

    # -- reads ----------------------------------------------------------------------------------

    def search(self, query: str, k: int, allow: frozenset[int] | None = None) -> list[tuple[int, float]]:
        """Best first by BM25; any query term may match; ties rank the lower label first."""
        terms = self.tokenizer.terms(query)
        if k <= 0 or not terms or (allow is not None and not allow):
            return []
        with self._lock:
            state = self._state
            if self.episodes is not None and len(self.episodes):
                deep = k if allow is None else len(state.label_row)
                top, _ = context_scored(state, terms, deep, (), self.episodes, self.k1, self.b)
                if allow is not None:
                    top = [hit for hit in top if hit[0] in allow]
                return top[:k]
            scores = state.scores(terms, self.k1, self.b)
            rows = np.flatnonzero(scores > 0)  # a bool scan: far cheaper than nonzero on floats
            if state.dead_rows:
                rows = rows[state.alive[rows]]
            if allow is not None:
                rows = rows[allowed(state.row_label[rows], allow)]
            return ranked(state.row_label, rows, scores, k)

    def search_scored(self, query: str, k: int, also: Wanted = ()) -> tuple[list[tuple[int, float]], dict[int, float]]:
        """``search`` plus the BM25 of the documents in ``also`` (0 when absent or unmatched); ``also``
        may be a function giving them, called once the top ``k`` is known (``lanes.retrieval`` has the
        semantic lane search meanwhile, in another thread).

        Fusion needs every candidate's score from every lane, not just each lane's top k. The
        compiled kernel (``index.lexical_search``) walks the query terms' postings once; its
        answers are the numpy reference's (``lexical_context.context_scored`` with episodes,
        ``lexical_topk.search_scored`` without), bit for bit.
        """
        terms = self.tokenizer.terms(query)
        if not terms:
            return [], dict.fromkeys(resolve(also), 0.0)
        with self._lock:
            return kernel_scored(self._state, terms, k, also, self.episodes, self.k1, self.b)

    def spoken_by(self, query: str, labels: Iterable[int]) -> list[int]:
        """The documents among ``labels`` (an iterable read only when the query names a known speaker;
        repeats count once) whose speaker (index.speakers) ``query`` names, in label order."""
        terms = self.tokenizer.named_speakers(query)
        if not terms:
            return []
        with self._lock:
            state = self._state
            ids, df = state.ids, state.df
            tids = [t for t in (ids.get(term) for term in terms) if t is not None and df[t] > 0]
            if not tids:  # the common case, answered before ``labels`` is even read
                return []
            wanted = np.fromiter(labels, np.int64)  # repeats and all: only what was said is made unique
            rows = state.label_row.rows_of(wanted)
            rows = rows[rows >= 0]
            # A document's speaker term is its last token (Tokenizer.document_tokens appends it, and no
            # raw token can be one), so two gathers answer for every candidate, where a binary search
            # in a common speaker's long postings missed the cache once per step.
            length = state.doclen[rows].astype(np.int64)
            has = (length > 0) & state.alive[rows]
            rows, length = rows[has], length[has]
            last = state.tok[state.tok_start[rows] + length - 1, 0]
            said = last == tids[0]  # a query names one or two speakers: np.isin's set-up costs more
            for t in tids[1:]:
                said |= last == t
            out = sorted(set(state.row_label[rows[said]].tolist()))  # np.unique's set-up, likewise
            return out

    def match(self, query: str, allow: frozenset[int] | None = None) -> list[tuple[int, float]]:
        """Every document matching explicit-recall syntax, ranked by BM25 of its positive terms.

        Raises QuerySyntaxError (malformed query) or QueryTooBroad (prefix expands too far).
        """
        parsed = parse_query(query)
        with self._lock:
            state = self._state
            found = evaluate(parsed, state, self.tokenizer)
            if found is None or not len(found.rows):
                return []
            rows = found.rows if allow is None else found.rows[allowed(state.row_label[found.rows], allow)]
            return ranked(state.row_label, rows, state.scores(found.positive_terms, self.k1, self.b))

    # -- persistence ----------------------------------------------------------------------------

    def save(self, directory: Path | str, meta: Mapping[str, Any] | None = None) -> None:
        """Write the index atomically; ``meta`` (plain JSON) is kept for ``load`` to compare."""
        with self._lock:
            docs = self._state.docs()
        save_docs(Path(directory), docs, tokenizer=self.tokenizer.version, k1=self.k1, b=self.b, meta=meta or {})

    def load(self, directory: Path | str, expect_meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Replace the contents with a saved index after verifying it; returns the saved ``meta``.

        Raises IndexStale when anything does not match (rebuild from the store then).
        """
        docs, meta = load_docs(Path(directory), self.tokenizer.version, expect_meta or {})
        state = State.build(docs)
        with self._write_lock, self._lock:
            self._state = state
            if self.episodes is not None:  # the owner places the loaded memories (``place``)
                self.episodes = Episodes(self.episodes.config)
        return meta
