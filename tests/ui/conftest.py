"""The web inspector's fixtures: a seeded real store, the app on a real port, the Debian chromium.

The store is a real DuckDB file in a temp dir, written through the public Pager API (hash
embedder: these tests check what the inspector shows, not what the embedder means). Memory
mode is copilot, so memories an LLM proposes wait in the review queue.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import mempager
from mempager import PagerConfig, PatternSpec
from mempager.ui import serving

TOKEN = "ui-test-token-" + "k" * 32
CHROMIUM = Path(serving.CHROMIUM)
# Each payload, if it ever ran, would set window.__xss (a dialog would also be caught).
XSS = {
    "script": '<script>window.__xss = "script"; alert(1)</script>',
    "onerror": "<img src=x onerror=\"window.__xss = 'img'; alert(2)\">",
    "svg": '"><svg onload="window.__xss = \'svg\'"></svg>',
    "javascript": "<a href=\"javascript:window.__xss='link'\">click</a> javascript:alert(document.cookie)",
    "htmx": '<div hx-get="/logout" hx-trigger="load">htmx attributes</div>',
}
PATTERN = PatternSpec(name="Deploy on Tuesdays", trigger="deploying a release", steps=["tag", "deploy", "watch"])
QUEUED = ("An LLM guessed the on-call rota changes weekly.", "An LLM guessed staging is rebuilt nightly.")


def config() -> PagerConfig:
    return PagerConfig(embedder="hash", memory_mode="copilot")


def seed(p: mempager.Pager) -> None:
    p.set_identity("You are Neo, a careful release assistant.")
    p.add_rule("Never deploy on Fridays.")
    p.remember_fact("The kubernetes cluster runs in eu-west-1 with three node pools.", tags=["infra"])
    p.remember_fact("Deploys go through the release branches, never main.", tags=["deploy"])
    p.remember("event", "The Friday deploy failed because a migration locked the users table.")
    for name, payload in XSS.items():
        p.remember_fact(f"xss {name}: {payload}", tags=["xss"])
    p.write_pattern(PATTERN)
    p.reinforce_pattern(PATTERN)
    for text in QUEUED:
        p.remember("fact", text, source="llm", confidence=0.3)  # copilot: queued, not stored
    p.remember("fact", "queued xss: " + XSS["onerror"], source="llm", confidence=0.3)
    assert p.sync(timeout=60)


@pytest.fixture(scope="module")
def store_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="mempager-ui-") as tmp:
        yield Path(tmp)


@pytest.fixture(scope="module")
def seeded(store_dir: Path) -> Iterator[mempager.Pager]:
    """One seeded pager per module (actor neo); actor trinity has one memory of her own."""
    path = store_dir / "agent.duckdb"
    with mempager.open(path, actor="trinity", config=config()) as other:
        other.remember_fact("Trinity's secret: the exit is at the phone booth.")
    with mempager.open(path, actor="neo", config=config()) as p:
        seed(p)
        yield p


def chromium_or_skip() -> Path:
    if not CHROMIUM.exists():
        pytest.skip(
            f"{CHROMIUM} is absent: install Debian's chromium (apt-get install -y chromium) to run the UI browser tests"
        )
    return CHROMIUM


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """The Debian chromium, headless, once per module (Playwright's own download cannot run here)."""
    executable = chromium_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        # Playwright gives every launch a fresh, empty profile directory (--user-data-dir)
        launched = pw.chromium.launch(executable_path=str(executable), headless=True, args=list(serving.CHROMIUM_ARGS))
        try:
            yield launched
        finally:
            launched.close()


def child_env() -> dict[str, str]:
    """A subprocess's environment: offline, no bytecode in the tree, no MEMPAGER_*/OPENAI_* leaking in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMPAGER_", "OPENAI_"))}
    return {**env, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1"}
