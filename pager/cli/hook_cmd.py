"""Claude Code hooks: ``mempager hook session-start | user-prompt-submit | stop``.

Claude Code runs a hook command with the event as JSON on standard input and reads JSON from its
standard output (https://code.claude.com/docs/en/hooks). In ``.claude/settings.json``:

    {"hooks": {
      "SessionStart":     [{"hooks": [{"type": "command", "command": "mempager hook session-start --actor neo"}]}],
      "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "mempager hook user-prompt-submit --actor neo"}]}],
      "Stop":             [{"hooks": [{"type": "command", "command": "mempager hook stop --actor neo"}]}]}}

- session-start: the continuity (the last session wrap's document), fenced as data, as
  ``hookSpecificOutput.additionalContext``.
- user-prompt-submit: the page for the prompt (pinned block, continuity, procedures, retrieved
  memories, each memory fenced as data) as ``additionalContext``; then the prompt is written back
  as an event, so later pages can recall it.
- stop: the turn's last assistant message is recorded as an outcome (``--outcome``, default
  unknown: Claude Code does not say whether a turn worked) and the session wrap is prepared;
  a ``systemMessage`` tells the user how to save it. Stop never blocks Claude.

A failure exits 1, never 2: for UserPromptSubmit, exit 2 would block the user's prompt, and a
memory problem must not stop the session. Claude Code shows the one-line message on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from typing import Any

from mempager.errors import InvalidInput, PagerError
from mempager.paging.continuity import render_continuity
from mempager.tokens import estimate_tokens, truncate_tokens
from mempager.types import Source
from mempager.validate import check_text
from mempager.writing.writeback import OUTCOMES

COMMAND = "hook"
EVENTS = {"session-start": "SessionStart", "user-prompt-submit": "UserPromptSubmit", "stop": "Stop"}
HOOK_TAG = "claude-code"
EXIT_HOOK_ERROR = 1  # a non-blocking hook error in Claude Code (2 would block the prompt)
MAX_INPUT_BYTES = 10_000_000
SESSION_ID_BYTES = 200  # the bound prepare_wrap checks a session id against (consolidation/wrap.py)
MAX_TURN_TOKENS = 1000  # a pasted log must not crowd every later page (as TurnMemory caps a turn)


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        COMMAND, parents=[common], help="Claude Code hooks: read the hook's JSON on stdin, print its JSON answer"
    )
    p.add_argument("event", choices=sorted(EVENTS), help="the Claude Code hook event this command is set up for")
    p.add_argument("--goal", default=None, help="user-prompt-submit: the goal procedures are chosen for")
    p.add_argument(
        "--outcome",
        choices=OUTCOMES,
        default="unknown",
        help="stop: the outcome recorded for the turn (default unknown)",
    )


def run(args: argparse.Namespace, open_pager: Callable[[argparse.Namespace], Any]) -> int:
    try:
        event = _read_event(_stdin(), EVENTS[args.event])
        with open_pager(args) as p:
            answer = _HANDLERS[args.event](p, event, args)
    except PagerError as exc:
        print(f"mempager hook {args.event}: error: {exc}", file=sys.stderr)
        return EXIT_HOOK_ERROR
    print(json.dumps(answer, ensure_ascii=False))
    return 0


def _stdin() -> str:
    try:
        return sys.stdin.read()
    except UnicodeDecodeError as exc:  # found by tests/reliability/test_fuzz_edges.py: it was a traceback
        raise InvalidInput(f"the hook input is not UTF-8 (byte {exc.start}); Claude Code sends UTF-8 JSON") from None


def _read_event(raw: str, expected: str) -> dict[str, Any]:
    """The hook input, checked: a JSON object for this event (Claude Code names it in hook_event_name)."""
    if len(raw.encode("utf-8", "surrogatepass")) > MAX_INPUT_BYTES:
        raise InvalidInput(f"the hook input is over {MAX_INPUT_BYTES:,} bytes")
    try:
        event = json.loads(raw)
    except ValueError as exc:
        raise InvalidInput(f"the hook input is not JSON ({exc}); Claude Code sends one JSON object on stdin") from exc
    if not isinstance(event, dict):
        raise InvalidInput(f"the hook input must be a JSON object, got {type(event).__name__}")
    name = event.get("hook_event_name", expected)
    if name != expected:
        raise InvalidInput(f"this command handles {expected} events, got hook_event_name {name!r}")
    return event


def _text(event: Mapping[str, Any], name: str) -> str:
    value = event.get(name)
    if not isinstance(value, str):
        raise InvalidInput(f"the hook input's {name!r} must be a string, got {type(value).__name__}")
    return value


def _optional_text(event: Mapping[str, Any], name: str) -> str | None:
    return None if event.get(name) is None else _text(event, name)


def _context(event_name: str, text: str) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": event_name, "additionalContext": text}}


def _session_meta(event: Mapping[str, Any]) -> dict[str, Any]:
    """The session id, checked here as ``prepare_wrap`` checks it: before anything is written, so a
    refused id cannot leave the turn's outcome stored behind the refusal (found by the fuzzer)."""
    session = _optional_text(event, "session_id")
    if session is None or session == "":
        return {}
    return {"claude_session": check_text(session, SESSION_ID_BYTES, "the hook input's 'session_id'")}


def _session_start(p: Any, event: Mapping[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    _optional_text(event, "source")  # startup | resume | clear | compact: all get the continuity
    _session_meta(event)  # checked as in the other events: a malformed input is named, not ignored
    block = render_continuity(p.continuity(), p.config.continuity_budget_tokens, estimate_tokens)
    return _context("SessionStart", block) if block else {}


def _user_prompt_submit(p: Any, event: Mapping[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    prompt = _text(event, "prompt")
    if not prompt.strip():
        return {}  # an empty prompt has nothing to page for, and nothing to remember
    page = p.page(prompt, goal=args.goal)
    # written after paging, so the page is what memory held before this prompt, not the prompt itself
    p.remember(
        "event",
        f"User: {truncate_tokens(prompt.strip(), MAX_TURN_TOKENS)}",
        source=Source.USER,
        tags=[HOOK_TAG],
        metadata={**_session_meta(event), "hook": "UserPromptSubmit"},
    )
    rendered = page.render()
    return _context("UserPromptSubmit", rendered) if rendered.strip() else {}


def _stop(p: Any, event: Mapping[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    meta = _session_meta(event)
    active = event.get("stop_hook_active", False)
    if not isinstance(active, bool):
        raise InvalidInput(f"the hook input's 'stop_hook_active' must be true or false, got {active!r}")
    last = _optional_text(event, "last_assistant_message")  # in the Stop input of recent Claude Code versions
    if last and last.strip():
        p.record_outcome(
            f"Assistant: {truncate_tokens(last.strip(), MAX_TURN_TOKENS)}",
            args.outcome,
            source=Source.OBSERVED,
            tags=[HOOK_TAG],
            metadata={**meta, "hook": "Stop"},
        )
    wrap = p.prepare_wrap(session_id=meta.get("claude_session"))
    if wrap.status != "ready":
        return {}
    return {
        "systemMessage": (
            f"mempager: session wrap {wrap.number} is open ({len(wrap.episodes)} episodes). Compress "
            "`mempager wrap prepare` with your model and save it with `mempager wrap save -`."
        )
    }


_HANDLERS: dict[str, Callable[[Any, Mapping[str, Any], argparse.Namespace], dict[str, Any]]] = {
    "session-start": _session_start,
    "user-prompt-submit": _user_prompt_submit,
    "stop": _stop,
}
