"""The door of ``mempager serve --http``: a bearer token, loopback Host/Origin, body and rate caps.

The store behind the server is the agent's whole memory, and anything that can reach the port
could read or erase it: another local process, or a web page that rebinds its own DNS name to
127.0.0.1. So every request passes, in this order:

1. Host and Origin: the Host header must name a loopback address with the served port
   (``127.0.0.1:P``, ``localhost:P``, ``[::1]:P``) and an Origin, when sent, must be a loopback
   origin (any port: browser tools such as the MCP Inspector serve their page from their own
   port, and still need the token) -- else 403. ``--allow-host``/``--allow-origin`` add values.
   The MCP SDK checks the same lists inside ``/mcp`` (``TransportSecuritySettings``, given the
   lists built here so the two agree), but it answers a foreign Host with 421 and runs after any
   layer in front of it; checking here first answers one status at every path, and a rebinding
   page learns nothing about the token.
2. The token: ``Authorization: Bearer <token>``, compared in constant time -- else 401. Under
   ``own_login`` prefixes (the web inspector at /ui) the app behind checks the same token itself:
   a browser page cannot send the header, so its login trades the token for a session cookie.
3. The rate: a token bucket per client address -- else 429 with Retry-After.
4. The body: capped by the SDK's own ``RequestBodyLimitMiddleware`` (``max_request_body_size``),
   413 when Content-Length or the streamed body exceeds it.

The token comes from ``$MEMPAGER_HTTP_TOKEN``, or from ``<store>.http-token``: created on the
first start (mode 0600, 32 random bytes) and printed once to stderr; later starts print only
where it is. It is never logged: rejections log the method, path, client and reason only, and
uvicorn's access log (off: ``log_config=None`` leaves it below the root WARNING level) never
carries headers.
"""

from __future__ import annotations

import argparse
import hmac
import logging
import os
import re
import secrets
import stat
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from mempager.errors import ConfigError, InsecureTokenFile

log = logging.getLogger("mempager.mcp")

TOKEN_ENV = "MEMPAGER_HTTP_TOKEN"
TOKEN_SUFFIX = ".http-token"
DEFAULT_MAX_BODY_BYTES = 1024 * 1024  # a memory is at most max_text_bytes (1 MB) of text; JSON adds little
DEFAULT_RATE = 100.0  # requests per second per client; an agent makes a few per turn
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
MIN_TOKEN_CHARS = 16
_TOKEN_SHAPE = re.compile(r"[A-Za-z0-9\-._~+/]+=*")  # RFC 6750 b64token: what fits in the header as is
_MAX_CLIENTS = 4096  # buckets kept; past it the full (idle) ones are dropped


@dataclass(frozen=True, kw_only=True)
class GuardOptions:
    """What the operator chose (``serve`` flags); the token is resolved from these at start."""

    token_file: Path | None  # None: a PostgreSQL store, no file beside it; $MEMPAGER_HTTP_TOKEN is required
    allow_hosts: tuple[str, ...] = ()
    allow_origins: tuple[str, ...] = ()
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    rate_per_second: float = DEFAULT_RATE  # 0 disables the rate cap

    def __post_init__(self) -> None:
        if self.max_body_bytes < 1:
            raise ConfigError(f"--max-body-bytes must be at least 1, got {self.max_body_bytes}")
        if not self.rate_per_second >= 0:  # also rejects NaN
            raise ConfigError(f"--rate-limit must be 0 (off) or a positive number, got {self.rate_per_second}")


@dataclass(frozen=True, kw_only=True)
class GuardSettings:
    """Everything the guard checks, for one port. ``token`` never appears in a repr."""

    token: str = field(repr=False)
    hosts: tuple[str, ...]
    origins: tuple[str, ...]
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    rate_per_second: float = DEFAULT_RATE


def options_from_args(args: argparse.Namespace, store: str) -> GuardOptions:
    """``serve``'s flags (pager/cli/main.py) as options; a PostgreSQL store has no file beside it."""
    pg = store.startswith(("postgres://", "postgresql://"))
    return GuardOptions(
        token_file=None if pg else token_path(store),
        allow_hosts=tuple(getattr(args, "allow_host", ())),
        allow_origins=tuple(getattr(args, "allow_origin", ())),
        max_body_bytes=int(_given(args, "max_body_bytes", DEFAULT_MAX_BODY_BYTES)),
        rate_per_second=float(_given(args, "rate_limit", DEFAULT_RATE)),
    )


def _given(args: argparse.Namespace, name: str, default: int | float) -> int | float:
    value = getattr(args, name, None)  # None: the flag was not given (0 is a value: --rate-limit 0)
    return default if value is None else value


def token_path(store: str | Path) -> Path:
    """The token file of a DuckDB store: beside it, like the relay's ``<store>.sock``."""
    return Path(str(Path(store).resolve()) + TOKEN_SUFFIX)


def allowed_hosts(port: int, extra: Sequence[str] = ()) -> tuple[str, ...]:
    """Host header values accepted: the loopback names with ``port``, plus ``extra`` (``name`` gets
    ``:port``; ``name:N`` and ``name:*`` are kept as given)."""
    names = [*LOOPBACK_NAMES, *extra]
    hosts = [n if re.search(r":(\d+|\*)$", n) else f"{n}:{port}" for n in names]
    if port == 80:  # clients leave the default port out of Host
        hosts += [n for n in names if not re.search(r":(\d+|\*)$", n)]
    return tuple(dict.fromkeys(hosts))


def allowed_origins(extra: Sequence[str] = ()) -> tuple[str, ...]:
    """Origin values accepted (when one is sent): loopback origins on any port, plus ``extra``."""
    loopback = [
        f"{scheme}://{name}{port}" for scheme in ("http", "https") for name in LOOPBACK_NAMES for port in ("", ":*")
    ]
    return tuple(dict.fromkeys([*loopback, *(o.rstrip("/") for o in extra)]))


def _matches(value: str, allowed: Sequence[str]) -> bool:
    """Exact, or ``base:*`` for any port: the SDK's ``TransportSecurityMiddleware`` rule."""
    return any(value == a or (a.endswith(":*") and re.fullmatch(re.escape(a[:-2]) + r":\d+", value)) for a in allowed)


def check_token(token: str, where: str) -> str:
    """``token`` if it is usable as a bearer token; the error never quotes it."""
    token = token.strip()
    if len(token) < MIN_TOKEN_CHARS or not _TOKEN_SHAPE.fullmatch(token):
        raise ConfigError(
            f"the HTTP token in {where} must be at least {MIN_TOKEN_CHARS} characters of A-Z a-z 0-9 -._~+/ "
            f"(it has {len(token)}); make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    return token


def resolve_token(options: GuardOptions, environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The token, and the one line to print on stderr about it (it holds the token only when it
    was just generated: the one time the user can be shown it without reading the file)."""
    env = os.environ if environ is None else environ
    given = env.get(TOKEN_ENV, "")
    if given.strip():
        return check_token(given, f"${TOKEN_ENV}"), f"mempager: HTTP bearer token from ${TOKEN_ENV}"
    path = options.token_file
    if path is None:
        raise ConfigError(
            f"serve --http on a PostgreSQL store needs a bearer token in ${TOKEN_ENV} (no file beside the "
            "store to keep one in); make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    try:
        # O_EXCL: two servers starting at once never both write; the loser reads the winner's file
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return read_token_file(path), (
            f"mempager: HTTP bearer token in {path}; clients send the header 'Authorization: Bearer <its contents>'"
        )
    except OSError as exc:
        raise ConfigError(f"cannot create the HTTP token file {path}: {exc}; or set ${TOKEN_ENV}") from exc
    token = secrets.token_urlsafe(32)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(token + "\n")
            out.flush()
            os.fsync(out.fileno())
    except OSError as exc:
        path.unlink(missing_ok=True)  # a half-written file would be refused on every later start
        raise ConfigError(f"cannot write the HTTP token file {path}: {exc}; or set ${TOKEN_ENV}") from exc
    return token, (
        f"mempager: generated an HTTP bearer token, saved in {path} (mode 0600); it is shown only this once. "
        f"Clients send the header 'Authorization: Bearer {token}'"
    )


def read_token_file(path: Path) -> str:
    """The token in ``path``; refused when the file is not a regular file private to this user."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise ConfigError(f"cannot read the HTTP token file {path}: {exc}; or set ${TOKEN_ENV}") from exc
    with os.fdopen(fd, "r", encoding="ascii", errors="replace") as src:
        info = os.fstat(src.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise InsecureTokenFile(f"the HTTP token file {path} is not a regular file; remove it to make a new one")
        if info.st_mode & 0o077 or info.st_uid != os.getuid():
            raise InsecureTokenFile(
                f"the HTTP token file {path} is readable by others (mode {stat.S_IMODE(info.st_mode):o}, owner "
                f"uid {info.st_uid}); anyone who read it could use the server. Run: chmod 600 {path} "
                "(as its owner), or delete it to get a new token"
            )
        return check_token(src.read(4096), str(path))


def settings_for(options: GuardOptions, port: int, token: str) -> GuardSettings:
    return GuardSettings(
        token=token,
        hosts=allowed_hosts(port, options.allow_hosts),
        origins=allowed_origins(options.allow_origins),
        max_body_bytes=options.max_body_bytes,
        rate_per_second=options.rate_per_second,
    )


class _Buckets:
    """One token bucket per client: ``rate`` requests at once, refilled at ``rate`` per second."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self._state: dict[str, tuple[float, float]] = {}  # client -> (tokens, at)

    def take(self, client: str) -> float:
        """0 when the request may go; else the seconds until it could."""
        now = time.monotonic()
        tokens, at = self._state.get(client, (self.rate, now))
        tokens = min(self.rate, tokens + (now - at) * self.rate)
        if tokens < 1:
            self._state[client] = (tokens, now)
            return (1 - tokens) / self.rate
        if len(self._state) >= _MAX_CLIENTS and client not in self._state:
            # a full bucket holds no information: forgetting it changes nothing
            self._state = {c: (t, a) for c, (t, a) in self._state.items() if t + (now - a) * self.rate < self.rate}
        self._state[client] = (tokens - 1, now)
        return 0.0


class HttpGuard:
    """ASGI middleware in front of the MCP app; lifespan events pass through untouched."""

    def __init__(self, app: ASGIApp, settings: GuardSettings, *, own_login: tuple[str, ...] = ()) -> None:
        self.app = app
        self.settings = settings
        # path prefixes whose app checks this same token itself: the web inspector (/ui), whose
        # browser pages cannot send a header, trades the token for a session cookie at its login
        self.own_login = own_login
        self._expected = f"Bearer {settings.token}".encode()
        self._buckets = _Buckets(settings.rate_per_second) if settings.rate_per_second > 0 else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # no websocket surface: refuse it rather than pass it on unchecked
            await send({"type": "websocket.close", "code": 1008})
            return
        headers = Headers(scope=scope)
        client = scope.get("client")
        who = str(client[0]) if client else "unknown"
        path = str(scope.get("path", ""))
        token = not any(path == p or path.startswith(p + "/") for p in self.own_login)
        refusal = self._refusal(headers, who, token)
        if refusal is not None:
            status, reason, extra = refusal
            # what and from where, never a header value that could be the token
            log.info("refused %s %s from %s: %d %s", scope.get("method"), scope.get("path"), who, status, reason)
            await PlainTextResponse(reason, status_code=status, headers=extra)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _refusal(self, headers: Headers, who: str, token: bool = True) -> tuple[int, str, dict[str, str]] | None:
        if not _matches(headers.get("host", ""), self.settings.hosts):
            return 403, "Host not allowed (only loopback; see mempager serve --allow-host)", {}
        origin = headers.get("origin")
        if origin is not None and not _matches(origin, self.settings.origins):
            return 403, "Origin not allowed (only loopback; see mempager serve --allow-origin)", {}
        given = headers.get("authorization", "")
        scheme, _, credential = given.partition(" ")
        candidate = f"Bearer {credential.strip()}" if scheme.lower() == "bearer" else ""
        if token and not hmac.compare_digest(candidate.encode("utf-8", "replace"), self._expected):
            auth = {"WWW-Authenticate": 'Bearer realm="mempager"'}
            return 401, "missing or wrong bearer token (Authorization: Bearer <token>)", auth
        wait = self._buckets.take(who) if self._buckets is not None else 0.0
        if wait > 0:
            return 429, "too many requests (see mempager serve --rate-limit)", {"Retry-After": str(max(1, round(wait)))}
        return None


def transport_security(settings: GuardSettings) -> TransportSecuritySettings:
    """The SDK's own Host/Origin check, given the same lists (its default allows any port of a loopback Host)."""
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=list(settings.hosts), allowed_origins=list(settings.origins)
    )
