"""Connection options for the PostgreSQL store, and the URL handling that keeps passwords out of sight.

The URL is the user's (``postgresql://user:pw@host/db?sslmode=require&schema=team``); everything
except our own ``schema`` parameter is handed to libpq untouched. What we show (``location``,
error messages, logs) is rebuilt from the parsed parts without the password, and any message a
foreign library produces is scrubbed of it before it reaches the user.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Any
from urllib.parse import unquote

import psycopg
from psycopg.conninfo import conninfo_to_dict

from mempager.errors import ConfigError

_SCHEMA = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_URL_PASSWORD = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^:/@?#]*):(?P<pw>[^@/?#]*)@")
_KV_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


@dataclass(frozen=True, kw_only=True, slots=True)
class PgOptions:
    """How the store talks to the server. Every field has a safe default; validated on construction."""

    schema: str = "mempager"  # the PostgreSQL schema holding the store's tables (one store per schema)
    pool_min: int = 1
    pool_max: int = 8
    connect_timeout_s: int = 5  # libpq's connect_timeout (whole seconds, at least 2)
    pool_timeout_s: float = 10.0  # how long a call waits for a pooled connection before StoreError
    statement_timeout_ms: int = 60_000
    claim_seconds: float = 60.0  # how long a claimed embedding job is reserved for its process
    # hnsw.ef_search: 200 matches the embedded store's recall@10 at 100k (0.964 vs hnswlib 0.967; 100 gives
    # 0.929) for about 0.3 ms more per search (benchmarks/results/postgres.md)
    ef_search: int = 200
    hnsw_m: int = 16
    hnsw_ef_construction: int = 64
    write_retries: int = 5  # retries of a write that lost a deadlock or serialization race
    maintenance_work_mem_mb: int = 512  # for compaction's index rebuilds: an HNSW graph built in memory is fast

    def __post_init__(self) -> None:
        if not isinstance(self.schema, str) or not _SCHEMA.match(self.schema):
            raise ConfigError(
                f"schema={self.schema!r} is not usable: use 1-63 lowercase letters, digits and _, "
                "starting with a letter or _"
            )
        checks: dict[str, tuple[float, float]] = {
            "pool_min": (0, 1000),
            "pool_max": (1, 1000),
            "connect_timeout_s": (2, 3600),
            "pool_timeout_s": (0.1, 3600),
            "statement_timeout_ms": (0, 86_400_000),
            "claim_seconds": (1, 86_400),
            "ef_search": (1, 1000),
            "hnsw_m": (2, 100),
            "hnsw_ef_construction": (4, 1000),
            "write_retries": (0, 100),
            "maintenance_work_mem_mb": (1, 1 << 21),
        }
        for name, (lo, hi) in checks.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
                raise ConfigError(f"{name}={value!r} is out of range; use a number from {lo:g} to {hi:g}")
        if self.pool_max < self.pool_min:
            raise ConfigError(f"pool_max={self.pool_max!r} is below pool_min={self.pool_min!r}")
        if self.hnsw_ef_construction < 2 * self.hnsw_m:
            raise ConfigError(
                f"hnsw_ef_construction={self.hnsw_ef_construction!r} must be at least 2 * hnsw_m ({2 * self.hnsw_m})"
            )

    @classmethod
    def names(cls) -> frozenset[str]:
        return frozenset(f.name for f in fields(cls))


def password_of(url: str) -> str | None:
    """The password written in ``url`` (URL or key=value form), for scrubbing messages."""
    m = _URL_PASSWORD.match(url)
    if m and m["pw"]:
        return unquote(m["pw"])
    kv = _KV_PASSWORD.search(url)
    if kv:
        return kv.group(2).strip("'")
    return None


def scrub(text: str, secret: str | None) -> str:
    """``text`` with the password (plain and percent-encoded forms) and any password=... removed."""
    text = _KV_PASSWORD.sub(r"\1***", text)
    text = _URL_PASSWORD.sub(lambda m: f"{m['scheme']}{m['user']}:***@", text)
    if secret:
        for form in {secret, secret.replace(" ", "%20")}:
            text = text.replace(form, "***")
    return text


def split_options(url: str) -> tuple[str, dict[str, str]]:
    """``url`` without our query parameters (``schema=``, ``pool_max=``, ... any PgOptions field),
    and those parameters; libpq would refuse them, and it gets everything else untouched."""
    base, sep, query = url.partition("?")
    if not sep:
        return url, {}
    ours = PgOptions.names()
    kept: list[str] = []
    found: dict[str, str] = {}
    for pair in query.split("&"):
        key, _, value = pair.partition("=")
        if unquote(key) in ours:
            found[unquote(key)] = unquote(value)
        elif pair:
            kept.append(pair)
    return (f"{base}?{'&'.join(kept)}" if kept else base), found


def typed_options(raw: dict[str, str]) -> dict[str, object]:
    """URL parameter strings as the PgOptions field types; ConfigError quoting a value that is not one."""
    out: dict[str, object] = {}
    for name, text in raw.items():
        kind = PgOptions.__dataclass_fields__[name].type
        try:
            out[name] = int(text) if kind == "int" else float(text) if kind == "float" else text
        except ValueError:
            raise ConfigError(f"{name}={text!r} in the PostgreSQL URL is not a {kind}") from None
    return out


def describe(parts: dict[str, str], schema: str) -> str:
    """The store's name as a password-free URL that opens it again: postgresql://user@host:port/db?schema=s."""
    user = parts.get("user", "")
    host = parts.get("host", "")
    socket_dir = host.startswith("/")  # a Unix-socket directory travels as a query parameter
    port = parts.get("port", "")
    where = f"{user + '@' if user else ''}{'' if socket_dir else host}{':' + port if port else ''}"
    query = (f"host={host}&" if socket_dir else "") + f"schema={schema}"
    return f"postgresql://{where}/{parts.get('dbname', '')}?{query}"


def resolve(url: str, options: dict[str, Any]) -> tuple[str, dict[str, str], PgOptions, str | None]:
    """(libpq conninfo, its parsed parts, the validated PgOptions, the password) for ``url`` and ``options``.

    Each option may be given as a keyword or as a URL parameter, not both with different values.
    """
    conninfo, in_url = split_options(url)
    secret = password_of(conninfo)
    unknown = set(options) - PgOptions.names()
    if unknown:
        raise ConfigError(f"unknown PostgreSQL store options {sorted(unknown)}; known: {sorted(PgOptions.names())}")
    for name, value in typed_options(in_url).items():
        if options.setdefault(name, value) != value:
            raise ConfigError(f"{name} given twice: {value!r} in the URL and {options[name]!r} as an option")
    opts = PgOptions(**options)
    try:
        parts = {k: str(v) for k, v in conninfo_to_dict(conninfo).items()}
    except psycopg.Error as exc:
        # not chained: the parser's message quotes the URL, password included
        raise ConfigError(
            f"the PostgreSQL URL could not be parsed ({scrub(str(exc), secret)}); expected "
            "postgresql://user:password@host:5432/dbname?schema=name"
        ) from None
    return conninfo, parts, opts, secret
