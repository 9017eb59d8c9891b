"""The rows of bench_locomo_levers: each lever's grid (overrides on the baseline), what it needs in
the product, and the grids the product's shipped constants are re-chosen on per half."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mempager.evaluation.halves import Override

HELPS = 0.002  # a lever "helps" a half when its mean over the ten columns rises at least this much


def _windows(pairs: Sequence[tuple[int, int]], decays: Sequence[float], prefix: str) -> list[Override]:
    return [{f"{prefix}_before": b, f"{prefix}_after": a, f"{prefix}_decay": d} for b, a in pairs for d in decays]


SHARES = (0.3, 0.4, 0.5, 0.6, 0.7)


def _shares(**extra: Any) -> list[Override]:
    return [{"w_sem": s, "w_lex": round(1 - s, 2), **extra} for s in SHARES]


# name -> (what it is, grid of overrides on the baseline). Simpler settings first (ties go to them).
LEVERS: dict[str, tuple[str, list[Override]]] = {
    "lexical keys: neighbouring turns (both sides)": (
        "BM25 indexes each turn with the turns around it in its session; term frequency and length of a "
        "neighbour d turns away weighted decay**d; the page still shows the turn alone",
        _windows([(1, 1), (2, 2), (3, 3), (5, 5), (10, 10)], (0.25, 0.5, 0.7, 1.0), "lex"),
    ),
    "lexical keys: previous turns only": (
        "as above, only turns before it (a turn's keys never change once written)",
        _windows([(1, 0), (2, 0), (3, 0), (5, 0)], (0.25, 0.5, 0.7, 1.0), "lex"),
    ),
    "semantic keys: neighbour vectors averaged in": (
        "the vector index holds v + alpha * sum decay**(d-1) * v_neighbour (renormalised)",
        [
            {"sem_before": b, "sem_after": a, "sem_alpha": al, "sem_decay": d}
            for b, a in ((1, 0), (1, 1), (2, 2), (3, 3))
            for al in (0.25, 0.5, 1.0)
            for d in (0.5, 1.0)
        ],
    ),
    "semantic keys: window text embedded": (
        "MiniLM of (previous turn, turn, next turn) as one text, mixed with the turn's own vector",
        [{"sem_window_text": w} for w in (0.25, 0.5, 0.75, 1.0)],
    ),
    "session expansion": (
        "after fusion, every turn gains boost * max(f) * S(its session) / max S, S = sum of the session's "
        "top fused scores; optionally every turn of the best sessions becomes a candidate",
        [
            {"sess_boost": x, "sess_top": t, "sess_add": a}
            for x in (0.05, 0.1, 0.2, 0.3, 0.5)
            for t in (1, 2, 3)
            for a in (0, 1, 3)
        ],
    ),
    "time-aware session expansion": (
        "as session expansion, S smoothed over sessions by exp(-days apart / tau)",
        [
            {"sess_boost": x, "sess_top": t, "sess_tau": tau}
            for tau in (1.0, 7.0, 30.0)
            for x in (0.05, 0.1, 0.2, 0.3, 0.5)
            for t in (1, 2)
        ],
    ),
    "neighbour-turn propagation": (
        "after fusion, a turn gains boost * the better fused score of the turns right before and after it",
        [{"nb_boost": x} for x in (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)],
    ),
    "temporal expressions in the query": (
        "absolute dates in the question (13 October 2023, May 2023, June, 2022) resolved to day ranges; "
        "a memory whose timestamp falls inside (with slack) gains boost * max(f) and becomes a candidate",
        [
            {"time_boost": x, "time_before": b, "time_after": a}
            for x in (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
            for b, a in ((0, 0), (0, 3), (0, 7), (1, 7), (0, 30))
        ],
    ),
    "session date words in the BM25 keys": (
        "each turn's BM25 keys also hold its timestamp's words (8 May 2023)",
        [{"date_keys": True}],
    ),
    "PRF (RM3), lexical feedback": (
        "lexical query model mixed with the term model of the top BM25 documents",
        [
            {"prf_docs": n, "prf_terms": t, "prf_weight": w}
            for n in (3, 5, 10)
            for t in (5, 10, 20)
            for w in (0.1, 0.2, 0.35, 0.5)
        ],
    ),
    "PRF (RM3), fused feedback": (
        "as above, feedback documents taken from the fused (semantic + lexical) first stage",
        [
            {"prf_docs": n, "prf_terms": t, "prf_weight": w, "prf_source": "fused"}
            for n in (3, 5, 10)
            for t in (5, 10, 20)
            for w in (0.1, 0.2, 0.35, 0.5)
        ],
    ),
    "Snowball stemming (PyStemmer)": (
        "the tokeniser's light stemmer replaced by Snowball English (identifiers untouched)",
        [{"stem": "snowball"}],
    ),
    "score fusion: weights and floor re-tuned": (
        "today's fusion, its semantic share and cosine floor chosen on the other half",
        [{**o, "floor": f} for f in (0.0, 0.1, 0.2, 0.3) for o in _shares()],
    ),
    "RRF": (
        "weighted reciprocal-rank fusion, k and weights tuned",
        [{**o, "rrf_k": k} for k in (1, 5, 10, 20, 60) for o in _shares(fusion="rrf")],
    ),
    "CombMNZ": ("score fusion times the number of lanes whose top list holds the memory", _shares(fusion="mnz")),
    "min-max normalisation": ("each lane min-max normalised over its top list", _shares(fusion="minmax")),
    "z-score normalisation": ("each lane z-scored over its top list", _shares(fusion="zscore")),
    "semantic max-normalised": ("cosine divided by the best cosine, as lexical is", _shares(fusion="maxsem")),
    "per-lane depth": (
        "each lane's depth a multiple of what retrieve searches today",
        [{"sem_depth": s, "lex_depth": x} for s in (0.5, 1.0, 2.0, 4.0) for x in (0.5, 1.0, 2.0, 4.0)],
    ),
    "neighbour redundancy penalty (extra, not an issue lever)": (
        "after fusion, a turn with a better-scored turn of its session within w turns loses p * max(f)",
        [{"dup_penalty": p, "dup_window": w} for p in (0.05, 0.1, 0.2) for w in (1, 2, 3)],
    ),
    "BM25 k1 and b (reference, not an issue lever)": (
        "the lexical index's constants",
        [{"k1": k, "b": b} for k in (0.9, 1.2, 1.5, 2.0) for b in (0.0, 0.25, 0.5, 0.75)],
    ),
    "time lane, absolute weight": (
        "the time lane as the product runs it (pager/lanes/when.py): a memory created inside a date the "
        "question names (up to `time_after` days later) is a candidate and scores time_abs more, an absolute "
        "amount, not a share of the best fused score",
        [{"time_abs": w, "time_after": a} for a in (0, 3) for w in (0.2, 0.3, 0.4, 0.5, 0.6, 0.7)],
    ),
    "context keys for rare terms only": (
        "lexical keys with 2 neighbours each side at decay 0.5, but only for the terms at most "
        "min(max(share * N, 8), 512) memories hold; commoner terms score on own text, own df, own length",
        [{"lex_before": 2, "lex_after": 2, "lex_decay": 0.5, "lex_ctx_share": s} for s in (0.02, 0.05, 0.1, 0.2)],
    ),
    "speaker lane": (
        'a candidate whose speaker prefix ("Caroline: ...") the question names scores w more, an absolute '
        "amount (a lane of weight w scoring 1; index/speakers.py); it adds no candidate",
        [{"speaker": w} for w in (0.05, 0.1, 0.2, 0.3, 0.4, 0.5)],
    ),
}

# The product's defaults after issue 19, each tuned constant's grid around them: which point
# would each half choose, the others held at the product's values?
PRODUCT_TUNED: dict[str, list[Override]] = {
    "BM25 k1, b": [{"k1": k, "b": b} for k in (0.6, 0.9, 1.2) for b in (0.0, 0.25, 0.5)],
    "time lane weight": [{"time_abs": w} for w in (0.2, 0.3, 0.4, 0.5)],
    "context share": [{"lex_ctx_share": s} for s in (0.05, 0.1, 0.2)],
    "speaker lane weight": [{"speaker": w} for w in (0.1, 0.2, 0.3, 0.4)],
}


# What a lever needs in the product, and what it costs (for the levers that help both halves).
# Latencies: index.lexical.LexicalIndex at 100k LoCoMo-turn documents, 300 LoCoMo questions,
# search_scored(q, 50, 50 others), this machine (2 shared cores), measured once for this note.
CHANGES: dict[str, str] = {
    "lexical keys: neighbouring turns (both sides)": (
        "pager/lanes/lexical.py builds each memory's BM25 key from its own text plus the texts of the memories "
        "next to it in created_at order within one episode (same actor, consecutive created_at closer than a "
        "gap such as 30 min, or an explicit session/thread id), neighbour d away weighted decay**d. "
        "index/lexical.py: `LexicalIndex.add(labels, texts, context=[[(text, weight), ...]])` with fractional tf "
        "(postings' tf column int32 -> float32, document length the weighted sum) and a tokenizer/manifest "
        "version bump so saved indexes rebuild; the store's text and the page are unchanged. Ingest: each new "
        "memory reads its neighbours' texts from the mirror and re-indexes the `after` memories before it "
        "(their keys gain its text); forget/update re-index the neighbours too. Lexical-index ingest "
        "78k -> 23k docs/s (2+2 window) / 12k (5+5); query: postings ~(1+before+after)x longer, search p50 "
        "0.23 -> 0.33 ms (2+2) / 0.46 ms (5+5) at 100k."
    ),
    "lexical keys: previous turns only": (
        "as the both-sides window, but a memory's key only takes the memories before it: a key never changes "
        "once written (no re-index of older memories at ingest, only at forget/update). Ingest 78k -> 27k "
        "docs/s (3 before); search p50 0.23 -> 0.34 ms at 100k."
    ),
    "semantic keys: neighbour vectors averaged in": (
        "pager/lanes/semantic.py indexes normalise(v + alpha * sum decay**(d-1) v_neighbour) over the same "
        "episode window; the store keeps each memory's own vector (the key is recomputed from it, no "
        "re-embedding). Ingest: a new memory's key is a few vector adds, and its `after` predecessors' keys "
        "are replaced in HNSW (remove + add). Query: no change (scores_for reads the key vectors)."
    ),
    "semantic keys: window text embedded": (
        "the embedder sees (previous, turn, next) as one text: ~3x the tokens to embed per memory, and the "
        "previous memory re-embedded when its next arrives; weaker than averaging vectors, which costs nothing."
    ),
    "session expansion": (
        "pager/lanes/retrieval.py after fusion: candidates grouped by episode (created_at gap), each gains "
        "boost * max(f) * S(episode)/max S (S = best fused score in it) and the best episode's turns become "
        "candidates (their lane scores by scores_for / search_scored's `also`): one created_at-range read and "
        "completions for ~30 labels per query (tens of µs); no ingest cost."
    ),
    "time-aware session expansion": "as session expansion, S smoothed across episodes by exp(-days apart / tau).",
    "neighbour-turn propagation": (
        "pager/lanes/retrieval.py after fusion: each candidate gains boost * the better fused score of the "
        "memories right before and after it in its episode (their scores completed as above); no ingest cost."
    ),
    "temporal expressions in the query": (
        "a new kernel step (e.g. pager/lanes/when.py): absolute dates in the query (13 October 2023, May 2023, "
        "a month or a year alone; month names case-sensitive) resolved to day ranges, widened by the slack; the "
        "memories whose created_at falls inside (a created_at range read, Store.query since/until) become "
        "candidates and gain boost * max(f). Query: a regex pass (~10 µs); the range read and completions "
        "only when the query holds a date. No ingest cost."
    ),
    "session date words in the BM25 keys": (
        "the lexical key also holds created_at's words (day, month name, year): ingest only, a few terms "
        "per memory; redundant once query dates are resolved."
    ),
    "PRF (RM3), lexical feedback": (
        "a second BM25 pass with up to 20 expansion terms from the top 3 documents: ~2-3x the lexical "
        "lane's query cost for +0.003..0.005; not worth it."
    ),
    "Snowball stemming (PyStemmer)": (
        "index/tokenize.py: StemMode 'snowball' (PyStemmer English, a C extension: a new dependency) for "
        "alphabetic words and identifier parts, stopwords dropped before stemming; TOKENIZER_VERSION bump "
        "(saved lexical indexes rebuild once). Cost: one stemWord per distinct token (memoised) — negligible."
    ),
    "BM25 k1 and b (reference, not an issue lever)": "index/lexical.py defaults (k1, b); no cost.",
    "time lane, absolute weight": (
        "shipped: pager/lanes/when.py, lane_weights['time'] and time_after_days in PagerConfig. Query: a regex "
        "pass; a created_at range read and completions only when the query names a date."
    ),
    "context keys for rare terms only": (
        "shipped: index/lexical_context.py spread_terms (SPREAD_SHARE, SPREAD_FLOOR, SPREAD_CAP): the common "
        "terms take the exact pruned own-text path, so a query spreads only the postings of rare terms."
    ),
    "speaker lane": (
        "shipped: index/speakers.py, lane_weights['speaker'] in PagerConfig. Ingest: a regex match per memory and "
        "one more term in the lexical index for a memory with a speaker prefix (TOKENIZER_VERSION bump: saved "
        "lexical indexes rebuild once). Query: 1-3 word runs of the query looked up in the vocabulary, then a "
        "binary search per candidate in the named speakers' postings; nothing when the query names no speaker."
    ),
}
