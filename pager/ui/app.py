"""The web inspector's Starlette app: ``create_app(pagers, settings)``.

    mempager ui --store agent.duckdb              # its own server on 127.0.0.1 (pager/cli/ui_cmd.py)
    mempager serve --http                         # the same app at /ui, behind serve's token

Routes (GET reads, POST changes; the door in ``security`` guards all of them):

    /memories  /memory?uri=   search, browse, one memory          (screen 1)
    /simulate                 the page simulator                  (screen 2)
    /procedures /pattern?uri= patterns, confidence, decay chart   (screen 3)
    /review   POST /review/ID the review queue, accept/reject     (screen 3)
    /continuity               continuity, wraps, diffs, graph     (screen 4)
    /audit                    the audit chain, verified, filtered (screen 5)
    /login  POST /logout  POST /actor (admin)

Pager calls block (the store, the embedder), so routes that only read are plain functions, which
Starlette runs in its thread pool; the few async ones hand pager calls to that pool themselves.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from mempager.errors import InvalidActor, PagerError
from mempager.ui import history, memories, procedures, simulator
from mempager.ui.pagers import Pagers
from mempager.ui.security import COOKIE, Door, Sessions, UiSettings, set_session_cookie
from mempager.ui.web import STATIC, Ui, make_templates, pager_error, render, root_of, session_of, ui_of


def index(request: Request) -> Response:
    return RedirectResponse(f"{root_of(request)}/memories", 303)


async def login(request: Request) -> Response:
    """``?token=`` (the printed link) or the form: a valid token starts a session for the default actor."""
    ui = ui_of(request)
    given = request.query_params.get("token")
    if request.method == "POST":
        given = str((await request.form()).get("token", ""))
    if given is None:
        return render(request, "login.html", failed=False)
    if not ui.sessions.token_ok(given):
        return render(request, "login.html", 401, failed=True)
    session = ui.sessions.create(ui.pagers.default_actor)
    response = RedirectResponse(f"{root_of(request)}/memories", 303)  # away from the token in the address
    set_session_cookie(response, session, root_of(request), secure=request.url.scheme == "https")
    return response


async def logout(request: Request) -> Response:
    ui_of(request).sessions.end(session_of(request).id)  # the cookie is worthless from now on, copied or not
    response = RedirectResponse(f"{root_of(request)}/login", 303)
    response.delete_cookie(COOKIE, path=f"{root_of(request)}/" if root_of(request) else "/")
    return response


async def switch_actor(request: Request) -> Response:
    """Admin only: this browser now looks at another actor's memories."""
    ui = ui_of(request)
    actor = str((await request.form()).get("actor", "")).strip()
    if not (ui.settings.admin and ui.pagers.can_switch):
        raise InvalidActor(f"this inspector shows actor {ui.pagers.default_actor!r} only; start it with --admin")
    await run_in_threadpool(ui.pagers.get, actor)  # opens it (or fails) before the session moves
    ui.sessions.switch(session_of(request), actor)
    return RedirectResponse(f"{root_of(request)}/memories", 303)


ROUTES = [
    Route("/", index),
    Route("/login", login, methods=["GET", "POST"]),
    Route("/logout", logout, methods=["POST"]),
    Route("/actor", switch_actor, methods=["POST"]),
    Route("/memories", memories.memories),
    Route("/memory", memories.memory),
    Route("/simulate", simulator.simulate),
    Route("/procedures", procedures.procedures),
    Route("/pattern", procedures.pattern),
    Route("/review", procedures.review),
    Route("/review/{item_id}", procedures.decide, methods=["POST"]),
    Route("/continuity", history.continuity),
    Route("/audit", history.audit),
    Mount("/static", StaticFiles(directory=str(STATIC)), name="static"),
]


def create_app(pagers: Pagers, settings: UiSettings) -> Starlette:
    """The inspector over ``pagers``; mount it anywhere (``serve --http`` mounts it at /ui)."""
    sessions = Sessions(settings.token)
    app = Starlette(
        routes=ROUTES,
        middleware=[Middleware(Door, settings=settings, sessions=sessions, default_actor=pagers.default_actor)],
        exception_handlers={PagerError: pager_error},
    )
    app.state.ui = Ui(pagers, settings, sessions, make_templates())
    return app
