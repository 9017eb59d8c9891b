"""The crystallized tier's read tools and the spore tools of ``mempager serve`` (seed 003).

    memory_crystal_index    the crystals' one-line menu (what proven knowledge exists)
    memory_crystal_recall   the crystals a query cues, in full
    memory_spore_add        remember to do something (shown in pages when cued or due)
    memory_spores           open (or completed) spores
    memory_spore_done       complete a spore
    memory_spore_drop       delete a spore

Crystallizing stays a library / CLI act with a human accept (the review queue): over MCP the tier
is read-only, as in the seed. The same calls as the library and the CLI.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from mempager.core import Pager
from mempager.store.tier_types import Crystal, Spore

T = TypeVar("T")
Call = Callable[[str, Callable[[], T]], Awaitable[T]]
SporeId = Annotated[str, Field(description="the spore's id (or spore://<actor>/<id> uri), as memory_spores lists it")]


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CrystalItem(_Out):
    uri: str
    name: str
    body: str
    source: str = Field(description="consolidation (accepted by a human from the review queue) or user")
    score: float | None = Field(default=None, description="how strongly the query cued it (recall only)")
    cue: str | None = Field(default=None, description="words, evidence or association (recall only)")


class CrystalList(_Out):
    crystals: list[CrystalItem]


class SporeItem(_Out):
    uri: str
    id: str
    text: str
    cue: str | None
    due_at: str | None
    status: str = Field(description="open or done")


class SporeList(_Out):
    spores: list[SporeItem]


def _crystal(c: Crystal, score: float | None = None, cue: str | None = None) -> CrystalItem:
    return CrystalItem(uri=c.uri, name=c.name, body=c.body, source=c.source, score=score, cue=cue)


def _spore(s: Spore) -> SporeItem:
    due = s.due_at.isoformat() if s.due_at is not None else None
    return SporeItem(uri=s.uri, id=s.id, text=s.text, cue=s.cue, due_at=due, status=s.status)


class TierTools:
    def __init__(self, pager: Pager, call: Call[Any]) -> None:
        self.pager = pager
        self.call = call

    async def crystal_index(self) -> CrystalList:
        """The crystallized tier's menu: every proven pattern held out of context, by name. Call it to see
        what long-term knowledge exists; memory_crystal_recall brings one in full."""
        crystals = await self.call("crystal_index", self.pager.crystals)
        return CrystalList(crystals=[_crystal(c) for c in crystals])

    async def crystal_recall(
        self,
        query: Annotated[str, Field(description="what you are about to do or decide")],
        k: Annotated[int, Field(ge=1, le=20)] = 3,
    ) -> CrystalList:
        """The crystallized patterns a query cues, in full: by their words, or because the query matches a
        memory they were grounded in. Call it before a decision the menu suggests a crystal for."""
        hits = await self.call("crystal_recall", lambda: self.pager.crystal_recall(query, k))
        return CrystalList(crystals=[_crystal(h.crystal, h.score, h.why) for h in hits])

    async def spore_add(
        self,
        text: Annotated[str, Field(description="what to do, in one or two sentences")],
        cue: Annotated[str | None, Field(description="words that bring it back (default: its own text)")] = None,
        due: Annotated[str | None, Field(description='ISO time, or "30m", "2h", "3d", "1w" from now')] = None,
    ) -> SporeItem:
        """Remember to do something later (a spore): it appears in memory_page when a turn mentions its
        cue or when it is due, until memory_spore_done. Call it for every open loop you intend to close."""
        return _spore(await self.call("spore_add", lambda: self.pager.spore(text, cue=cue, due=due)))

    async def spores(self, status: Literal["open", "done", "all"] = "open") -> SporeList:
        """The spores (intentions): open ones by default. Call it to review what is still to do."""
        return SporeList(spores=[_spore(s) for s in await self.call("spores", lambda: self.pager.spores(status))])

    async def spore_done(self, spore_id: SporeId) -> SporeItem:
        """Complete a spore: it leaves every page (cleaned after the retention period). Call it when done."""
        return _spore(await self.call("spore_done", lambda: self.pager.complete_spore(spore_id)))

    async def spore_drop(self, spore_id: SporeId) -> SporeItem:
        """Delete a spore that no longer matters (its text is erased). Call it instead of completing it."""
        return _spore(await self.call("spore_drop", lambda: self.pager.drop_spore(spore_id)))


ANNOTATIONS = {
    "crystal_index": ToolAnnotations(title="Crystal index", read_only_hint=True),
    "crystal_recall": ToolAnnotations(title="Crystal recall", read_only_hint=True),
    "spore_add": ToolAnnotations(title="Add a spore", read_only_hint=False, destructive_hint=False),
    "spores": ToolAnnotations(title="Spores", read_only_hint=True),
    "spore_done": ToolAnnotations(title="Complete a spore", read_only_hint=False, destructive_hint=False),
    "spore_drop": ToolAnnotations(title="Drop a spore", read_only_hint=False, destructive_hint=True),
}


def register(server: MCPServer[Any], pager: Pager, call: Call[Any], prefix: str) -> None:
    """Add the crystal and spore tools to ``server``."""
    tools = TierTools(pager, call)
    for name, hints in ANNOTATIONS.items():
        fn = getattr(tools, name)
        description = " ".join((fn.__doc__ or "").split())
        server.add_tool(fn, name=prefix + name, description=description, annotations=hints, structured_output=True)
