"""Every setting mempager reads from the environment, in one table.

Three places read ``MEMPAGER_*`` variables: ``PagerConfig.from_env`` (one variable per int, float
and bool field, and the string choices ``embedder``, ``memory_mode``, ``salience_mode``,
``fusion``), ``EmbedderSettings.from_env`` (the gateway, provider and local model, and the HTTP
timeouts), and the edges (the command line's store and actor, the MCP server's log level). This
module lists them all, one description each; ``mempager config`` prints them with their current
values and the README's table is generated from them::

    python -m mempager.settings_table                            # print the README table
    python -m mempager.settings_table --write-readme README.md   # rewrite it between the markers

Resolving never raises: a value the program would reject is reported ``invalid: <why>``. Secrets
(tokens, API keys) are never shown, and a URL's password is masked.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from mempager.config import PagerConfig
from mempager.embedders.settings import _NUMBERS as EMBEDDER_NUMBERS
from mempager.embedders.settings import EmbedderSettings
from mempager.errors import ConfigError, PagerError
from mempager.llm.settings import LLMSettings
from mempager.settings_docs import (
    AUTO,
    CLI,
    DEFAULT_STORE,
    EMBEDDER,
    EMBEDDING,
    END,
    ENDPOINTS,
    GROUPS,
    HIDDEN,
    LLM_READER,
    LLM_STEPS,
    LOG_LEVELS,
    PAGER,
    REGENERATE,
    START,
    Resolved,
    Setting,
    Value,
)
from mempager.settings_docs import EDGES as _EDGES
from mempager.settings_docs import NUMBER_DOCS as _NUMBER_DOCS
from mempager.settings_docs import PAGER_CHOICES as _PAGER_CHOICES
from mempager.settings_docs import PAGER_DOCS as _PAGER_DOCS
from mempager.settings_docs import PAGER_TYPES as _PAGER_TYPES
from mempager.settings_endpoints import EMBEDDER_TEXT as _EMBEDDER_TEXT
from mempager.settings_endpoints import LLM_TEXT as _LLM_TEXT
from mempager.validate import check_actor


def _pager_fields() -> Iterator[dataclasses.Field[Any]]:
    for f in dataclasses.fields(PagerConfig):
        if f.name in _PAGER_CHOICES or f.type in _PAGER_TYPES:
            yield f


def code_only_fields() -> list[str]:
    """``PagerConfig`` fields no variable sets (mappings, tuples, the token estimator)."""
    readable = {f.name for f in _pager_fields()}
    return [f.name for f in dataclasses.fields(PagerConfig) if f.name not in readable]


def settings() -> list[Setting]:
    """Every setting, grouped (``GROUPS`` order), in the order each reader declares them."""
    rows: list[Setting] = list(_EDGES)
    for f in _pager_fields():
        group, description = _PAGER_DOCS.get(f.name, (EMBEDDING, ""))
        default = f.default if isinstance(f.default, (str, int, float, bool)) else None
        if f.type == "int | None" and f.default is None:
            default = AUTO
        rows.append(Setting(f"MEMPAGER_{f.name.upper()}", f.name, default, description, group))
    embedder_fields = {f.name: f for f in dataclasses.fields(EmbedderSettings)}
    texts = [(env, name, description) for env, name, description in _EMBEDDER_TEXT]
    numbers = [(env, name, _NUMBER_DOCS.get(env, "")) for env, name, _kind in EMBEDDER_NUMBERS]
    for env, name, description in texts + numbers:
        f = embedder_fields[name]
        default = f.default if isinstance(f.default, (str, int, float, bool)) else None
        secret = not f.repr  # EmbedderSettings keeps its secrets out of repr
        rows.append(Setting(env, name, default, description, ENDPOINTS, secret=secret, read_by=EMBEDDER))
    llm_fields = {f.name: f for f in dataclasses.fields(LLMSettings)}
    for env, name, description in _LLM_TEXT:
        secret = not llm_fields[name].repr
        rows.append(Setting(env, name, None, description, LLM_STEPS, secret=secret, read_by=LLM_READER))
    order = {group: i for i, group in enumerate(GROUPS)}
    return sorted(rows, key=lambda s: order.get(s.group, len(GROUPS)))  # stable: keeps each reader's order


# ---------------------------------------------------------------------------------------------
# resolving against an environment


def _is_set(setting: Setting, raw: str) -> bool:
    """Whether the reader counts ``raw`` as set: EmbedderSettings ignores blank values, the CLI empty
    ones (``os.environ.get(...) or default``); PagerConfig and the server read whatever is there."""
    if setting.read_by in (EMBEDDER, LLM_READER):
        return bool(raw.strip())
    return bool(raw) or setting.read_by != CLI


def _read(given: Mapping[str, str]) -> dict[tuple[str, str], Value]:
    """The value of each setting, read by the program's own readers; raises what they raise."""
    cfg = PagerConfig.from_env(given)
    actor = check_actor(given["MEMPAGER_ACTOR"]) if "MEMPAGER_ACTOR" in given else "default"
    emb = EmbedderSettings.from_env(
        given, actor=actor, force=cfg.embedder, hash_dim=cfg.hash_dim, defer_local=cfg.defer_model_load
    )
    level = given.get("MEMPAGER_LOG_LEVEL", "INFO").upper()  # as configure_logging reads it
    if level not in (*LOG_LEVELS, "WARN", "FATAL", "NOTSET"):
        raise ConfigError(
            f"MEMPAGER_LOG_LEVEL must be one of {', '.join(LOG_LEVELS)}, got {given['MEMPAGER_LOG_LEVEL']!r} "
            "(the server logs at INFO)"
        )
    llm = LLMSettings.from_env(given)
    values: dict[tuple[str, str], Value] = {}
    for s in settings():
        if s.read_by == PAGER:
            value = getattr(cfg, s.name)
            values[s.env, s.name] = AUTO if value is None and s.default == AUTO else value
        elif s.read_by == EMBEDDER:
            values[s.env, s.name] = getattr(emb, s.name)
        elif s.read_by == LLM_READER:
            values[s.env, s.name] = getattr(llm, s.name)
    if "MEMPAGER_LOCAL_MODEL" in given:  # "off" leaves local_model None: show what was asked
        values["MEMPAGER_LOCAL_MODEL", "local_model"] = given["MEMPAGER_LOCAL_MODEL"].strip()
    values["MEMPAGER_STORE", "store"] = given.get("MEMPAGER_STORE", DEFAULT_STORE)
    values["MEMPAGER_ACTOR", "actor"] = actor
    values["MEMPAGER_LOG_LEVEL", "log_level"] = level
    values["MEMPAGER_HTTP_TOKEN", "http_token"] = given.get("MEMPAGER_HTTP_TOKEN")  # secret: shown as set or not
    return values


def _culprits(message: str, live: Mapping[str, str], table: Sequence[Setting]) -> list[str]:
    """The variables among ``live`` an error message names (by variable or by field name)."""
    found = []
    for env in live:
        names = {env} | {s.name for s in table if s.env == env}
        if any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", message) for n in names):
            found.append(env)
    return found


def resolve(environ: Mapping[str, str] | None = None) -> list[Resolved]:
    """Every setting with the value in effect under ``environ`` (``os.environ`` when None) and its
    source. Never raises: a value the program would reject is reported ``invalid: <why>`` (the
    others are then read without it), and secrets are never returned."""
    env = os.environ if environ is None else environ
    table = settings()
    live = {s.env: env[s.env] for s in table if s.env in env and _is_set(s, env[s.env])}
    problems: dict[str, str] = {}
    while True:
        try:
            values = _read(live)
            break
        except PagerError as exc:
            message = str(exc)
            culprits = _culprits(message, live, table) or list(live)
            if not culprits:
                raise  # the defaults themselves are invalid: a bug, not a setting
            for key in culprits:
                problems[key] = message
                del live[key]
    secrets = [env[s.env] for s in table if s.secret and s.env in env and env[s.env].strip()]
    rows: list[Resolved] = []
    for s in table:
        if s.env in problems:
            value: Value = env[s.env]
            source = "invalid: " + _hide(problems[s.env], secrets)
        elif s.env in live:
            value, source = values[s.env, s.name], "environment"
        else:
            value, source = s.default, "default"
        if s.secret:
            value = HIDDEN if s.env in live or s.env in problems else None
        elif isinstance(value, str):
            value = redact_url(value)
        rows.append(Resolved(s, value, source))
    return rows


def redact_url(text: str) -> str:
    """``text`` with the password of a URL replaced by ``***`` (anything else is returned as is)."""
    try:
        parts = urlsplit(text.strip())
        password = parts.password
    except ValueError:
        return text
    if not parts.scheme or not password:
        return text
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def _hide(message: str, secrets: Sequence[str]) -> str:
    for secret in (s.strip() for s in secrets):
        if len(secret) >= 4:  # a shorter one would mangle the message; no reader echoes secrets anyway
            message = message.replace(secret, "***")
    for url in re.findall(r"[A-Za-z][A-Za-z0-9+.-]*://\S+", message):
        message = message.replace(url, redact_url(url))
    return message


def shown(value: Value) -> str:
    """A value as ``mempager config`` and the README show it."""
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# ---------------------------------------------------------------------------------------------
# the README's table


def markdown_table() -> str:
    """The README's settings table: variable, default and what it does, one table per group."""
    parts: list[str] = [
        f"<!-- generated from pager/settings_table.py by `{REGENERATE}`; do not edit by hand -->",
    ]
    table = settings()
    for group in GROUPS:
        rows = [s for s in table if s.group == group]
        if not rows:
            continue
        parts += ["", f"**{group}**", "", "| Variable | Default | What it does |", "| --- | --- | --- |"]
        for s in rows:
            default = "(unset)" if s.default is None else f"`{shown(s.default)}`"
            parts.append(f"| `{s.env}` | {default} | {_cell(s.description)} |")
    names = ", ".join(f"`{name}`" for name in code_only_fields())
    parts += ["", f"Set in code only (`PagerConfig(...)`, no variable): {names}."]
    return "\n".join(parts) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def replace_block(document: str, block: str) -> str:
    """``document`` with the text between the markers replaced by ``block``."""
    start, end = document.find(START), document.find(END)
    if start < 0 or end < start:
        raise ConfigError(f"no {START} ... {END} block to replace")
    return document[: start + len(START)] + "\n" + block + document[end:]


def readme_block(document: str) -> str:
    """The text between the markers (empty when they are missing)."""
    start, end = document.find(START), document.find(END)
    if start < 0 or end < start:
        return ""
    return document[start + len(START) : end].strip("\n") + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m mempager.settings_table [--write-readme README.md]``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        sys.stdout.write(markdown_table())
        return 0
    if len(args) == 2 and args[0] == "--write-readme":
        path = Path(args[1])
        try:
            text = path.read_text(encoding="utf-8")
            updated = replace_block(text, markdown_table())
        except (OSError, ConfigError) as exc:
            print(f"mempager.settings_table: {path}: {exc}", file=sys.stderr)
            return 2
        if updated != text:
            path.write_text(updated, encoding="utf-8")
        print(f"{path}: settings table {'rewritten' if updated != text else 'already current'}", file=sys.stderr)
        return 0
    print(f"usage: python -m mempager.settings_table [--write-readme README.md]  (got {args})", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
