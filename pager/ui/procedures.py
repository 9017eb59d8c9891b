"""Screen 3: procedures (confidence, maturity, counts, decay over time) and the review queue."""

from __future__ import annotations

from datetime import datetime, timezone
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from mempager.errors import InvalidInput, MemoryNotFound
from mempager.ui.charts import decay_chart
from mempager.ui.web import one, pager_of, render, root_of

CHART_PATTERNS = 8  # curves in the overview chart; each pattern has its own chart too


def procedures(request: Request) -> Response:
    p = pager_of(request)
    patterns = sorted(p.patterns(include_inactive=True), key=lambda x: (-x.decayed_confidence, x.label))
    active = [x for x in patterns if x.status == "active" and not x.anti_pattern][:CHART_PATTERNS]
    chart = decay_chart(active, datetime.now(timezone.utc), p.config) if active else None
    return render(
        request,
        "procedures.html",
        patterns=patterns,
        stages=p.pattern_stages(),
        chart=chart,
        pending=len(p.review("pending")),
        ranking=p.pattern_ranking,
    )


def pattern(request: Request) -> Response:
    p = pager_of(request)
    uri = one(request, "uri")
    found = [x for x in p.patterns(include_inactive=True) if x.uri == uri]
    if not found:
        raise MemoryNotFound(f"no pattern {uri} for actor {p.actor!r}; pick one from the procedures list")
    events = [(e.at, e.op) for e in p.history(uri)]
    chart = decay_chart(found[:1], datetime.now(timezone.utc), p.config, events)
    return render(request, "pattern.html", pattern=found[0], chart=chart, history=p.history(uri))


def review(request: Request) -> Response:
    p = pager_of(request)
    status = one(request, "status", "pending")
    if status not in ("pending", "accepted", "rejected", "all"):
        raise InvalidInput(f"status must be pending, accepted, rejected or all, got {status!r}")
    items = p.review(None if status == "all" else status)
    return render(request, "review.html", items=items, status=status, decided=one(request, "decided"))


async def decide(request: Request) -> Response:
    """Accept or reject one item (the door has checked the CSRF token), then back to the queue."""
    form = await request.form()
    decision = str(form.get("decision", ""))
    if decision not in ("accept", "reject"):
        raise InvalidInput(f"decision must be accept or reject, got {decision!r}")
    item_id = request.path_params["item_id"]
    p = pager_of(request)
    uri = await run_in_threadpool(p.decide, item_id, decision == "accept")
    note = f"{decision}ed {item_id}" + (f": wrote {uri}" if uri else "")
    return RedirectResponse(f"{root_of(request)}/review?{urlencode({'decided': note})}", 303)
