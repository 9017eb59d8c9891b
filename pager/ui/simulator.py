"""Screen 2: the page simulator. A goal and a query in; the page ``Pager.page()`` renders and its
report out: sections and their token budgets, what came in from which lane with which rank and
score, and what was cut and why. Nothing is recorded (no ``turn``): simulating changes nothing."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from mempager.paging.page import SALIENCE_TERMS
from mempager.ui.web import many, one, pager_of, render


def simulate(request: Request) -> Response:
    p = pager_of(request)
    query, goal, tags = one(request, "query"), one(request, "goal"), many(request, "tag")
    page = p.page(query, goal=goal or None, tags=tags or None) if query else None
    sections = []
    if page is not None:
        for name, total in page.report.sections.items():
            share = min(100.0, 100.0 * total.tokens / total.budget) if total.budget else 0.0
            sections.append(
                {"name": name, "tokens": total.tokens, "budget": total.budget, "count": total.items, "share": share}
            )
    return render(
        request,
        "simulate.html",
        query=query,
        goal=goal,
        tags=tags,
        page=page,
        text=page.render() if page is not None else "",
        sections=sections,
        salience_terms=SALIENCE_TERMS,
        page_budget=p.config.page_budget_tokens,
    )
