"""Screen 1: memories. Search (``recall``'s syntax and filters, or ``retrieve``'s fused lanes),
browse by type/source/tag/time, and one memory with its provenance, vectors, lanes and audit."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response

from mempager.core import Pager
from mempager.patterns import Pattern
from mempager.types import Memory, MemoryType, Source
from mempager.ui.web import many, number, one, pager_of, render

PAGE_SIZE = 50


def memories(request: Request) -> Response:
    p = pager_of(request)
    query = one(request, "q") or None
    mode = "retrieve" if one(request, "mode") == "retrieve" and query else "recall"
    types, sources, tags = many(request, "type"), many(request, "source"), many(request, "tag")
    since, until = one(request, "since") or None, one(request, "until") or None
    offset = number(request, "offset", 0, 0, 10_000_000)
    rows: list[Memory] = []
    snippets: list[Any] = []
    if mode == "retrieve" and query is not None:
        # the page fault: every lane fused; type/source/time filters are recall's, not the lanes'
        snippets = p.retrieve(query, k=PAGE_SIZE, tags=tags or None)
    else:
        rows = p.recall(
            query,
            types=types or None,
            since=since,
            until=until,
            limit=PAGE_SIZE + 1,  # one more than shown: is there a next page
            offset=offset,
            source=sources or None,
            tags=tags or None,
        )
    stats = p.stats()
    kept = [(k, v) for k, v in request.query_params.multi_items() if k != "offset"]
    more = len(rows) > PAGE_SIZE
    return render(
        request,
        "memories.html",
        query=query or "",
        mode=mode,
        types=types,
        sources=sources,
        tags=tags,
        since=since or "",
        until=until or "",
        offset=offset,
        page_size=PAGE_SIZE,
        rows=rows[:PAGE_SIZE],
        prev_query=urlencode([*kept, ("offset", max(0, offset - PAGE_SIZE))]) if offset else None,
        next_query=urlencode([*kept, ("offset", offset + PAGE_SIZE)]) if more else None,
        snippets=snippets,
        all_types=[t.value for t in MemoryType],
        all_sources=[s.value for s in Source],
        by_type=stats["by_type"],
        stats=stats,
    )


def memory(request: Request) -> Response:
    p = pager_of(request)
    m = p.get(one(request, "uri"))
    pattern = _pattern(p, m) if m.type is MemoryType.PATTERN else None
    return render(
        request,
        "memory.html",
        m=m,
        history=p.history(m.uri),
        vectors=_vectors(p, m),
        lanes=_lanes(p, m),
        derived_from=[str(u) for u in m.metadata.get("derived_from", ()) or ()],
        metadata=json.dumps(
            {k: v for k, v in m.metadata.items() if k != "derived_from"}, indent=2, ensure_ascii=False, default=str
        ),
        pattern=pattern,
    )


def _pattern(p: Pager, m: Memory) -> Pattern:
    found = [x for x in p.patterns(include_inactive=True) if x.uri == m.uri]
    return found[0] if found else Pattern.from_memory(m)


def _vectors(p: Pager, m: Memory) -> list[dict[str, Any]]:
    """Which embedding models hold a vector of this memory. Read from the store (the Pager API
    counts vectors per model, not per memory)."""
    out = []
    for model, count in sorted(p.store.vector_models(p.actor).items()):
        has = bool((p.store.vector_labels(p.actor, model) == m.label).any())
        out.append({"model": model, "has": has, "count": count, "active": model == p.semantic.model})
    return out


def _lanes(p: Pager, m: Memory) -> list[dict[str, str]]:
    """How each lane can reach this memory (what ``retrieve`` fuses)."""
    vectors = {v["model"] for v in _vectors(p, m) if v["has"]}
    semantic = (
        f"vector of {p.semantic.model}" if p.semantic.model in vectors else f"waiting for a {p.semantic.model} vector"
    )
    salience = (
        "ranked by recency, importance, strength, access"
        if m.type in p.config.salience_types
        else f"not in the salience lane (types: {', '.join(t.value for t in p.config.salience_types)})"
    )
    return [
        {"lane": "lexical", "state": "indexed (BM25 over every live memory's text)"},
        {"lane": "semantic", "state": semantic},
        {"lane": "salience", "state": salience},
    ]
