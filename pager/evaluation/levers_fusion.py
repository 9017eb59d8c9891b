"""Fusion, expansion and packing on precomputed lane scores, as ``Retriever`` does them.

* fusion: the product's ``score`` fusion (semantic ``(cos - floor) / (1 - floor)``, lexical divided
  by its best score, summed lexical first as ``lanes.fused`` does), or a variant, over the union
  of each lane's top ``depth``;
* the time lane (``lanes.when``): memories created inside the query's dates, up to ``depth`` per
  date range newest first, are candidates, and every candidate inside scores ``time_abs`` more
  (a lane of weight ``time_abs`` whose best score is 1), added after the content lanes;
* the speaker lane (``index.speakers``): every candidate whose speaker the query names scores
  ``speaker`` more (a lane of that weight whose score is 1);
* expansion: session-, neighbour- and time-aware re-scoring (levers the product does not run);
* packing: greedy in fused order, every snippet charged its rendered page line, what scores 0 cut.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import date, datetime, timedelta

import numpy as np

from mempager.evaluation.levers_data import MIN_TRUNCATED_TOKENS, Bools, Conv, Floats, Ints, Knobs
from mempager.evaluation.levers_keys import neighbours


def score_fusion(sem: Floats, lex: Floats, knobs: Knobs) -> Floats:
    """The product's ``score`` fusion over every memory (completions make it depth-free):
    lexical first, then semantic, as ``lanes.fused.fuse_order`` adds them."""
    total = np.zeros(len(sem))
    top = float(lex.max()) if len(lex) else 0.0
    if knobs.w_lex > 0 and top > 0:
        scored = lex > 0
        total[scored] += (lex[scored] - 0.0) * (knobs.w_lex / top)
    span = 1.0 - knobs.floor
    if knobs.w_sem > 0 and span > 0:
        scored = sem > knobs.floor
        total[scored] += (sem[scored] - knobs.floor) * (knobs.w_sem / span)
    return total


def lane_order(scores: Floats, positive: bool) -> Ints:
    """A lane's ranking, best first, ties to the lower label (lexical: matching memories only)."""
    order = np.lexsort((np.arange(len(scores)), -scores))
    return order[scores[order] > 0] if positive else order


def _normalised(scores: Floats, listed: Ints, how: str, floor: float) -> Floats:
    if how == "minmax":
        lo, hi = float(scores[listed].min()), float(scores[listed].max())
        return np.clip((scores - lo) / (hi - lo), 0.0, None) if hi > lo else np.zeros(len(scores))
    if how == "zscore":
        mu, sd = float(scores[listed].mean()), float(scores[listed].std())
        return (scores - mu) / sd if sd > 0 else np.zeros(len(scores))
    if how == "max":
        hi = float(scores[listed].max())
        return np.clip(scores / hi, 0.0, None) if hi > 0 else np.zeros(len(scores))
    # "floor": absolute cosine above the floor
    return np.clip((scores - floor) / (1.0 - floor), 0.0, None)


def fuse_depth(
    sem: Floats, lex: Floats, knobs: Knobs, depth: int, base: Floats, orders: tuple[Ints, Ints]
) -> tuple[Floats, Bools]:
    """Fused score of every memory and which are candidates, for lanes looking ``depth`` deep
    (``orders``: each lane's full ranking, semantic then lexical)."""
    n = len(sem)
    so, lo = orders
    s_list = so[: max(1, int(math.ceil(depth * knobs.sem_depth)))]
    l_list = lo[: max(1, int(math.ceil(depth * knobs.lex_depth)))] if len(lo) else lo
    cand = np.zeros(n, bool)
    cand[s_list] = True
    cand[l_list] = True
    if knobs.fusion == "score":
        return base, cand
    if knobs.fusion == "rrf":
        f = np.zeros(n)
        # lanes.fusion.fuse: lanes in name order, lexical then semantic
        f[l_list] += knobs.w_lex / (knobs.rrf_k + np.arange(1, len(l_list) + 1))
        f[s_list] += knobs.w_sem / (knobs.rrf_k + np.arange(1, len(s_list) + 1))
        return f, cand
    if knobs.fusion in ("minmax", "zscore"):
        ls = _normalised(lex, l_list, knobs.fusion, knobs.floor) if len(l_list) else np.zeros(n)
        ss = _normalised(sem, s_list, knobs.fusion, knobs.floor)
        f = knobs.w_lex * ls + knobs.w_sem * ss
        if knobs.fusion == "zscore":
            f = f - float(f[cand].min()) + 1e-9  # positive, so the page's zero cut keeps its meaning
        return f, cand
    if knobs.fusion == "maxsem":
        ls = _normalised(lex, l_list, "max", knobs.floor) if len(l_list) else np.zeros(n)
        return knobs.w_lex * ls + knobs.w_sem * _normalised(sem, s_list, "max", knobs.floor), cand
    if knobs.fusion == "mnz":
        hits = np.zeros(n)
        hits[s_list] += 1.0
        hits[l_list] += 1.0
        return base * hits, cand
    raise ValueError(f"unknown fusion {knobs.fusion!r}")


_SESSIONS: dict[tuple[str, int], tuple[Ints, int, Floats]] = {}


def sessions_of(conv: Conv) -> tuple[Ints, int, Floats]:
    """Each turn's session as 0..S-1, S, and each session's first day (days since the epoch)."""
    got = _SESSIONS.get((conv.sample_id, conv.n))
    if got is None:
        uniq, where = np.unique(conv.session, return_inverse=True)
        first = [int(np.flatnonzero(where == s)[0]) for s in range(len(uniq))]
        days = np.array([conv.created[i].timestamp() / 86400 for i in first])
        got = _SESSIONS[(conv.sample_id, conv.n)] = (where.astype(np.int64), len(uniq), days)
    return got


def expand(
    f: Floats, cand: Bools, conv: Conv, knobs: Knobs, timed: Bools | None, time_hits: Bools | None = None
) -> tuple[Floats, Bools]:
    """Session-, neighbour- and time-aware re-scoring after the first stage.

    ``timed``: the memories inside the query's dates (they gain the time score); ``time_hits``:
    those the time lane lists as candidates at this depth (``time_lane``; None: all of ``timed``)."""
    timing = (knobs.time_boost or knobs.time_abs) and timed is not None and timed.any()
    if not (knobs.sess_boost or knobs.nb_boost or knobs.dup_penalty or timing):
        return f, cand
    first = np.where(cand, f, 0.0)
    scale = float(first.max())
    if scale <= 0:
        return f, cand
    out, cand = f.copy(), cand.copy()
    if knobs.nb_boost:
        full = np.where(f > 0, f, 0.0)  # a neighbour's score, completed as the lanes complete theirs
        best = np.zeros(len(f))
        for j in neighbours(conv.session, [-1, 1]):
            has = j >= 0
            best[has] = np.maximum(best[has], full[j[has]])
        out = out + knobs.nb_boost * best
    if knobs.sess_boost:
        where, n_sessions, days = sessions_of(conv)
        per = np.zeros(n_sessions)
        if knobs.sess_top == 1:
            np.maximum.at(per, where, first)
        else:
            for s in np.unique(where[first > 0]).tolist():
                per[s] = np.sort(first[where == s])[::-1][: knobs.sess_top].sum()
        if knobs.sess_tau > 0:
            per = np.exp(-np.abs(days[:, None] - days[None, :]) / knobs.sess_tau) @ per
        if per.max() > 0:
            out = out + knobs.sess_boost * scale * (per / per.max())[where]
            if knobs.sess_add:
                best_sessions = np.argsort(-per, kind="stable")[: knobs.sess_add]
                cand |= np.isin(where, best_sessions)
    if timing and timed is not None:
        out = out + (knobs.time_boost * scale + knobs.time_abs) * timed
        cand |= timed if time_hits is None else time_hits
    if knobs.dup_penalty:
        ranked = np.where(cand, out, -np.inf)
        offsets = [d for w in range(1, knobs.dup_window + 1) for d in (-w, w)]
        beaten = np.zeros(len(out), bool)
        for j in neighbours(conv.session, offsets):
            has = j >= 0
            beaten[has] |= ranked[j[has]] > ranked[has]
        out = out - knobs.dup_penalty * scale * beaten
    return out, cand


_SPEAKERS: dict[tuple[str, int, str], list[str | None]] = {}


def speaker_hits(conv: Conv, query: str, stem: str) -> Bools:
    """The memories whose speaker ``query`` names, as the product's lexical index finds them
    (``LexicalIndex.spoken_by``: the same tokeniser and speaker terms)."""
    from mempager.index.tokenize import Tokenizer, TokenizerConfig

    tok = Tokenizer(TokenizerConfig(stem=stem))  # type: ignore[arg-type]
    key = (conv.sample_id, conv.n, stem)
    terms = _SPEAKERS.get(key)
    if terms is None:
        terms = _SPEAKERS[key] = [tok.speaker_term(text) for text in conv.texts]
    named = set(tok.named_speakers(query))
    return np.fromiter((t is not None and t in named for t in terms), bool, conv.n)


def pack(order: Ints, conv: Conv, k: int, budget: int) -> list[int]:
    """``Retriever._pack`` on precomputed line costs: greedy, k and budget, first snippet truncated."""
    out: list[int] = []
    used = 0
    cost, floor = conv.cost, conv.floor
    for i in order.tolist():
        if len(out) >= k or budget - used < floor:
            break
        c = int(cost[i])
        room = budget - used
        if c > room:
            if out:
                continue
            if room - int(conv.prefix[i]) >= MIN_TRUNCATED_TOKENS:  # the first line is cut to fit
                out.append(i)
                used = budget
            continue
        out.append(i)
        used += c
    return out


# -- temporal expressions --------------------------------------------------------------------------


def in_ranges(days: Sequence[date], ranges: Sequence[tuple[date, date]], before: int, after: int) -> Bools:
    """Which memories' days fall in a range widened by ``before``/``after`` days."""
    out = np.zeros(len(days), bool)
    for lo, hi in ranges:
        lo2, hi2 = lo - timedelta(days=before), hi + timedelta(days=after)
        out |= np.fromiter((lo2 <= d <= hi2 for d in days), bool, len(days))
    return out


def time_lists(created: Sequence[datetime], ranges: Sequence[tuple[date, date]], before: int, after: int) -> list[Ints]:
    """Per range (widened), the memories inside it, newest first (``TimeLane.search``'s order)."""
    days = [c.date() for c in created]
    stamps = np.array([c.timestamp() for c in created])
    out = []
    for lo, hi in ranges:
        inside = np.flatnonzero(in_ranges(days, [(lo, hi)], before, after))
        out.append(inside[np.lexsort((-inside, -stamps[inside]))])
    return out


def time_lane(lists: Sequence[Ints], n: int, depth: int) -> Bools:
    """The time lane's candidates when it looks ``depth`` deep: up to ``depth`` per range."""
    out = np.zeros(n, bool)
    for got in lists:
        out[got[:depth]] = True
    return out


def query_years(created: Sequence[datetime]) -> list[int]:
    """The years a month or day without a year is read in (``TimeLane.windows``: oldest to newest)."""
    return list(range(min(c.year for c in created), max(c.year for c in created) + 1)) if created else []
