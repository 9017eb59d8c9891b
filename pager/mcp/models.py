"""What the MCP tools return: pydantic models, so the SDK publishes each tool's ``outputSchema``
and hands back ``structuredContent`` validated against it.

Also the conversions from the kernel's values (``Memory``, ``Page``, ``Pattern``) into them, and
the one-line page summary the ``memory_page`` tool gives instead of its full report.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mempager.config import PagerConfig
from mempager.paging.page import Page
from mempager.patterns import Pattern, PatternSpec
from mempager.procedural import lifecycle
from mempager.types import Memory, MemoryType


class Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WriteResult(Out):
    uri: str = Field(description="mem://… when stored, review://… when queued for review, gate://… when dropped")
    status: str = Field(description="stored, queued for review, or not stored, and why")


class MemoryItem(Out):
    uri: str
    type: str
    text: str = Field(description="the memory's text (a procedure rendered as its steps)")
    created_at: str = Field(description="ISO-8601")
    source: str = Field(description="user, observed, llm or consolidation")
    tags: list[str]


class MemoryRecord(MemoryItem):
    updated_at: str = Field(description="ISO-8601")
    valid_until: str | None = Field(description="ISO-8601, or null when open-ended")
    importance: float
    confidence: float
    strength: float
    access_count: int
    metadata: dict[str, Any]


class RecallResult(Out):
    memories: list[MemoryItem] = Field(description="newest first")


class SectionReport(Out):
    tokens: int
    budget: int
    items: int


class RetrievedReport(Out):
    uri: str
    type: str
    score: float = Field(description="the fused score")
    lanes: str = Field(description="the lanes that found it and its rank in each, e.g. 'lexical#2 semantic#1'")


class PageReport(Out):
    embedder: str
    total_tokens: int
    sections: dict[str, SectionReport] = Field(description="pinned, patterns, retrieved: tokens of budget")
    retrieved: list[RetrievedReport]
    cut: dict[str, int] = Field(description="candidates left out, counted by reason")


class PageResult(Out):
    page: str = Field(description="the rendered page: put it in context")
    summary: str = Field(description="one line: what came in, the tokens used, the lanes, what was cut")
    turn: str | None = Field(description="the turn id the injections were recorded under, for feedback")
    report: PageReport | None = Field(default=None, description="the full report; only with report=true")


class PatternResult(Out):
    uri: str
    label: str
    successes: int
    failures: int
    confidence: float
    maturity: str
    stage: str
    injected_in_pages: bool = Field(description="whether it has enough successes to appear in pages")


class FeedbackResult(Out):
    turn: str
    outcome: str
    patterns_updated: int = Field(description="0 when this exact feedback was already applied")


class ForgetResult(Out):
    forgotten: str


class StatsResult(BaseModel):
    """The store's health; more keys than these may be present."""

    model_config = ConfigDict(extra="allow")
    store: str
    actor: str
    memories: int
    by_type: dict[str, int]
    embedder: str
    vectors_indexed: int | None = None
    pending_embeddings: int | None = None
    failing_embeddings: int | None = None
    embedding_lag_seconds: float | None = None
    last_embed_error: str | None = None
    patterns_by_stage: dict[str, int] | None = None


def memory_item(m: Memory) -> MemoryItem:
    text = PatternSpec.decode(m.text).render() if m.type is MemoryType.PATTERN else m.text
    return MemoryItem(
        uri=m.uri,
        type=m.type.value,
        text=text,
        created_at=m.created_at.isoformat(),
        source=m.source.value,
        tags=list(m.tags),
    )


def memory_record(m: Memory) -> MemoryRecord:
    return MemoryRecord(
        **memory_item(m).model_dump(),
        updated_at=m.updated_at.isoformat(),
        valid_until=None if m.valid_until is None else m.valid_until.isoformat(),
        importance=m.importance,
        confidence=m.confidence,
        strength=m.strength,
        access_count=m.access_count,
        metadata=dict(m.metadata),
    )


def write_status(uri: str) -> str:
    if uri.startswith("review://"):
        return "queued for review (memory_mode=copilot); not in memory until accepted"
    if uri.startswith("gate://"):
        return "not stored (memory_mode=off)"
    return "stored"


def page_report(page: Page) -> PageReport:
    """What came in and why, small enough to hand back to a model when it asks."""
    report = page.report
    return PageReport(
        embedder=report.embedder,
        total_tokens=report.total_tokens,
        sections={
            name: SectionReport(tokens=s.tokens, budget=s.budget, items=s.items) for name, s in report.sections.items()
        },
        retrieved=[
            RetrievedReport(
                uri=s.uri,
                type=s.type,
                score=s.score,
                lanes=" ".join(f"{lane}#{int(v['rank'])}" for lane, v in sorted(s.lanes.items())),
            )
            for s in report.snippets
        ],
        cut=_counted(c.reason for c in report.cuts),
    )


def page_summary(page: Page, budget: int) -> str:
    """One line, e.g. "9 retrieved, 3 pinned, 1 procedure; 1,840/8,000 tokens; lanes lexical 4
    semantic 9; 3 cut (budget 2, top_k 1)"."""
    report = page.report
    sections = report.sections
    counts = [
        _plural(sections["retrieved"].items if "retrieved" in sections else len(report.snippets), "retrieved"),
        _plural(sections["pinned"].items if "pinned" in sections else 0, "pinned"),
        _plural(len(page.patterns) + len(page.menu) + len(page.avoid), "procedure", "procedures"),
    ]
    lanes = _counted(lane for s in report.snippets for lane in s.lanes)
    cut = _counted(c.reason for c in report.cuts)
    return "; ".join(
        [
            ", ".join(counts),
            f"{report.total_tokens:,}/{budget:,} tokens",
            "lanes " + (" ".join(f"{lane} {n}" for lane, n in lanes.items()) or "none"),
            f"{sum(cut.values())} cut" + (" (" + ", ".join(f"{r} {n}" for r, n in cut.items()) + ")" if cut else ""),
        ]
    )


def pattern_result(pattern: Pattern, config: PagerConfig) -> PatternResult:
    return PatternResult(
        uri=pattern.uri,
        label=pattern.label,
        successes=pattern.successes,
        failures=pattern.failures,
        confidence=round(pattern.confidence, 4),
        maturity=pattern.maturity,
        stage=lifecycle.stage(pattern, config),
        injected_in_pages=pattern.successes >= config.min_pattern_successes,
    )


def _counted(keys: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for key in keys:
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 or many is None else many}"
