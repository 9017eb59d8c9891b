"""The web inspector's door: a per-run token, a session cookie, CSRF on every change, strict headers.

The store holds the agent's whole memory, so every request but the static files and the login
needs a session:

- ``/login?token=T`` (the link ``mempager ui`` prints) or the login form checks ``T`` in constant
  time and sets a session cookie (HttpOnly, SameSite=Strict), then redirects away from the token.
  A request may instead carry ``Authorization: Bearer T`` (scripts; ``serve --http`` clients).
- Every state-changing request (any method but GET/HEAD/OPTIONS) made with the cookie must also
  carry the session's CSRF token (form field ``csrf_token`` or header ``X-CSRF-Token``), and an
  Origin or Sec-Fetch-Site that says it came from this page; else 403 and nothing runs. The check
  sits here, in front of every route, so no route can forget it.
- Every response carries a Content-Security-Policy that allows only this server's own scripts and
  styles: even a text that escaped escaping could not run.

Sessions live in memory: they end with the process, like the token.
"""

from __future__ import annotations

import hmac
import secrets
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

COOKIE = "mempager_ui"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
MAX_FORM_BYTES = 64 * 1024  # the largest form here is a goal and a query
MAX_SESSIONS = 256  # past it the oldest session ends (one person, a few browsers)
PUBLIC_PATHS = ("/login",)  # what a visitor without a session may fetch, besides /static/
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),  # the login link carries the token: never send it on
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cache-control", b"no-store"),  # pages hold memory text: no copy on disk
)


@dataclass(frozen=True, kw_only=True)
class UiSettings:
    """How one inspector runs. ``token`` never appears in a repr."""

    token: str = field(repr=False)
    admin: bool = False  # may a session switch to another actor
    # Host header names accepted (any port); None when a guard in front already checks Host (serve --http)
    hosts: tuple[str, ...] | None = ("127.0.0.1", "localhost")


@dataclass(frozen=True)
class Session:
    id: str = field(repr=False)
    actor: str
    csrf: str = field(repr=False)


class Sessions:
    """The signed-in browsers of this run, by cookie value; thread-safe (routes run in a pool)."""

    def __init__(self, token: str, limit: int = MAX_SESSIONS) -> None:
        self._token = token.encode()
        self._limit = limit
        self._by_id: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()

    def token_ok(self, given: str) -> bool:
        return hmac.compare_digest(given.strip().encode("utf-8", "replace"), self._token)

    def create(self, actor: str) -> Session:
        session = Session(secrets.token_urlsafe(32), actor, secrets.token_urlsafe(32))
        with self._lock:
            self._by_id[session.id] = session
            while len(self._by_id) > self._limit:
                self._by_id.popitem(last=False)
        return session

    def get(self, session_id: str | None) -> Session | None:
        if not session_id:
            return None
        with self._lock:
            return self._by_id.get(session_id)

    def end(self, session_id: str) -> None:
        with self._lock:
            self._by_id.pop(session_id, None)

    def switch(self, session: Session, actor: str) -> Session:
        """The same browser, now looking at ``actor`` (admin only: the caller checks)."""
        moved = Session(session.id, actor, session.csrf)
        with self._lock:
            if session.id in self._by_id:
                self._by_id[session.id] = moved
        return moved


def route_path(scope: Scope) -> str:
    """The path inside this app (a mount's prefix removed)."""
    path, root = str(scope.get("path", "")), str(scope.get("root_path", ""))
    return path[len(root) :] if root and path.startswith(root) else path


def _host_ok(host: str, allowed: tuple[str, ...]) -> bool:
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host  # "[::1]:8000" is not in the list anyway
    return name.lower() in allowed


def _same_origin(headers: Headers) -> bool:
    """A state change must come from this app's own pages: Origin (or Sec-Fetch-Site) says so."""
    if headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return False
    origin = headers.get("origin")
    return origin is None or urlsplit(origin).netloc == headers.get("host", "")


class Door:
    """ASGI middleware: host check, authentication, CSRF, security headers (see the module doc)."""

    def __init__(self, app: ASGIApp, settings: UiSettings, sessions: Sessions, default_actor: str) -> None:
        self.app = app
        self.settings = settings
        self.sessions = sessions
        self.default_actor = default_actor

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = _with_headers(send)
        headers = Headers(scope=scope)
        if self.settings.hosts is not None and not _host_ok(headers.get("host", ""), self.settings.hosts):
            await PlainTextResponse("Host not allowed: open the address mempager ui printed", 403)(scope, receive, send)
            return
        path = route_path(scope)
        session, by_cookie = self._session(scope, headers)
        unsafe = scope["method"] not in SAFE_METHODS
        if unsafe and not _same_origin(headers):
            await PlainTextResponse("cross-site request refused", 403)(scope, receive, send)
            return
        if session is None and not (path in PUBLIC_PATHS or path.startswith("/static/")):
            await _unauthenticated(scope, path, unsafe)(scope, receive, send)
            return
        if unsafe and by_cookie and session is not None:
            body = await _read_body(receive)
            if body is None:
                await PlainTextResponse("form too large", 413)(scope, receive, send)
                return
            if not _csrf_ok(headers, body, session):
                await PlainTextResponse("missing or wrong CSRF token: reload the page and try again", 403)(
                    scope, receive, send
                )
                return
            receive = _replay(body)
        scope.setdefault("state", {})["session"] = session
        await self.app(scope, receive, send)

    def _session(self, scope: Scope, headers: Headers) -> tuple[Session | None, bool]:
        """The request's session and whether a cookie (an ambient credential: CSRF applies) gave it."""
        scheme, _, credential = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and credential:
            if self.sessions.token_ok(credential):
                return Session("bearer", self.default_actor, ""), False
            return None, False
        cookie = _cookie(headers.get("cookie", ""), COOKIE)
        return self.sessions.get(cookie), True


def _unauthenticated(scope: Scope, path: str, unsafe: bool) -> Response:
    if unsafe or path.startswith("/api/") or Headers(scope=scope).get("hx-request"):
        return PlainTextResponse("sign in first: open the address mempager ui printed (it carries the token)", 401)
    return RedirectResponse(f"{scope.get('root_path', '')}/login", 303)


def _cookie(header: str, name: str) -> str | None:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


def _csrf_ok(headers: Headers, body: bytes, session: Session) -> bool:
    given = headers.get(CSRF_HEADER)
    if given is None and headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        values = parse_qs(body.decode("utf-8", "replace")).get(CSRF_FIELD, [])
        given = values[0] if len(values) == 1 else None
    return given is not None and bool(session.csrf) and hmac.compare_digest(given.encode(), session.csrf.encode())


async def _read_body(receive: Receive) -> bytes | None:
    """The whole body, or None when it is over ``MAX_FORM_BYTES``."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_FORM_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes) -> Receive:
    """The body read for the CSRF check, handed to the route as if unread."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return {"type": "http.disconnect"}

    return receive


def _with_headers(send: Send) -> Callable[[Message], Awaitable[None]]:
    async def sending(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            present = {k.lower() for k, _ in message.get("headers", [])}
            extra = [(k, v) for k, v in SECURITY_HEADERS if k not in present]
            message["headers"] = [*message.get("headers", []), *extra]
        await send(message)

    return sending


def set_session_cookie(response: Response, session: Session, root_path: str, secure: bool) -> None:
    response.set_cookie(
        COOKIE,
        session.id,
        httponly=True,
        samesite="strict",
        secure=secure,
        path=f"{root_path}/" if root_path else "/",
    )
