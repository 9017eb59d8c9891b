"""``mempager serve``: the pager as an MCP server, for any MCP-capable agent harness.

    mempager serve --store agent.duckdb --actor neo     # stdio: what Claude Code, Codex, Cursor spawn
    mempager serve --http --port 8765                   # streamable HTTP on 127.0.0.1, bearer token (http_guard)

One Pager per process, opened before the first request. Every pager call runs in a worker
thread, so a slow embed or a store compaction never stalls the protocol. mempager's own errors
come back to the model as tool errors carrying their message (it says what to do next); anything
unexpected becomes a tool error too, with its traceback on stderr. stdout carries protocol only.

The tools are namespaced ``memory_*`` (TOOL_NAMES) and each returns a typed result (models.py),
so clients see an ``outputSchema`` and get ``structuredContent``. Resources: the pinned block
(``mempager://<actor>/pinned``) and any of this actor's memories by uri
(``mempager://memory/{actor}/{type}/{id}`` is ``mem://actor/type/id``). The ``memory_turn``
prompt spells out the per-turn loop.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Literal, NoReturn, TypeVar, get_args

from mempager.core import Pager
from mempager.errors import ConfigError, InvalidInput, MemoryNotFound, PagerError
from mempager.patterns import Pattern, PatternSpec
from mempager.types import Memory
from mempager.validate import check_text

try:
    import anyio
    import anyio.to_thread
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
    from mcp.shared.exceptions import MCPError
    from mcp.types import INVALID_PARAMS, CallToolResult, ContentBlock, TextContent, ToolAnnotations
    from pydantic import Field
except ImportError as exc:  # a PagerError, so `mempager serve` prints one line instead of a traceback
    raise ConfigError(
        f"mempager serve needs the MCP Python SDK 2.x ({exc}); install it with: pip install 'mempager[mcp]'"
    ) from exc

from mempager.mcp import http_guard, tier_tools, wrap_tools
from mempager.mcp.http_guard import options_from_args as options_from_args  # the CLI's serve flags
from mempager.mcp.models import (
    FeedbackResult,
    ForgetResult,
    MemoryRecord,
    PageResult,
    PatternResult,
    RecallResult,
    StatsResult,
    WriteResult,
    memory_item,
    memory_record,
    page_report,
    page_summary,
    pattern_result,
    write_status,
)
from mempager.mcp.prompts import INSTRUCTIONS, turn_loop

log = logging.getLogger("mempager.mcp")
T = TypeVar("T")
HOST = "127.0.0.1"  # never a public interface: the store holds the agent's whole memory
PREFIX = "memory_"  # every tool's name: harnesses list many servers' tools side by side
UI_PATH = "/ui"  # serve --http mounts the web inspector here

# Identity, rules and constraints are pinned as inviolable: only the operator sets them (CLI or
# Python API), so text the model was shown cannot promote itself into them. Patterns and
# outcomes have their own tools, which keep their structure and lifecycle. memory_update edits
# only the types the model may write.
Writable = Literal["fact", "preference", "profile", "belief", "event", "goal"]
WRITABLE = frozenset(get_args(Writable))
AnyType = Literal[
    "identity", "rule", "constraint", "profile", "preference", "fact", "belief", "event", "outcome", "goal", "pattern"
]
Outcome = Literal["success", "failure", "partial", "unknown"]
Verdict = Literal["success", "failure"]
Unit = Annotated[float, Field(ge=0.0, le=1.0)]
TurnId = Annotated[str, Field(description="the turn id given to memory_page")]
Used = Annotated[list[str] | None, Field(description="labels of the page's procedures you followed")]
Uri = Annotated[str, Field(description="mem://<actor>/<type>/<id>, as returned")]


async def _call(what: str, fn: Callable[[], T]) -> T:
    """Run a blocking pager call in a thread; turn every failure into a tool error."""
    try:
        return await anyio.to_thread.run_sync(fn)
    except PagerError as exc:
        raise ToolError(str(exc)) from exc
    except Exception as exc:
        log.exception("%s failed unexpectedly", what)
        # the exception text stays in the server log: it may quote data the caller should not see
        raise ToolError(
            f"internal error in mempager ({type(exc).__name__}) during {what}; "
            "the server's stderr log has the traceback"
        ) from exc


class MemoryTools:
    """The tools, bound to one Pager. Docstrings are the descriptions the model reads."""

    def __init__(self, pager: Pager, goal: str | None = None) -> None:
        self.pager = pager
        self.goal = goal

    async def remember(
        self,
        text: Annotated[str, Field(description="the memory, one self-contained statement")],
        type: Annotated[Writable, Field(description="profile = about the user")] = "fact",
        tags: list[str] | None = None,
    ) -> WriteResult:
        """Save one durable memory for later turns. Call it when the user states a fact, preference
        or decision worth keeping, or you learn something you will need again. Returns its uri."""
        uri = await _call("remember", lambda: self.pager.remember(type, text, tags=tags or (), source="llm"))
        return WriteResult(uri=uri, status=write_status(uri))

    async def page(
        self,
        query: Annotated[str, Field(description="what this turn is about; usually the user's message")],
        goal: Annotated[str | None, Field(description="the conversation's goal")] = None,
        turn: Annotated[str | None, Field(description="an id for this turn, to send feedback later")] = None,
        report: Annotated[
            bool, Field(description="also return the full report: each retrieved memory's lanes and score")
        ] = False,
    ) -> Annotated[CallToolResult, PageResult]:
        """Get this turn's memory context: pinned identity, rules, constraints, user profile and goal,
        proven procedures, and the stored memories most relevant to the query, plus a one-line
        summary. Call it at the start of every turn and keep the page in context."""
        wanted = goal if goal is not None else self.goal
        page = await _call("page", lambda: self.pager.page(query=query, goal=wanted, turn=turn))
        result = PageResult(
            page=page.render(),
            summary=page_summary(page, self.pager.config.page_budget_tokens),
            turn=turn,
            report=page_report(page) if report else None,
        )
        content: list[ContentBlock] = [
            TextContent(type="text", text=result.page or "(memory is empty)"),
            TextContent(type="text", text=result.summary),
        ]
        if result.report is not None:
            content.append(TextContent(type="text", text=result.report.model_dump_json()))
        # the report only when asked: a model pays for every token of a result it did not need
        structured = result.model_dump(mode="json", exclude=None if report else {"report"})
        return CallToolResult(content=content, structured_content=structured)

    async def recall(
        self,
        query: Annotated[str | None, Field(description="words that must all appear")] = None,
        types: list[AnyType] | None = None,
        tags: list[str] | None = None,
        since: Annotated[str | None, Field(description="ISO-8601 time, e.g. 2026-05-01")] = None,
        until: Annotated[str | None, Field(description="ISO-8601 time")] = None,
        limit: Annotated[int, Field(ge=1, le=500)] = 20,
        offset: Annotated[int, Field(ge=0)] = 0,
    ) -> RecallResult:
        """Look memories up deliberately, newest first, with exact filters. Call it when you need a
        complete list (what did we decide last week? every preference?) rather than the page's best
        matches."""
        rows = await _call(
            "recall",
            lambda: self.pager.recall(
                query, types=types, since=since, until=until, limit=limit, offset=offset, tags=tags
            ),
        )
        return RecallResult(memories=[memory_item(m) for m in rows])

    async def get(self, uri: Uri) -> MemoryRecord:
        """One memory in full: text, tags, importance, confidence, metadata, times. Call it before
        correcting a memory with memory_update, or to read one a page or recall named."""
        return memory_record(await _call("get", lambda: self.pager.get(uri)))

    async def update(
        self,
        uri: Uri,
        text: Annotated[str | None, Field(description="the corrected statement")] = None,
        tags: Annotated[list[str] | None, Field(description="replaces the tags; [] clears them")] = None,
        importance: Unit | None = None,
        confidence: Unit | None = None,
        metadata: Annotated[dict[str, Any] | None, Field(description="replaces the metadata")] = None,
    ) -> MemoryRecord:
        """Correct a memory in place (fact, preference, profile, belief, event or goal) and get it
        back updated; only the fields you pass change. Call it when a stored memory turned out to
        be wrong or out of date, instead of remembering a contradicting one."""
        given = {"text": text, "tags": tags, "importance": importance, "confidence": confidence, "metadata": metadata}
        changes = {k: v for k, v in given.items() if v is not None}

        def edit() -> Memory:
            mode = self.pager.config.memory_mode
            if mode != "autopilot":  # the encoding gate holds the model's writes: an edit must not skip it
                raise InvalidInput(
                    f"memory_update is disabled in memory_mode={mode}: the model's changes go through the "
                    "user there; ask the user to correct the memory"
                )
            if not changes:
                raise InvalidInput("nothing to update: pass text, tags, importance, confidence or metadata")
            current = self.pager.get(uri)
            if current.type.value not in WRITABLE:
                raise InvalidInput(
                    f"{uri} is a {current.type.value} memory, which memory_update does not edit: identity, "
                    "rules and constraints are set by the user; patterns and outcomes have their own tools"
                )
            return self.pager.update(uri, **changes)

        return memory_record(await _call("update", edit))

    async def record_outcome(
        self,
        summary: Annotated[str, Field(description="one line: what was attempted and what happened")],
        outcome: Outcome,
        turn: Annotated[str | None, Field(description="the turn id given to memory_page")] = None,
        intent_ref: Annotated[str | None, Field(description="uri of the goal or memory it served")] = None,
        used: Used = None,
    ) -> WriteResult:
        """Record how a task ended. Call it when a task finishes; with the turn id you gave
        `memory_page`, success or failure also credits or blames the procedures that turn used (only
        those in `used`, when you say which you followed)."""
        uri = await _call(
            "record_outcome",
            lambda: self.pager.record_outcome(summary, outcome, intent_ref, turn=turn, used=used, source="llm"),
        )
        return WriteResult(uri=uri, status=write_status(uri))

    async def reinforce_pattern(
        self,
        name: Annotated[str, Field(description="short label for the procedure")],
        steps: Annotated[list[str], Field(min_length=1)],
        trigger: Annotated[str, Field(description="when to use it")] = "",
        preconditions: list[str] | None = None,
        gotchas: list[str] | None = None,
        success_criteria: list[str] | None = None,
    ) -> PatternResult:
        """Save a reusable procedure, or count one more success for it. Call it after a multi-step
        approach worked and is likely to be needed again; after a few successes it appears in pages."""

        def reinforce() -> Pattern:
            spec = PatternSpec(
                name=name,
                trigger=trigger,
                steps=steps,
                preconditions=preconditions or (),
                gotchas=gotchas or (),
                success_criteria=success_criteria or (),
            )
            return Pattern.from_memory(self.pager.get(self.pager.reinforce_pattern(spec)))

        return pattern_result(await _call("reinforce_pattern", reinforce), self.pager.config)

    async def feedback(self, turn: TurnId, outcome: Verdict, used: Used = None) -> FeedbackResult:
        """Say whether the procedures in a turn's page helped (success) or not (failure). Call it
        once per turn whose page showed procedures, unless memory_record_outcome already got that
        turn id; name in `used` the procedures you actually followed, so only they are credited."""

        def apply() -> int:
            # the kernel answers 0 for a turn it never saw: to the model that reads as success
            key = check_text(turn, 1_000, "turn")
            if not self.pager.store.injections(self.pager.actor, key):
                raise InvalidInput(
                    f"unknown turn {turn!r}: no memory_page call with turn={turn!r} put procedures in a page "
                    f"for actor {self.pager.actor!r} (or they were forgotten since), so there is nothing to "
                    "credit; pass the turn id you gave memory_page, and skip feedback for a page without procedures"
                )
            return self.pager.feedback(key, outcome, used=used)

        updated = await _call("feedback", apply)
        return FeedbackResult(turn=turn, outcome=outcome, patterns_updated=updated)

    async def forget(self, uri: Uri) -> ForgetResult:
        """Permanently delete one memory. Call it when the user asks you to forget something or a
        memory turned out to be wrong (remember the correction separately, or use memory_update)."""
        await _call("forget", lambda: self.pager.forget(uri))
        return ForgetResult(forgotten=uri)

    async def stats(self) -> StatsResult:
        """Memory counts by type, the active embedder and embedding lag. Call it to check the memory
        store is healthy or to see what it holds."""
        stats = await _call("stats", self.pager.stats)
        return StatsResult.model_validate(json.loads(json.dumps(stats, default=str)))

    # -- resources and the prompt ------------------------------------------------------------
    async def pinned(self) -> str:
        try:
            return await _call("pinned", lambda: self.pager.pinned(self.goal))
        except ToolError as exc:
            raise ResourceError(str(exc)) from exc

    async def memory(self, actor: str, type: str, id: str) -> str:
        uri = f"mem://{actor}/{type}/{id}"
        if actor != self.pager.actor:  # one actor per server: another's memories do not exist here
            raise ResourceNotFoundError(f"no memory {uri} for actor {self.pager.actor!r}")
        try:
            found = await _call("read memory", lambda: self.pager.get(uri))
        except ToolError as exc:
            cause = exc.__cause__
            not_found = isinstance(cause, (MemoryNotFound, InvalidInput))
            raise (ResourceNotFoundError if not_found else ResourceError)(str(exc)) from exc
        return memory_record(found).model_dump_json(indent=2)

    def turn_prompt(
        self,
        message: Annotated[str, Field(description="the user's latest message")],
        goal: Annotated[str | None, Field(description="the conversation's goal")] = None,
        turn: Annotated[str | None, Field(description="an id for this turn (default: a fresh one)")] = None,
    ) -> str:
        """The per-turn memory loop for one user message: which memory_* tools to call, in order."""
        return turn_loop(message, goal if goal is not None else self.goal, turn)


_ANNOTATIONS = {
    "remember": ToolAnnotations(title="Remember", read_only_hint=False, destructive_hint=False),
    "page": ToolAnnotations(title="Page in memory", read_only_hint=False, destructive_hint=False),
    "recall": ToolAnnotations(title="Recall", read_only_hint=True),
    "get": ToolAnnotations(title="Get a memory", read_only_hint=True),
    "update": ToolAnnotations(title="Update a memory", read_only_hint=False, destructive_hint=True),
    "record_outcome": ToolAnnotations(title="Record outcome", read_only_hint=False, destructive_hint=False),
    "reinforce_pattern": ToolAnnotations(title="Reinforce pattern", read_only_hint=False, destructive_hint=False),
    "feedback": ToolAnnotations(title="Feedback", read_only_hint=False, destructive_hint=False, idempotent_hint=True),
    "forget": ToolAnnotations(title="Forget", read_only_hint=False, destructive_hint=True, idempotent_hint=True),
    "stats": ToolAnnotations(title="Stats", read_only_hint=True),
}
TOOL_NAMES = tuple(PREFIX + name for name in (*_ANNOTATIONS, *wrap_tools.ANNOTATIONS, *tier_tools.ANNOTATIONS))
MEMORY_TEMPLATE = "mempager://memory/{actor}/{type}/{id}"
PROMPT_NAMES = ("memory_turn",)


class _Server(MCPServer[Any]):
    """The SDK's server, with a client's bad ``prompts/get`` answered as the client's error.

    The SDK raises a plain ValueError for an unknown prompt name or a missing required argument,
    which its dispatcher logs as a server failure, traceback and all (a fuzzed request once put
    one in the server's log). Both are the caller's mistake: INVALID_PARAMS, saying what to send.
    """

    async def get_prompt(self, name: str, arguments: dict[str, Any] | None = None, context: Any = None) -> Any:
        prompts = {prompt.name: prompt for prompt in await self.list_prompts()}
        prompt = prompts.get(name)
        if prompt is None:
            known = ", ".join(sorted(prompts)) or "none"
            raise MCPError(INVALID_PARAMS, f"unknown prompt {name!r}; this server's prompts: {known}")
        missing = [a.name for a in prompt.arguments or [] if a.required and a.name not in (arguments or {})]
        if missing:
            raise MCPError(INVALID_PARAMS, f"prompt {name!r} needs the argument(s) {', '.join(missing)}")
        return await super().get_prompt(name, arguments, context)


def build_server(pager: Pager, goal: str | None = None) -> MCPServer[Any]:
    """An MCP server exposing ``pager``: the tools, the pinned block and memory resources, the prompt."""
    from mempager import __version__

    tools = MemoryTools(pager, goal)
    server: MCPServer[Any] = _Server("mempager", version=__version__, instructions=INSTRUCTIONS)
    for name, hints in _ANNOTATIONS.items():
        fn = getattr(tools, name)
        description = " ".join((fn.__doc__ or "").split())
        server.add_tool(fn, name=PREFIX + name, description=description, annotations=hints, structured_output=True)
    wrap_tools.register(server, pager, _call, PREFIX)  # memory_prepare_wrap, memory_save_continuity, continuity
    tier_tools.register(server, pager, _call, PREFIX)  # memory_crystal_index|recall, memory_spore*
    about = f"goal {goal!r}" if goal else "the stored goal"
    server.resource(
        f"mempager://{pager.actor}/pinned",
        name="pinned",
        mime_type="text/markdown",
        description=f"What must always be in context for actor {pager.actor!r} and {about}: identity, "
        "rules, hard constraints, user profile, goal. Put it in the system prompt.",
    )(tools.pinned)
    server.resource(
        MEMORY_TEMPLATE,
        name="memory",
        mime_type="application/json",
        description=f"One memory of actor {pager.actor!r} in full, as JSON: mempager://memory/<actor>/<type>/<id> "
        "is the memory mem://<actor>/<type>/<id>.",
    )(tools.memory)
    server.prompt(
        name=PROMPT_NAMES[0],
        title="Memory turn",
        description="The per-turn memory loop for a user message: memory_page first, then remember, "
        "record_outcome or feedback.",
    )(tools.turn_prompt)
    return server


def configure_logging() -> None:
    """Everything to stderr: libraries at WARNING, mempager at $MEMPAGER_LOG_LEVEL (INFO)."""
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    level = logging.getLevelName(os.environ.get("MEMPAGER_LOG_LEVEL", "INFO").upper())
    logging.getLogger("mempager").setLevel(level if isinstance(level, int) else logging.INFO)


@contextlib.contextmanager
def _sigterm_exits() -> Iterator[None]:
    """SIGTERM (how harnesses stop a server) unwinds normally, so the pager closes and saves its index."""

    def stop(signum: int, frame: object) -> NoReturn:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


async def _serve_http(server: MCPServer[Any], port: int, guard: http_guard.GuardSettings, pager: Pager) -> None:
    import uvicorn

    from mempager.ui import Pagers, UiSettings, create_app

    app = server.streamable_http_app(
        host=HOST,
        max_request_body_size=guard.max_body_bytes,  # the SDK's own cap: 413 on Content-Length or the stream
        transport_security=http_guard.transport_security(guard),
    )
    # the web inspector (pager/ui) for this pager; the guard checks Host, Origin and rate in front
    # of it, and the inspector checks the same token at its login (hosts=None: the guard did Host)
    app.mount(UI_PATH, create_app(Pagers(pager), UiSettings(token=guard.token, hosts=None)))
    guarded = http_guard.HttpGuard(app, guard, own_login=(UI_PATH,))
    # log_config=None: uvicorn's own config would print access lines on stdout; ours go to stderr;
    # access_log=False: the inspector's login link carries the token
    config = uvicorn.Config(guarded, host=HOST, port=port, log_config=None, access_log=False)
    await uvicorn.Server(config).serve()


def serve(
    pager: Pager,
    *,
    goal: str | None = None,
    http: bool = False,
    port: int = 8765,
    guard: http_guard.GuardOptions | None = None,
) -> int:
    """Serve the opened ``pager`` until the client hangs up (stdio) or the process is stopped (HTTP).

    The caller opens the pager (after ``configure_logging()``, with stdout redirected to stderr so
    model-loading chatter never reaches the stdio wire) and closes it when this returns or raises;
    SIGTERM raises ``SystemExit(128 + SIGTERM)`` out of here so that close still runs. HTTP needs
    ``guard`` (its token file, allowed hosts and origins, caps: http_guard); stdio ignores it.
    """
    settings = None
    if http:  # the token first: a server that cannot authenticate anyone must not start at all
        options = guard if guard is not None else http_guard.GuardOptions(token_file=None)
        token, notice = http_guard.resolve_token(options)
        settings = http_guard.settings_for(options, port, token)
        print(notice, file=sys.stderr, flush=True)  # printed, not logged: log lines may be shipped elsewhere
    server = build_server(pager, goal=goal)
    where = f"http://{HOST}:{port}/mcp" if http else "stdio"
    log.info(
        "mempager MCP server on %s: store %s, actor %s, embedder %s",
        where,
        pager.store.location,
        pager.actor,
        pager.semantic.model,
    )
    with _sigterm_exits():
        if settings is not None:
            print(f"mempager: web inspector at http://{HOST}:{port}{UI_PATH}/login", file=sys.stderr, flush=True)
            anyio.run(_serve_http, server, port, settings, pager)
        else:
            anyio.run(server.run_stdio_async)
    return 0
