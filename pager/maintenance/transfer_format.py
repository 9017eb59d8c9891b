"""The ``mempager.export.v1`` format: one JSON object per line, written and validated here.

Line 1 is a header::

    {"format": "mempager.export.v1", "store": "...", "actor": "neo", "count": 2,
     "vectors": "float32-le-base64" | null, "models": {"hash-v2-384": 384}}

then one line per memory, ordered by ``created_at`` then ``id``, with every field of ``Memory``
(except the store-internal ``label``): id, uri, actor, type, text, source, scope, confidence,
importance, strength, created_at, updated_at, last_accessed_at, access_count, tags, metadata,
content_hash, superseded_by, valid_until. Times are ISO-8601 in UTC. With vectors, a memory line
also has ``"vectors": [{"model": "hash-v2-384", "dim": 384, "data": "<base64>"}]``: ``data`` is
the vector's ``dim`` float32 values, little-endian, base64-encoded (exact, and a third of the size
of decimal floats). A reader also accepts ``"values": [0.1, ...]`` (plain floats) instead of
``data``, for files written by hand or by other tools.

Reading is strict: every line is checked before anything is written, and a bad line raises
``InvalidImportLine`` naming its line number. Only ``type`` and ``text`` are required, so a
hand-written file of ``{"type": "fact", "text": "..."}`` lines imports too.

After the memories come the actor's crystals and spores, lines with a ``"kind"`` (a memory line
has none, or ``"memory"``), counted in the header as ``"crystals"`` and ``"spores"``; their
format, and why the format keeps its name, is ``transfer_tiers``. ``LineReader`` hands such a
line to the handler of its kind.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import numpy as np

from mempager.errors import InvalidInput, PagerError
from mempager.patterns import PREFIX, PatternSpec
from mempager.store.writes import dedup_key_of
from mempager.types import FloatMatrix, Memory, MemoryType, NewMemory
from mempager.validate import check_actor, content_hash, make_uri, parse_time
from mempager.writing.build import MemoryBuilder

FORMAT = "mempager.export.v1"
VECTOR_ENCODING = "float32-le-base64"
_BUILT = ("source", "scope", "confidence", "importance", "strength", "created_at", "tags", "metadata")
_KEYS = frozenset(
    {
        "kind",  # "memory" or absent; other kinds are not memory lines
        "id",
        "uri",
        "actor",
        "type",
        "text",
        *_BUILT,
        "updated_at",
        "last_accessed_at",
        "access_count",
        "content_hash",
        "superseded_by",
        "valid_until",
        "vectors",
    }
)


class InvalidImportLine(InvalidInput):
    """A line of an import file is not a memory mempager can restore; nothing was written."""

    def __init__(self, line: int, problem: str) -> None:
        super().__init__(f"line {line}: {problem}; nothing was imported")
        self.line = line


# -- writing ----------------------------------------------------------------------------------
def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def header_record(
    store: str, actor: str, count: int, models: Mapping[str, int] | None, kinds: Mapping[str, int] | None = None
) -> dict[str, Any]:
    """The first line. ``models`` (model -> dim) is None when the file holds no vectors; ``kinds``
    counts the lines of each other kind (``{"crystal": 2}`` is written ``"crystals": 2``)."""
    return {
        "format": FORMAT,
        "store": store,
        "actor": actor,
        "count": count,
        "vectors": None if models is None else VECTOR_ENCODING,
        "models": dict(sorted((models or {}).items())),
        **{f"{kind}s": n for kind, n in sorted((kinds or {}).items())},
    }


def memory_record(memory: Memory, vectors: Mapping[str, FloatMatrix] | None = None) -> dict[str, Any]:
    """Every field of ``memory`` as JSON values (and, given, its vectors per model)."""
    record: dict[str, Any] = {
        "id": memory.id,
        "uri": memory.uri,
        "actor": memory.actor,
        "type": memory.type.value,
        "text": memory.text,
        "source": memory.source.value,
        "scope": memory.scope.value,
        "confidence": memory.confidence,
        "importance": memory.importance,
        "strength": memory.strength,
        "created_at": _iso(memory.created_at),
        "updated_at": _iso(memory.updated_at),
        "last_accessed_at": _iso(memory.last_accessed_at),
        "access_count": memory.access_count,
        "tags": list(memory.tags),
        "metadata": dict(memory.metadata),
        "content_hash": memory.content_hash,
        "superseded_by": memory.superseded_by,
        "valid_until": _iso(memory.valid_until),
    }
    if vectors is not None:
        record["vectors"] = [
            {
                "model": model,
                "dim": int(vec.shape[-1]),
                "data": base64.b64encode(np.ascontiguousarray(vec, dtype="<f4").tobytes()).decode("ascii"),
            }
            for model, vec in sorted(vectors.items())
        ]
    return record


def dumps(record: Mapping[str, Any]) -> str:
    """One line, the same bytes for the same record (sorted keys, no ASCII escaping)."""
    return json.dumps(record, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)


# -- reading ----------------------------------------------------------------------------------
@dataclass(slots=True)
class ImportedLine:
    """One validated memory line: what to write, and what to restore after the write."""

    line: int
    item: NewMemory  # its dedup_key set: what the store dedups it by
    old_uri: str | None  # the uri it had where it was exported (to remap references to it)
    access_count: int
    last_accessed_at: datetime | None
    superseded_by: str | None
    valid_until: datetime | None
    vectors: dict[str, FloatMatrix] = field(default_factory=dict)  # model -> (dim,) float32


def import_key(item: NewMemory) -> str:
    """The dedup key an import writes ``item`` with: a pattern's structured key, else the store's
    own (an event with its time is timed, so two events of the same words at two times stay two)."""
    if item.type is MemoryType.PATTERN and item.text.startswith(PREFIX):
        try:
            return PatternSpec.decode(item.text).dedup_key()
        except (InvalidInput, ValueError):
            pass  # a malformed spec dedups by its words, as a plain write of it would
    return dedup_key_of(item)


def lookup_keys(item: NewMemory) -> list[tuple[str, datetime | None]]:
    """The keys the store may hold ``item`` under, each with the ``created_at`` a memory found by it
    must have (None: any). Its import key first; then the key a plain write of its words has (an
    event written without a time; a pattern written as plain text), which another time does not match."""
    assert item.dedup_key is not None
    keys: list[tuple[str, datetime | None]] = [(item.dedup_key, None)]
    plain = dedup_key_of(replace(item, created_at=None, dedup_key=None))
    if plain != item.dedup_key:
        keys.append((plain, item.created_at if item.type is MemoryType.EVENT else None))
    return keys


def possible_keys(memory: Memory) -> set[str]:
    """Every dedup key a stored memory may carry (the store does not say which it has)."""
    plain = NewMemory(actor=memory.actor, type=memory.type, text=memory.text)
    keys = {dedup_key_of(plain)}
    if memory.type is MemoryType.EVENT:
        keys.add(dedup_key_of(replace(plain, created_at=memory.created_at)))
    if memory.type is MemoryType.PATTERN:
        keys.add(import_key(plain))
    return keys


Handler = Callable[[int, Mapping[str, Any]], None]  # validates (and keeps) a line of another kind


class LineReader:
    """Parses and validates the lines of an import into ``ImportedLine`` values, one actor's way;
    a line of another ``kind`` goes to that kind's handler (``kinds``), which raises when it is bad."""

    def __init__(
        self, build: MemoryBuilder, actor: str, *, keep_actor: bool, kinds: Mapping[str, Handler] | None = None
    ) -> None:
        self.build = build
        self.actor = actor
        self.keep_actor = keep_actor
        self.kinds = dict(kinds or {})
        self.counts = dict.fromkeys(self.kinds, 0)  # kind -> its lines read
        self.dims: dict[str, tuple[int, int]] = {}  # model -> (dim, first line that had it)

    def read(self, lines: Iterable[str]) -> list[ImportedLine]:
        out: list[ImportedLine] = []
        header: tuple[int, Mapping[str, Any]] | None = None
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise InvalidImportLine(number, f"not JSON ({exc.msg} at column {exc.colno})") from None
            if not isinstance(obj, dict):
                raise InvalidImportLine(number, f"expected a JSON object, got {type(obj).__name__}")
            if "format" in obj:
                if header is not None or out or any(self.counts.values()):
                    raise InvalidImportLine(number, "a header line (with 'format') may only be the first line")
                if obj["format"] != FORMAT:
                    raise InvalidImportLine(number, f"format {obj['format']!r} is not {FORMAT!r}")
                header = (number, obj)
                continue
            kind = obj.get("kind", "memory")
            if kind != "memory":
                handler = self.kinds.get(kind) if isinstance(kind, str) else None
                if handler is None:
                    known = ", ".join(repr(k) for k in ["memory", *self.kinds])
                    raise InvalidImportLine(number, f"unknown kind {kind!r}; a line's kind is one of {known}")
                handler(number, obj)
                self.counts[kind] += 1
                continue
            out.append(self._line(number, obj))
        if header is not None:
            found = {"count": ("memories", len(out))}
            found.update((f"{kind}s", (f"{kind}s", n)) for kind, n in self.counts.items())
            for name, (what, n) in found.items():
                count = header[1].get(name)
                if count is not None and count != n:
                    raise InvalidImportLine(
                        header[0], f"the header counts {count!r} {what} but the file holds {n} (truncated?)"
                    )
        return out

    def _line(self, number: int, obj: Mapping[str, Any]) -> ImportedLine:
        unknown = set(obj) - _KEYS
        if unknown:
            raise InvalidImportLine(number, f"unknown fields {sorted(unknown)}; known: {sorted(_KEYS)}")
        try:
            return self._parse(number, obj)
        except InvalidImportLine:
            raise
        except PagerError as exc:
            raise InvalidImportLine(number, str(exc)) from None

    def _parse(self, number: int, obj: Mapping[str, Any]) -> ImportedLine:
        if "type" not in obj or "text" not in obj:
            raise InvalidImportLine(number, "a memory needs at least 'type' and 'text'")
        fields = {k: obj[k] for k in _BUILT if obj.get(k) is not None}
        item = self.build(obj["type"], obj["text"], **fields)
        own = obj.get("actor")
        actor = check_actor(own) if own is not None else self.actor
        item = replace(item, actor=actor if self.keep_actor else self.actor)
        item = replace(item, dedup_key=import_key(item))
        chash = obj.get("content_hash")
        if chash is not None and chash != content_hash(item.text):
            raise InvalidImportLine(
                number, "content_hash does not match text (edited?); drop content_hash to import it"
            )
        count = obj.get("access_count", 0)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise InvalidImportLine(number, f"access_count must be a whole number >= 0, got {count!r}")
        for name in ("superseded_by", "uri", "id"):
            if obj.get(name) is not None and not isinstance(obj[name], str):
                raise InvalidImportLine(number, f"{name} must be a string or null, got {obj[name]!r}")
        for name in ("updated_at",):  # kept in the file, not restorable: still it must be a time
            if obj.get(name) is not None:
                parse_time(obj[name], name)
        old_uri = obj.get("uri")
        if old_uri is None and obj.get("id") and own is not None:
            old_uri = make_uri(own, item.type, obj["id"])
        return ImportedLine(
            line=number,
            item=item,
            old_uri=old_uri,
            access_count=count,
            last_accessed_at=_time(obj, "last_accessed_at"),
            superseded_by=obj.get("superseded_by"),
            valid_until=_time(obj, "valid_until"),
            vectors=self._vectors(number, obj.get("vectors")),
        )

    def _vectors(self, number: int, raw: object) -> dict[str, FloatMatrix]:
        if raw is None:
            return {}
        if not isinstance(raw, list):
            raise InvalidImportLine(number, "vectors must be a list of {model, dim, data} objects")
        out: dict[str, FloatMatrix] = {}
        for entry in raw:
            if not isinstance(entry, dict) or not isinstance(entry.get("model"), str) or not entry["model"]:
                raise InvalidImportLine(number, "each vector needs a 'model' name, a 'dim' and 'data' (or 'values')")
            model, dim = entry["model"], entry.get("dim")
            if model in out:
                raise InvalidImportLine(number, f"two vectors of model {model!r}")
            if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0:
                raise InvalidImportLine(number, f"vector of {model!r}: dim must be a positive whole number")
            vec = _decode(number, model, entry)
            if vec.shape != (dim,):
                raise InvalidImportLine(number, f"vector of {model!r} has {vec.size} values, its dim says {dim}")
            if not np.isfinite(vec).all():
                raise InvalidImportLine(number, f"vector of {model!r} holds NaN or infinite values")
            first = self.dims.setdefault(model, (dim, number))
            if first[0] != dim:
                raise InvalidImportLine(number, f"vector of {model!r} is {dim}-d; line {first[1]} has it {first[0]}-d")
            out[model] = vec
        return out


def _decode(number: int, model: str, entry: Mapping[str, Any]) -> FloatMatrix:
    if "data" in entry:
        try:
            blob = base64.b64decode(str(entry["data"]), validate=True)
        except (binascii.Error, ValueError):
            raise InvalidImportLine(number, f"vector of {model!r}: data is not base64") from None
        if len(blob) % 4:
            raise InvalidImportLine(number, f"vector of {model!r}: data is not whole float32 values")
        return np.frombuffer(blob, dtype="<f4").astype(np.float32)
    values = entry.get("values")
    if not isinstance(values, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        raise InvalidImportLine(number, f"vector of {model!r} needs 'data' (base64 float32) or 'values' (numbers)")
    with np.errstate(over="ignore"):
        return np.asarray(values, dtype=np.float32)


def _time(obj: Mapping[str, Any], name: str) -> datetime | None:
    value = obj.get(name)
    return None if value is None else parse_time(value, name)


def remap(value: Any, uris: Mapping[str, str]) -> Any:
    """``value`` with every string that is a key of ``uris`` replaced by its value (deeply)."""
    if isinstance(value, str):
        return uris.get(value, value)
    if isinstance(value, Mapping):
        return {k: remap(v, uris) for k, v in value.items()}
    if isinstance(value, Sequence):
        return [remap(v, uris) for v in value]
    return value
