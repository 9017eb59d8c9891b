"""One client process of the soak benchmark (bench_soak): an MCP session over streamable HTTP,
driving page / remember / forget / recall at a bounded rate, logging every call as one JSON line.

The log is the client's record of what the server acknowledged: a ``remember`` answered with a
``mem://`` uri must be in the store at the end, and a ``forget`` answered without an error must
not be. Lines are flushed one by one, so a client that dies leaves its acknowledgements behind.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

OPS = ("page", "remember", "forget", "recall")
DEFAULT_MIX = "page=70,remember=20,forget=5,recall=5"  # the mix: the store grows 4:1 over the run
WEIGHTS = (70.0, 20.0, 5.0, 5.0)
# A small fixed vocabulary: queries then share words with stored memories, as a real agent's do.
WORDS = tuple(
    f"{a}{b}"
    for a in ("ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "po")
    for b in ("ber", "dan", "fel", "gor", "hup", "lin", "mar", "nox", "pid", "ter", "wol", "yst")
)
_MAX_FAILURES_IN_A_ROW = 50  # the session is gone for good: stop rather than log the same error for an hour
_MAX_LAG_S = 1.0  # a client that fell behind its schedule does not burst to catch up (the rate stays bounded)


@dataclass(frozen=True, slots=True)
class ClientPlan:
    index: int
    url: str
    token: str
    rate: float  # calls per second (Poisson arrivals)
    start_at: float  # epoch seconds
    stop_at: float
    log_path: Path
    seed: int
    weights: tuple[float, ...] = WEIGHTS  # per OPS, summing to 100 (parse_mix)
    # memories written before the server started, this client's share: it may forget them as its own
    prefilled: tuple[str, ...] = ()


def parse_mix(text: str) -> tuple[float, ...]:
    """``page=70,remember=12.5,forget=12.5,recall=5`` -> weights in OPS order; ValueError says what is wrong.

    An op left out weighs 0; the weights must sum to 100 so the mix reads as the share of calls."""
    weights = dict.fromkeys(OPS, 0.0)
    seen: set[str] = set()
    for part in (p.strip() for p in text.split(",")):
        op, sep, value = part.partition("=")
        op = op.strip()
        if not sep or op not in weights:
            raise ValueError(f"--mix entry {part!r}: write op=percent with op one of {', '.join(OPS)}")
        try:
            weight = float(value)
        except ValueError:
            raise ValueError(f"--mix entry {part!r}: {value!r} is not a number") from None
        if not math.isfinite(weight) or weight < 0:
            raise ValueError(f"--mix entry {part!r}: the percent must be a finite number >= 0")
        if op in seen:
            raise ValueError(f"--mix names {op!r} twice")
        seen.add(op)
        weights[op] = weight
    total = sum(weights.values())
    if not math.isclose(total, 100.0, abs_tol=1e-6):
        raise ValueError(f"--mix percents sum to {total:g}, not 100: e.g. {DEFAULT_MIX}")
    return tuple(weights[op] for op in OPS)


def mix_text(weights: tuple[float, ...]) -> str:
    return " / ".join(f"{op} {w:g}%" for op, w in zip(OPS, weights, strict=True))


def run(plan: ClientPlan) -> None:
    """The multiprocessing target."""
    asyncio.run(_drive(plan))


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _error_text(result: Any) -> str:
    parts = [getattr(block, "text", "") for block in result.content]
    return (" ".join(p for p in parts if p) or "tool error without text")[:300]


class _Client:
    def __init__(self, plan: ClientPlan, session: ClientSession, log: TextIO) -> None:
        self.plan = plan
        self.session = session
        self.log = log
        self.rng = random.Random(plan.seed)
        # this client's acknowledged (or prefilled), not yet forgotten memories: forgets take one at random
        self.live: list[str] = list(plan.prefilled)
        self.written = 0

    def _record(self, started: float, op: str, ms: float, error: str | None, **extra: Any) -> None:
        line = {"t": round(started, 4), "op": op, "ms": round(ms, 3), "ok": error is None, **extra}
        if error is not None:
            line["error"] = error
        self.log.write(json.dumps(line) + "\n")

    async def call(self, op: str) -> bool:
        """One call; False when it failed (logged either way)."""
        args: dict[str, Any]
        victim = ""
        if op == "remember":
            self.written += 1
            text = f"soak note {self.plan.index}-{self.written}: {words(self.rng, 10)}"
            name, args = "memory_remember", {"text": text, "tags": [f"client{self.plan.index}"]}
        elif op == "forget":
            victim = self.live.pop(self.rng.randrange(len(self.live)))
            name, args = "memory_forget", {"uri": victim}
        elif op == "recall":
            name, args = "memory_recall", {"query": self.rng.choice(WORDS), "limit": 20}
        else:
            name, args = "memory_page", {"query": words(self.rng, 6)}
        started = time.time()
        t0 = time.perf_counter()
        try:
            result = await self.session.call_tool(name, args)
        except Exception as exc:  # noqa: BLE001 - any failure of the call is the measurement: logged, counted
            self._record(
                started, op, (time.perf_counter() - t0) * 1000, f"{type(exc).__name__}: {exc}"[:300], uri=victim
            )
            return False
        ms = (time.perf_counter() - t0) * 1000
        if result.is_error:
            self._record(started, op, ms, _error_text(result), uri=victim)
            return False
        if op == "remember":
            uri = str((result.structured_content or {}).get("uri", ""))
            if uri.startswith("mem://"):
                self.live.append(uri)
                self._record(started, op, ms, None, uri=uri, text=args["text"])
            else:  # reviewed or gated: not an acknowledged write
                self._record(started, op, ms, f"not stored: {uri}")
                return False
        elif op == "forget":
            self._record(started, op, ms, None, uri=victim)
        else:
            self._record(started, op, ms, None)
        return True

    async def drive(self) -> None:
        next_at = max(time.time(), self.plan.start_at)
        failures = 0
        while True:
            now = time.time()
            if now >= self.plan.stop_at:
                return
            if next_at > now:
                await asyncio.sleep(min(next_at, self.plan.stop_at) - now)
                continue
            next_at = max(next_at, now - _MAX_LAG_S) + self.rng.expovariate(self.plan.rate)
            op = self.rng.choices(OPS, self.plan.weights)[0]
            if op == "forget" and not self.live:
                op = "remember"  # nothing of ours to forget yet: the first calls only
            failures = 0 if await self.call(op) else failures + 1
            if failures >= _MAX_FAILURES_IN_A_ROW:
                self._record(time.time(), "abort", 0.0, f"{failures} failures in a row; client {self.plan.index} stops")
                return


async def _drive(plan: ClientPlan) -> None:
    with plan.log_path.open("a", encoding="utf-8", buffering=1) as log:
        headers = {"Authorization": f"Bearer {plan.token}"}
        # generous timeouts: a slow call is measured (its latency), not turned into a client-side error
        timeout = httpx2.Timeout(120.0, connect=30.0)
        try:
            async with (
                httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
                streamable_http_client(plan.url, http_client=http) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                await _Client(plan, session, log).drive()
        except Exception as exc:  # noqa: BLE001 - a session that could not start or end is an error to report
            line = {"t": time.time(), "op": "session", "ms": 0.0, "ok": False, "error": f"{type(exc).__name__}: {exc}"}
            log.write(json.dumps(line)[:600] + "\n")
