"""Crystals and spores in an export: ``{"kind": "crystal" | "spore", ...}`` lines after the memories.

A crystal line::

    {"kind": "crystal", "id": "3f9c0a1b2c3d", "uri": "crystal://neo/3f9c0a1b2c3d", "actor": "neo",
     "key": "friday deploys fail", "name": "Friday deploys fail", "body": "...", "source": "user",
     "evidence": [{"id": "<memory id>", "uri": "mem://neo/fact/<memory id>"}],
     "created_at": "2026-06-01T09:00:00+00:00"}

a spore line::

    {"kind": "spore", "id": "...", "uri": "spore://neo/...", "actor": "neo", "text": "Rotate the key",
     "cue": "deploy key" | null, "due_at": "<time>" | null, "status": "open" | "done",
     "created_at": "<time>", "done_at": "<time>" | null}

The header counts them (``"crystals"``, ``"spores"``) as it counts memories, so a file cut short
is refused. The format keeps its name, ``mempager.export.v1``: the change only adds. Every file
written before (memory lines only) imports as it did, memory lines are unchanged, and a reader from
before these records refuses a file holding them at their first line (``kind`` is no memory field,
and it refuses unknown fields) before writing anything: it never takes one for a memory. A file
without them (an actor with no crystals or spores) stays readable by that reader, which a new
format name would have refused for nothing.

Evidence is written by uri: a memory's id and label are new in the store it is imported into, so
an evidence entry follows its memory there, as a memory's references do (``Transfer``'s uri map).
The label (the association graph's key) is the store's own and is never written. An entry whose
memory is neither in the file nor in the store under the crystal's actor (it was forgotten before
the export: its ``uri`` is null) cannot point at anything, and is left out (``evidence_dropped``).

Reading is as strict as for memories (``InvalidImportLine`` with the line number, before anything
is written); only a crystal's ``name`` and a spore's ``text`` are required. A line without an
``id`` gets one derived from its content, so importing a hand-written file twice adds nothing the
second time either.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from mempager.consolidation.crystal import MAX_BODY_BYTES, MAX_NAME_BYTES
from mempager.consolidation.lines import pattern_key
from mempager.errors import PagerError
from mempager.maintenance.transfer_format import InvalidImportLine
from mempager.paging.spores import MAX_CUE_BYTES, MAX_SPORE_BYTES
from mempager.protocols import Store
from mempager.store.tier_types import CRYSTAL_SOURCES, SPORE_STATUSES, Crystal, Evidence, Spore, TierStore
from mempager.types import Memory
from mempager.validate import check_actor, check_text, content_hash, parse_time, parse_uri

CRYSTAL_KEYS = frozenset({"kind", "id", "uri", "actor", "key", "name", "body", "evidence", "source", "created_at"})
SPORE_KEYS = frozenset({"kind", "id", "uri", "actor", "text", "cue", "due_at", "status", "created_at", "done_at"})
_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # it ends a crystal:// or spore:// uri: no slash


# -- writing ----------------------------------------------------------------------------------
def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def crystal_record(crystal: Crystal, memory_uris: Mapping[str, str]) -> dict[str, Any]:
    """A crystal as JSON values; ``memory_uris`` (memory id -> uri, the exported memories) gives
    each evidence entry its memory's uri (null: that memory is gone)."""
    c = crystal
    return {
        "kind": "crystal",
        "id": c.id,
        "uri": c.uri,
        "actor": c.actor,
        "key": c.key,
        "name": c.name,
        "body": c.body,
        "evidence": [{"id": e.id, "uri": memory_uris.get(e.id)} for e in c.evidence],
        "source": c.source,
        "created_at": _iso(c.created_at),
    }


def spore_record(spore: Spore) -> dict[str, Any]:
    s = spore
    return {
        "kind": "spore",
        "id": s.id,
        "uri": s.uri,
        "actor": s.actor,
        "text": s.text,
        "cue": s.cue,
        "due_at": _iso(s.due_at),
        "status": s.status,
        "created_at": _iso(s.created_at),
        "done_at": _iso(s.done_at),
    }


# -- reading ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ImportedCrystal:
    line: int
    crystal: Crystal  # without evidence: that is resolved once the file's memories are in the store
    evidence: tuple[str | None, ...]  # the uris of the memories it cites, where it was exported


@dataclass(slots=True)
class TierReader:
    """Validates crystal and spore lines (``LineReader``'s handlers for their kinds)."""

    actor: str
    keep_actor: bool
    clock: Callable[[], datetime]  # the created_at of a line without one
    crystals: list[ImportedCrystal] = field(default_factory=list)
    spores: list[tuple[int, Spore]] = field(default_factory=list)

    def handlers(self) -> dict[str, Callable[[int, Mapping[str, Any]], None]]:
        return {"crystal": self.crystal, "spore": self.spore}

    def crystal(self, number: int, obj: Mapping[str, Any]) -> None:
        _known(number, obj, CRYSTAL_KEYS, "crystal")
        try:
            self.crystals.append(self._crystal(number, obj))
        except InvalidImportLine:
            raise
        except PagerError as exc:  # the shared checks (text, actor, time) say what is wrong; add where
            raise InvalidImportLine(number, str(exc)) from None

    def spore(self, number: int, obj: Mapping[str, Any]) -> None:
        _known(number, obj, SPORE_KEYS, "spore")
        try:
            self.spores.append((number, self._spore(number, obj)))
        except InvalidImportLine:
            raise
        except PagerError as exc:
            raise InvalidImportLine(number, str(exc)) from None

    def _crystal(self, number: int, obj: Mapping[str, Any]) -> ImportedCrystal:
        if "name" not in obj:
            raise InvalidImportLine(number, "a crystal needs at least 'name' (and usually 'body')")
        name = check_text(obj["name"], MAX_NAME_BYTES, "name")
        body = name if obj.get("body") is None else check_text(obj["body"], MAX_BODY_BYTES, "body")
        key = pattern_key(name)
        if obj.get("key") is not None and obj["key"] != key:
            raise InvalidImportLine(
                number, f"key {obj['key']!r} is not the pattern key of the name (edited?); drop key"
            )
        source = obj.get("source", "user")
        if source not in CRYSTAL_SOURCES:
            raise InvalidImportLine(
                number, f"a crystal's source is one of {', '.join(CRYSTAL_SOURCES)}; got {source!r}"
            )
        evidence = _evidence(number, obj.get("evidence"))
        cid = _id(number, obj, "crystal") or content_hash(f"crystal\n{key}")[:12]
        crystal = Crystal(self._actor(obj), cid, key, name, body, (), source, self._created(obj))
        return ImportedCrystal(number, crystal, evidence)

    def _spore(self, number: int, obj: Mapping[str, Any]) -> Spore:
        if "text" not in obj:
            raise InvalidImportLine(number, "a spore needs at least 'text'")
        text = check_text(obj["text"], MAX_SPORE_BYTES, "spore")
        cue = None if obj.get("cue") is None else check_text(obj["cue"], MAX_CUE_BYTES, "cue")
        status = obj.get("status", "open")
        if status not in SPORE_STATUSES:
            raise InvalidImportLine(number, f"a spore's status is one of {', '.join(SPORE_STATUSES)}; got {status!r}")
        due, done = _time(obj, "due_at"), _time(obj, "done_at")
        if (status == "done") != (done is not None):
            raise InvalidImportLine(
                number, "a done spore needs its done_at, an open one has none; set status and done_at together"
            )
        derived = content_hash(f"spore\n{text}\n{cue or ''}\n{_iso(due) or ''}\n{obj.get('created_at') or ''}")
        sid = _id(number, obj, "spore") or derived[:12]
        return Spore(self._actor(obj), sid, text, cue, due, status, self._created(obj), done)

    def _actor(self, obj: Mapping[str, Any]) -> str:
        own = obj.get("actor")
        actor = check_actor(own) if own is not None else self.actor  # checked even when not kept
        return actor if self.keep_actor else self.actor

    def _created(self, obj: Mapping[str, Any]) -> datetime:
        created = _time(obj, "created_at")
        return self.clock() if created is None else created


def _known(number: int, obj: Mapping[str, Any], keys: frozenset[str], kind: str) -> None:
    unknown = set(obj) - keys
    if unknown:
        raise InvalidImportLine(number, f"unknown fields {sorted(unknown)} of a {kind}; known: {sorted(keys)}")


def _id(number: int, obj: Mapping[str, Any], kind: str) -> str | None:
    for name in ("id", "uri"):
        if obj.get(name) is not None and not isinstance(obj[name], str):
            raise InvalidImportLine(number, f"{name} must be a string or null, got {obj[name]!r}")
    uri = obj.get("uri")
    if uri is not None and not uri.startswith(f"{kind}://"):
        raise InvalidImportLine(number, f"a {kind}'s uri starts with {kind}://, got {uri[:80]!r}")
    value = obj.get("id")
    if value is not None and not _ID.match(value):
        raise InvalidImportLine(number, f"id {value[:80]!r} is not 1-64 letters, digits, '_' or '-'")
    return value


def _evidence(number: int, raw: object) -> tuple[str | None, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InvalidImportLine(number, "evidence must be a list of {id, uri} objects")
    out: list[str | None] = []
    for entry in raw:
        if not isinstance(entry, dict) or "uri" not in entry or set(entry) - {"id", "uri"}:
            raise InvalidImportLine(number, 'each evidence entry is {"uri": <memory uri or null>, "id": ...}')
        if entry.get("id") is not None and not isinstance(entry["id"], str):
            raise InvalidImportLine(number, f"an evidence id must be a string, got {entry['id']!r}")
        uri = entry["uri"]
        if uri is not None:
            parse_uri(uri)  # InvalidUri (a PagerError) names what a memory uri looks like
        out.append(uri)
    return tuple(out)


def _time(obj: Mapping[str, Any], name: str) -> datetime | None:
    value = obj.get(name)
    return None if value is None else parse_time(value, name)


# -- writing them into a store ----------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TierReport:
    crystals: int = 0  # written
    spores: int = 0  # written
    skipped: int = 0  # crystals and spores the actor held already (or repeated in the file)
    evidence_dropped: int = 0  # evidence entries whose memory is nowhere in this store


def import_tiers(store: Store, tiers: TierStore, reader: TierReader, memories: Mapping[str, Memory]) -> TierReport:
    """Write the reader's crystals and spores; ``memories``: the file's memory uris -> that memory here."""
    if not reader.crystals and not reader.spores:
        return TierReport()
    held: dict[str, tuple[set[str], set[str], set[str]]] = {}  # actor -> crystal ids, keys, spore ids

    def of(actor: str) -> tuple[set[str], set[str], set[str]]:
        if actor not in held:
            have = tiers.crystals(actor)
            held[actor] = ({c.id for c in have}, {c.key for c in have}, {s.id for s in tiers.spores(actor)})
        return held[actor]

    crystals: list[Crystal] = []
    dropped = 0
    for line in reader.crystals:
        ids, keys, _ = of(line.crystal.actor)
        if line.crystal.id in ids or line.crystal.key in keys:
            continue
        ids.add(line.crystal.id)
        keys.add(line.crystal.key)
        evidence, lost = _resolve(store, line, memories)
        dropped += lost
        crystals.append(replace(line.crystal, evidence=evidence))
    spores: list[Spore] = []
    for _, spore in reader.spores:
        spore_ids = of(spore.actor)[2]
        if spore.id not in spore_ids:
            spore_ids.add(spore.id)
            spores.append(spore)
    added_c, added_s = tiers.import_tiers(crystals, spores) if crystals or spores else ([], [])
    skipped = len(reader.crystals) + len(reader.spores) - len(added_c) - len(added_s)
    return TierReport(len(added_c), len(added_s), skipped, dropped)


def _resolve(store: Store, line: ImportedCrystal, memories: Mapping[str, Memory]) -> tuple[tuple[Evidence, ...], int]:
    """The crystal's evidence in this store, and how many entries found no memory. Only memories of
    the crystal's own actor count: an evidence edge never crosses actors."""
    actor = line.crystal.actor
    out: dict[str, Evidence] = {}
    lost = 0
    for uri in line.evidence:
        memory = None if uri is None else memories.get(uri)
        if memory is None and uri is not None:
            owner, _, memory_id = parse_uri(uri)
            memory = store.get(actor, memory_id) if owner == actor else None  # cited, not in the file
        if memory is None or memory.actor != actor:
            lost += 1
        else:
            out.setdefault(memory.id, Evidence(memory.id, memory.label))
    return tuple(out.values()), lost
