"""The session-wrap tools and the continuity resource of ``mempager serve`` (seed 003).

    memory_prepare_wrap       at session end: the episodes since the last wrap and the package to compress
    memory_save_continuity    after compressing: validated, then saved as the new continuity
    mempager://<actor>/continuity   the current continuity, to load at session start

Same ``prepare_wrap`` / ``save_continuity`` as the library and the CLI.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from mempager.consolidation.report import PatternChange
from mempager.core import Pager

T = TypeVar("T")
Call = Callable[[str, Callable[[], T]], Awaitable[T]]


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EpisodeItem(_Out):
    id: str = Field(description="what an [evidence: ID ...] tag cites")
    type: str
    text: str
    created_at: str


class WrapResult(_Out):
    status: str = Field(description="ready, or empty when nothing was written since the last wrap")
    number: int
    episodes: list[EpisodeItem]
    package: str = Field(description="compress this into the next continuity, then call memory_save_continuity")


class Change(_Out):
    name: str
    from_level: int
    to_level: int
    reason: str


class SaveContinuityResult(_Out):
    saved: bool = Field(description="false only when another session holds consolidation (capture-only)")
    wrap: int
    version: int | None
    graduated: list[Change]
    demoted: list[Change] = Field(description="the immune system working, not an error: do not re-save")
    held: list[Change]
    flagged: dict[str, Any]
    linked: dict[str, int]


def _changes(items: tuple[PatternChange, ...]) -> list[Change]:
    return [Change(name=c.name, from_level=c.from_level, to_level=c.to_level, reason=c.reason) for c in items]


class WrapTools:
    def __init__(self, pager: Pager, call: Call[Any]) -> None:
        self.pager = pager
        self.call = call

    async def prepare_wrap(
        self, session_id: Annotated[str | None, Field(description="this session's id, when several run")] = None
    ) -> WrapResult:
        """Get every memory written since the last wrap and the package that says how to compress them
        with the current continuity. Call it at the end of a session, compress the package yourself,
        then call memory_save_continuity once. Status "empty" means there is nothing to wrap."""
        wrap = await self.call("prepare_wrap", lambda: self.pager.prepare_wrap(session_id=session_id))
        episodes = [
            EpisodeItem(id=e.id, type=e.type, text=e.text, created_at=e.created_at.isoformat()) for e in wrap.episodes
        ]
        return WrapResult(status=wrap.status, number=wrap.number, episodes=episodes, package=wrap.package)

    async def save_continuity(
        self,
        text: Annotated[str, Field(description="the compressed continuity (markdown, the package's sections)")],
        affect_tag: Annotated[str | None, Field(description="how compressing felt, e.g. curious")] = None,
        affect_intensity: Annotated[float | None, Field(ge=0.0, le=1.0)] = None,
        session_id: str | None = None,
    ) -> SaveContinuityResult:
        """Save the continuity you compressed from memory_prepare_wrap's package: its structure and
        pattern evidence are checked, ungrounded graduations demoted, associations recorded. Call it
        once per memory_prepare_wrap; demotions in the result are expected, not a reason to save again."""
        if (affect_tag is None) != (affect_intensity is None):
            raise ToolError("pass affect_tag and affect_intensity together, or neither")
        affect = None if affect_tag is None else (affect_tag, affect_intensity)
        result = await self.call(
            "save_continuity", lambda: self.pager.save_continuity(text, affect=affect, session_id=session_id)
        )
        return SaveContinuityResult(
            saved=result.saved,
            wrap=result.wrap,
            version=result.version,
            graduated=_changes(result.graduated),
            demoted=_changes(result.demoted),
            held=_changes(result.held),
            flagged=result.flagged,
            linked=result.linked.as_dict(),
        )

    async def continuity(self) -> str:
        try:
            text = await self.call("continuity", self.pager.continuity)
        except ToolError as exc:
            raise ResourceError(str(exc)) from exc
        return str(text) or "(no continuity yet: it is written by the first session wrap)"


ANNOTATIONS = {
    "prepare_wrap": ToolAnnotations(title="Prepare session wrap", read_only_hint=False, destructive_hint=False),
    "save_continuity": ToolAnnotations(title="Save continuity", read_only_hint=False, destructive_hint=False),
}


def register(server: MCPServer[Any], pager: Pager, call: Call[Any], prefix: str) -> None:
    """Add the wrap tools and the continuity resource to ``server``."""
    tools = WrapTools(pager, call)
    for name, hints in ANNOTATIONS.items():
        fn = getattr(tools, name)
        description = " ".join((fn.__doc__ or "").split())
        server.add_tool(fn, name=prefix + name, description=description, annotations=hints, structured_output=True)
    server.resource(
        f"mempager://{pager.actor}/continuity",
        name="continuity",
        mime_type="text/markdown",
        description=f"Actor {pager.actor!r}'s continuity: what its last session wrap compressed. Load it at "
        "session start (it is also inside the pinned block).",
    )(tools.continuity)
