"""What every route shares: the templates, the session's pager, query parsing, error pages."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates

from mempager.core import Pager
from mempager.errors import InvalidActor, InvalidInput, MemoryNotFound, PagerError
from mempager.patterns import PREFIX as PATTERN_PREFIX
from mempager.patterns import PatternSpec
from mempager.ui.pagers import Pagers
from mempager.ui.security import Session, Sessions, UiSettings

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"


def make_templates() -> Jinja2Templates:
    # autoescape on for every template, whatever its name: every memory text is data, never markup
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,  # a misspelt variable fails the test, not renders empty
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["readable"] = readable
    return Jinja2Templates(env=env)


def readable(text: str) -> str:
    """A stored text as a person reads it: a pattern's spec rendered on one line, not its JSON."""
    if not text.startswith(PATTERN_PREFIX):
        return text
    try:
        return " · ".join(line.strip() for line in PatternSpec.decode(text).render().splitlines())
    except InvalidInput:  # a damaged pattern: its raw text is still the truth
        return text


@dataclass(frozen=True)
class Ui:
    """The app's collaborators, kept on ``app.state.ui``."""

    pagers: Pagers
    settings: UiSettings
    sessions: Sessions
    templates: Jinja2Templates


def ui_of(request: Request) -> Ui:
    ui: Ui = request.app.state.ui
    return ui


def session_of(request: Request) -> Session:
    session: Session = request.scope["state"]["session"]
    return session


def pager_of(request: Request) -> Pager:
    return ui_of(request).pagers.get(session_of(request).actor)


def root_of(request: Request) -> str:
    return str(request.scope.get("root_path", ""))


def render(request: Request, name: str, http_status: int = 200, **context: Any) -> Response:
    ui = ui_of(request)
    session: Session | None = request.scope.get("state", {}).get("session")
    base = {
        "root": root_of(request),
        "actor": session.actor if session else None,
        "csrf": session.csrf if session else "",
        "admin": ui.settings.admin and ui.pagers.can_switch,
        "actors": ui.pagers.actors() if session and ui.settings.admin and ui.pagers.can_switch else [],
        "store": ui.pagers.default.store.location,
        "screen": name.removesuffix(".html"),
    }
    return ui.templates.TemplateResponse(request, name, {**base, **context}, status_code=http_status)


def many(request: Request, name: str) -> list[str]:
    """Every non-empty value of a repeated query parameter (``?type=fact&type=event``)."""
    return [v.strip() for v in request.query_params.getlist(name) if v.strip()]


def one(request: Request, name: str, default: str = "") -> str:
    return request.query_params.get(name, default).strip()


def number(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise InvalidInput(f"{name} must be a whole number, got {raw!r}") from exc
    if not low <= value <= high:
        raise InvalidInput(f"{name} must be between {low} and {high}, got {value}")
    return value


async def pager_error(request: Request, exc: Exception) -> Response:
    """A mempager error as a page that says what went wrong (its message says what to do next)."""
    status = 404 if isinstance(exc, MemoryNotFound) else 403 if isinstance(exc, InvalidActor) else 400
    if not isinstance(exc, PagerError):  # registered for PagerError only; anything else is a real bug
        raise exc
    return render(request, "error.html", status, kind=type(exc).__name__, message=str(exc))
