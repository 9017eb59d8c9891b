"""Screens 4 and 5: continuity, wrap history with diffs, the association graph; the audit chain."""

from __future__ import annotations

import difflib
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from mempager.ui.graph import layout
from mempager.ui.web import number, one, pager_of, render

VERSIONS = 20
# the metrics a saved wrap records (consolidation/wrap.py ``_metrics``), the ones `mempager diff` shows
DIFF_COLUMNS = ("episodes", "patterns_1x", "patterns_2x", "patterns_3x", "graduated", "demoted", "held", "links")
WRAPS = 20


def continuity(request: Request) -> Response:
    p = pager_of(request)
    versions = p.consolidation.versions(VERSIONS)  # newest first
    diffs = []
    for i, newer in enumerate(versions):
        older = versions[i + 1] if i + 1 < len(versions) else None
        before = older.text.splitlines() if older is not None else []
        lines = list(difflib.unified_diff(before, newer.text.splitlines(), lineterm="", n=2))[2:]
        diffs.append({"version": newer, "lines": [_diff_line(line) for line in lines]})
    wraps = [w for w in reversed(p.consolidation.wraps(WRAPS))]  # oldest first, for the deltas
    rows: list[dict[str, Any]] = []
    previous: dict[str, Any] | None = None
    for w in wraps:
        values = {c: int(w.metrics.get(c, 0) or 0) for c in DIFF_COLUMNS}
        deltas = {c: values[c] - previous[c] for c in DIFF_COLUMNS} if previous is not None else {}
        rows.append({"wrap": w, "metrics": values, "deltas": deltas})
        if w.status == "saved":
            previous = values
    # the graph: the store's consolidation links, as `mempager graph` reads them (no Pager API yet)
    links = p.store.consolidation.links(p.actor)
    ends = sorted({x for k in links for x in (k.a, k.b)})
    graph = layout(links, p.store.get_many(p.actor, ends))
    return render(
        request,
        "continuity.html",
        current=p.continuity(),
        diffs=diffs,
        wraps=list(reversed(rows)),
        columns=DIFF_COLUMNS,
        graph=graph,
    )


def _diff_line(line: str) -> dict[str, str]:
    kind = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "same")
    return {"kind": kind, "text": line}


def audit(request: Request) -> Response:
    p = pager_of(request)
    since = one(request, "since", "7d")
    op, uri = one(request, "op"), one(request, "uri")
    limit = number(request, "limit", 500, 1, 100_000)
    entries = p.audit(since=since or None, limit=limit)
    ops = sorted({e.op for e in entries})
    shown = [e for e in entries if (not op or e.op == op) and (not uri or uri in e.uri)]
    return render(
        request,
        "audit.html",
        entries=list(reversed(shown)),  # newest first
        report=p.verify_audit(),
        ops=ops,
        op=op,
        uri=uri,
        since=since,
        limit=limit,
        truncated=len(entries) >= limit,
    )
