"""Screenshots of the web inspector (`mempager ui`), one PNG per screen, for the README.

    python -m benchmarks.ui_screenshots [--out benchmarks/results/ui] [--embedder auto|hash]

Seeds a store in a temp dir with a small agent's life (identity, rules, facts, events, learned
procedures with feedback at different ages, memories an LLM proposed that wait for review, two
session wraps with a continuity and association links), serves the inspector on 127.0.0.1 in
this process and drives the Debian chromium headless through Playwright (never Playwright's own
browser download). Prints how long each screen took to load, as the browser saw it.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import urlencode

import mempager
from mempager import PagerConfig, PatternSpec
from mempager.consolidation.report import Episode
from mempager.ui import Pagers, UiSettings, create_app
from mempager.ui.serving import CHROMIUM, CHROMIUM_ARGS, UiServer

OUT = Path(__file__).resolve().parent / "results" / "ui"
NOW = datetime.now(timezone.utc)

FACTS = [
    ("The production database is PostgreSQL 16 on db-prod-2.internal.", ["infra"]),
    ("Deploys go through the release/* branches; main is never deployed directly.", ["deploy"]),
    ("The staging cluster is rebuilt every Monday at 06:00 UTC.", ["infra", "staging"]),
    ("Feature flags live in flags.yaml and are read at boot, not per request.", ["config"]),
    ("The payments service times out after 30 s; retries are idempotent by order id.", ["payments"]),
    ("Customer exports are generated nightly into s3://acme-exports/daily/.", ["data"]),
]
EVENTS = [
    ("Friday deploy of release/2.14 failed: the users migration locked the table for 4 minutes.", 20),
    ("Rolled back release/2.14; added a lock_timeout of 5 s to migrations.", 20),
    ("Tuesday deploy of release/2.15 went through in 7 minutes with the online migration.", 16),
    ("Payments incident: a retry storm after the 30 s timeout doubled charges for 12 orders.", 9),
    ("Refunded the 12 double-charged orders; added an idempotency key check.", 9),
    ("The user asked for shorter status updates, bullet points only.", 3),
]
PATTERNS = [
    (
        PatternSpec(
            name="Deploy with online migrations",
            trigger="a release has a schema migration",
            steps=["run the migration with lock_timeout=5s", "deploy on Tuesday-Thursday", "watch p95 for 10 min"],
            gotchas=["never on Friday"],
        ),
        10,
        ["success", "success", "success", "success"],
    ),
    (
        PatternSpec(
            name="Payments retry hygiene",
            trigger="payments errors or timeouts",
            steps=["check the idempotency key", "retry with backoff", "page on-call after 3 failures"],
        ),
        12,
        ["success", "failure", "success"],
    ),
    (
        PatternSpec(
            name="Status update format", trigger="writing a status update", steps=["three bullets: done, next, blocked"]
        ),
        3,
        ["success"],
    ),
    (
        PatternSpec(
            name="Hotfix straight to main",
            trigger="an urgent bug in production",
            steps=["commit to main", "deploy at once"],
        ),
        70,
        ["failure"] * 7,
    ),
]


def at(p: mempager.Pager, days_ago: float) -> None:
    p.clock = lambda: NOW - timedelta(days=days_ago)


def seed(p: mempager.Pager) -> None:
    p.set_identity("You are Ops, the release assistant of the Acme platform team.")
    p.add_rule("Never deploy on Fridays.")
    p.add_constraint("Do not print secrets or tokens in chat.")
    p.remember_user_fact("The user is Dana, the platform lead; prefers terse answers.")
    p.set_goal("Ship release/2.16 safely this week")
    for text, tags in FACTS:
        p.remember_fact(text, tags=tags)
    for text, days in EVENTS:
        p.remember("event", text, created_at=NOW - timedelta(days=days))
    p.remember("preference", "Status updates as three bullets, no prose.", tags=["style"])
    for i, (spec, days, outcomes) in enumerate(PATTERNS):
        at(p, days)
        p.write_pattern(spec, strength=0.6)
        for _ in range(2):  # reinforced patterns are injected into pages, so feedback reaches them
            p.reinforce_pattern(spec)
        for j, outcome in enumerate(outcomes):
            at(p, days - (j + 1) * days / (len(outcomes) + 1))
            p.page(spec.trigger, goal=spec.trigger, turn=f"t{i}-{j}")
            p.feedback(f"t{i}-{j}", outcome)
    at(p, 0)
    # an LLM's proposals wait for a human in copilot mode (the store runs in copilot here)
    p.remember("fact", "Dana is on holiday from the 24th; route approvals to Sam.", source="llm", confidence=0.55)
    p.remember("rule", "Always run the smoke tests before tagging a release.", source="llm", confidence=0.9)
    p.sweep()  # "Hotfix straight to main" fails more than it works: its inversion is proposed
    _wraps(p)
    p.sync(timeout=120)


def _wraps(p: mempager.Pager) -> None:
    """Two session wraps whose pattern lines cite the session's episodes (cited together: linked)."""
    for n, (state, extra) in enumerate(
        [("Release 2.15 shipped.", ""), ("Preparing release 2.16.", "Sam covers approvals.")]
    ):
        wrap = p.prepare_wrap()
        episodes = [e for e in wrap.episodes if e.type == "event"][:6]

        def cite(group: Sequence[Episode]) -> str:
            return " ".join(f'[evidence: {e.id} "{" ".join(e.text.split()[:4])}"]' for e in group)

        text = (
            f"## State\n{state}\n## Patterns\n"
            f"- Migrations need a lock timeout | 2x ({NOW:%Y-%m-%d}) {cite(episodes[:3])}\n"
            f"- Payments retries must be idempotent | 2x ({NOW:%Y-%m-%d}) {cite(episodes[3:])}\n"
            f"## Decisions\nShip small, Tuesday to Thursday.\n## Context\nPlatform team of four. {extra}\n"
        )
        p.save_continuity(text)
        for k in range(4):
            p.remember(
                "event", f"Session {n + 2}, step {k + 1}: reviewed the migration plan for release/2.16 with Dana."
            )


def screens(p: mempager.Pager) -> list[tuple[str, str, Callable[[object], None] | None]]:
    """(file name, path, an action before the shot) per screen."""
    fact = p.recall("PostgreSQL")[0].uri
    pattern = next(x.uri for x in p.patterns() if x.label == "Deploy with online migrations")
    return [
        ("memories.png", "/memories?" + urlencode({"q": "deploy migration"}), None),
        ("memory.png", "/memory?" + urlencode({"uri": fact}), None),
        (
            "simulator.png",
            "/simulate?"
            + urlencode({"goal": "a release has a schema migration", "query": "how do we deploy the users migration?"}),
            None,
        ),
        ("procedures.png", "/procedures", None),
        ("pattern.png", "/pattern?" + urlencode({"uri": pattern}), None),
        ("review.png", "/review", None),
        ("continuity.png", "/continuity", None),
        ("audit.png", "/audit?" + urlencode({"since": "", "limit": 60}), None),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--embedder", default="auto", help="auto (MiniLM when installed) or hash")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        config = PagerConfig(embedder=args.embedder, memory_mode="copilot")
        with mempager.open(Path(tmp) / "agent.duckdb", actor="ops", config=config) as p:
            seed(p)
            token = "screenshots-" + "x" * 32
            server = UiServer(create_app(Pagers(p), UiSettings(token=token))).start()
            try:
                with sync_playwright() as pw:
                    browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=list(CHROMIUM_ARGS))
                    page = browser.new_page(viewport={"width": 1360, "height": 900}, device_scale_factor=1)
                    page.goto(f"{server.url}/login?token={token}")
                    for name, path, _ in screens(p):
                        started = time.perf_counter()
                        page.goto(server.url + path, wait_until="load")
                        timings[name] = round((time.perf_counter() - started) * 1000, 1)
                        height = min(1500, page.evaluate("document.documentElement.scrollHeight"))
                        page.screenshot(
                            path=str(args.out / name),
                            full_page=True,  # a clip below the viewport needs the full page
                            clip={"x": 0, "y": 0, "width": 1360, "height": height},
                        )
                    browser.close()
            finally:
                server.stop()
            embedder = p.semantic.model
    result = {"embedder": embedder, "load_ms": timings, "date": NOW.isoformat(timespec="seconds")}
    (args.out / "screens.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    for name, ms in timings.items():
        print(f"{name:<16} {ms:>7.1f} ms")
    print(f"embedder {embedder}; screenshots in {args.out}")


if __name__ == "__main__":
    main()
