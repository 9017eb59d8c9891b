"""The lexical lane's search: BM25 over own text and context keys, through the compiled kernel.

``index/_bm25.c`` walks the query terms' postings with the GIL released; this module hands it the
index's arrays and computes what it must not: idf, with numpy's ``log1p`` (``lexquery.idf_weights``,
which every numpy path uses too), so the scores are the numpy reference's bit for bit
(``index.lexical_context.context_scored`` and ``index.lexical_topk.search_scored``, which tests
hold it to). Same answers as those; on LoCoMo
questions, side by side, 0.47 -> 0.31 ms p50 at 100k memories, 3.2 -> 1.7 ms at 1M; the kernel's
own-text top k by MaxScore, term at a time with a per-row test, then took 1M from 1.88 to 0.99 ms
(benchmarks/results/lexical_kernel.md, ``--before df42269``).

One query: the context terms are spread to the keys that hold them (``Kernel.spread``, giving each
term's df over keys), scored per label (``Kernel.context``), the own-text terms scored per row and
the two added (``Kernel.plain``, the top ``k``), then ``wanted`` is resolved, as late as can be
(the semantic lane searches meanwhile, in another thread), and looked up (``Kernel.lookup``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from mempager.index._bm25 import Kernel
from mempager.index.episodes import Episodes
from mempager.index.lexical_context import spread_terms
from mempager.index.lexical_topk import Wanted, resolve
from mempager.index.lexquery import idf_weights, query_ids

Int32s = npt.NDArray[np.int32]
_NO_ROWS = np.zeros(0, np.int64)
# From this many rows a search (b = 0) prunes (MaxScore, term at a time) instead of summing every
# posting into a row accumulator; below, the accumulator fits the cache and summing costs fewer steps
# a posting. Measured on LoCoMo questions (the kernel's own-text part): at 100k rows summing 0.14 vs
# pruning 0.17 ms, at 1M pruning 1.7 vs summing 4.6 ms (the whole search).
PRUNE_FROM = 262_144


def kernel_of(state: Any) -> Kernel:
    """The state's kernel (its scratch accumulators), made on its first search."""
    kernel: Kernel | None = state.kernel
    if kernel is None:
        kernel = state.kernel = Kernel(prune_from=PRUNE_FROM)
    return kernel


def _postings(state: Any, ids: Sequence[int]) -> list[tuple[Int32s, Int32s]]:
    """(rows, tfs) of each term in use: views, each contiguous (``lexical_postings`` keeps them so)."""
    out = []
    for t, n in zip(ids, state.npost[ids].tolist(), strict=True):
        block = state.post[t]
        out.append((block[0, :n], block[1, :n]))
    return out


def search_scored(
    state: Any, terms: Sequence[str], k: int, wanted: Wanted, episodes: Episodes | None, k1: float, b: float
) -> tuple[list[tuple[int, float]], dict[int, float]]:
    """The top ``k`` (label, BM25) best first, ties to the lower label, and the BM25 of each label in
    ``wanted`` (0.0 when absent or unmatched). With ``episodes`` (placed memories), rare terms score
    on context keys and common ones on own text (``lexical_context.spread_terms``), as
    ``lexical_context.context_scored``; without, every term on own text, as
    ``lexical_topk.search_scored``. Callers hold the index's lock (one search per state at a time)."""
    ids = query_ids(state.ids, state.df, terms)
    if not ids:
        return [], dict.fromkeys(resolve(wanted), 0.0)
    if episodes is not None and len(episodes):
        spread, plain = spread_terms(state, ids)
    else:
        spread, plain = [], ids
    kernel = kernel_of(state)
    n_docs = len(state.label_row)
    base = k1 * (1.0 - b)
    context_rows = _NO_ROWS
    if spread and episodes is not None:
        df = kernel.spread(
            _postings(state, spread),
            state.alive,
            state.row_label,
            episodes.member,
            episodes.prev,
            episodes.next,
            episodes.block_weights,
        )
        idf = idf_weights(n_docs, np.asarray(df, np.float64), k1)
        scale = k1 * b * n_docs / (state.total_len + episodes.extra_length) if b else 0.0
        keys = kernel.context(idf.tolist(), k1, bool(b), scale, base, state.doclen, episodes.key_length)
        context_rows = state.label_row.rows_of(np.frombuffer(keys, np.int64)).astype(np.int64, copy=False)
    own = _postings(state, plain)
    weights = idf_weights(n_docs, state.df[plain].astype(np.float64), k1).tolist()
    scale = k1 * b * n_docs / state.total_len if b else 0.0
    top = kernel.plain(
        own, weights, k1, bool(b), scale, base, state.doclen, state.alive, state.row_label, context_rows, k
    )
    want = resolve(wanted)
    rows = state.label_row.rows_of(np.asarray(want, np.int64)).astype(np.int64, copy=False)
    got = kernel.lookup(rows, own, weights, k1, bool(b), scale, base, state.doclen)
    return top, dict(zip(want, got, strict=True))
