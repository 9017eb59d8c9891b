"""A LangGraph ``BaseStore`` kept in mempager: ``graph.compile(store=MempagerStore(pager))``.

    import mempager
    from mempager.adapters.langgraph import MempagerStore
    store = MempagerStore(mempager.open("agent.duckdb", actor="neo"))
    store.put(("memories", "ana"), "food", {"text": "Ana is vegetarian"})
    store.search(("memories",), query="what does Ana eat?")     # through the page-fault lanes

How LangGraph's model maps onto mempager's:

- actor: the pager's. One store serves one actor, the hard partition of the core: a store over
  another actor's pager (even on the same file) sees none of these items.
- namespace: tags. An item carries one tag per prefix of its namespace (hashed, so any label
  fits a tag), so ``search(prefix)`` is a tag filter in the store's SQL; the namespace itself and
  the value live in the memory's metadata, the source of truth for ``get``.
- key: a tag of its own (namespace + key, hashed) makes ``get`` one indexed look-up.
- value: the JSON value in metadata; the memory's text is the value's words (or the fields
  ``index`` names), headed by the namespace and key, which is what the lexical and semantic lanes
  search. The heading's short digest of (namespace, key) keeps two items from deduplicating into one.
- scope and memory type: fixed per store (``scope="global"``, ``memory_type="fact"``).

A natural-language ``search`` goes through ``Pager.retrieve`` (fused semantic, lexical and salience
lanes), so a fresh write is found before its vector exists. Every item is a memory, so it also
appears in ``Pager.page`` (fenced, as data). TTLs are not supported (``supports_ttl`` is False).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from mempager.adapters import missing
from mempager.core import Pager
from mempager.errors import InvalidInput, MemoryNotFound
from mempager.types import Memory
from mempager.writing.build import check_metadata

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        get_text_at_path,
    )
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing("langgraph", "langgraph", exc) from exc

STORE_TAG = "langgraph-store"  # every item of every MempagerStore: list_namespaces scans these
META_KEY = "langgraph"
_PAGE = 1_000  # memories read per recall while listing namespaces
_DEEP = 4  # a filtered query search retrieves this many times what it returns: filters cut after fusion
_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


class InvalidNamespace(InvalidInput, InvalidNamespaceError):
    """A namespace LangGraph would reject; both mempager's ``InvalidInput`` and LangGraph's error."""


class MempagerStore(BaseStore):
    """LangGraph's key-value store over one mempager ``Pager`` (one actor).

    ``fields``: the value paths whose text is searchable by default (LangGraph's ``index.fields``,
    e.g. ``["text"]``); ``None`` makes every string in the value searchable. A ``put`` may narrow
    it (``index=["title"]``) or turn it off (``index=False``: found by namespace and filter only).
    """

    supports_ttl = False

    def __init__(
        self,
        pager: Pager,
        *,
        fields: Sequence[str] | None = None,
        memory_type: str = "fact",
        scope: str = "global",
    ) -> None:
        if not isinstance(pager, Pager):
            raise InvalidInput(f"MempagerStore needs a mempager.Pager (mempager.open(...)), got {type(pager).__name__}")
        if fields is not None and (isinstance(fields, str) or not all(isinstance(f, str) for f in fields)):
            raise InvalidInput(f"fields must be a list of value paths like ['text'], got {fields!r}")
        self.pager = pager
        self.fields = list(fields) if fields is not None else None
        self.memory_type = memory_type
        self.scope = scope

    # -- the two methods LangGraph's BaseStore asks for ------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order (a read sees the puts before it); one result per op."""
        return [self._one(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        # the pager is synchronous and thread-safe: a worker thread keeps the event loop free
        return await asyncio.to_thread(self.batch, list(ops))

    def _one(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(_namespace(op.namespace, "namespace"), _key(op.key))
        if isinstance(op, PutOp):
            self._put(op)
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise InvalidInput(f"unknown LangGraph store operation {type(op).__name__}: expected GetOp, PutOp, SearchOp")

    # -- operations -----------------------------------------------------------------------------
    def _memory(self, namespace: tuple[str, ...], key: str) -> Memory | None:
        found = self.pager.recall(types=[self.memory_type], tags=[_item_tag(namespace, key)], limit=2)
        # the tag is a hash: the metadata confirms the item, so a collision can never alias another
        return next((m for m in found if _address(m) == (namespace, key)), None)

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        memory = self._memory(namespace, key)
        return None if memory is None else _item(memory)

    def _put(self, op: PutOp) -> None:
        namespace, key = _namespace(op.namespace, "namespace"), _key(op.key)
        if op.ttl is not None:
            raise InvalidInput("MempagerStore does not expire items: put without ttl (supports_ttl is False)")
        current = self._memory(namespace, key)
        if op.value is None:
            if current is not None:
                self.pager.forget(current.uri)
            return
        if not isinstance(op.value, Mapping):
            raise InvalidInput(f"a LangGraph store value must be a dict, got {type(op.value).__name__}")
        try:  # the value is kept as metadata: plain JSON, as LangGraph's own stores require
            value = check_metadata(op.value)
        except InvalidInput as exc:
            raise type(exc)(f"the value of {key!r} in {namespace!r}: {exc}") from exc
        text = _text(namespace, key, value, self._paths(op.index))
        metadata = {META_KEY: {"namespace": list(namespace), "key": key, "value": value}}
        if current is None:
            self.pager.remember(self.memory_type, text, tags=_tags(namespace, key), metadata=metadata, scope=self.scope)
        else:  # in place: the item keeps its memory, its uri and its created_at; updated_at moves
            self.pager.update(current.uri, text=text, metadata=metadata)

    def _paths(self, index: Any) -> list[str] | None:
        if index is None:
            return self.fields
        if index is False:
            return []
        if isinstance(index, str) or not isinstance(index, list) or not all(isinstance(p, str) for p in index):
            raise InvalidInput(f"index must be False, None or a list of value paths, got {index!r}")
        return index

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = _namespace(op.namespace_prefix, "namespace_prefix")
        limit, offset = _count(op.limit, "limit"), _count(op.offset, "offset")
        flt = _check_filter(op.filter)
        tags = [_prefix_tag(prefix)]
        if op.query is None:
            hits: Iterator[tuple[Memory, float | None]] = ((m, None) for m in self._scan(tags))
        else:
            k = (offset + limit) * (_DEEP if flt else 1)
            if k == 0:
                return []
            # no token budget: the caller asked for items, not a page; best first, as LangGraph ranks
            snippets = sorted(self.pager.retrieve(op.query, k=k, budget=2**31, tags=tags), key=lambda s: -s.score)
            hits = ((m, s.score) for s in snippets for m in [self._by_uri(s.uri)] if m is not None)
        out: list[SearchItem] = []
        skipped = 0
        for memory, score in hits:
            item = _item(memory, score)
            if item.namespace[: len(prefix)] != prefix or not _matches(item.value, flt):
                continue
            if skipped < offset:
                skipped += 1
                continue
            if len(out) >= limit:
                break
            out.append(item)
        return out

    def _by_uri(self, uri: str) -> Memory | None:
        try:
            return self.pager.get(uri)
        except MemoryNotFound:  # forgotten between the lanes' answer and this read: not a result
            return None

    def _scan(self, tags: list[str]) -> Iterator[Memory]:
        """Every item with ``tags``, newest first, read a page at a time."""
        offset = 0
        while True:
            rows = self.pager.recall(types=[self.memory_type], tags=tags, limit=_PAGE, offset=offset)
            yield from (m for m in rows if _address(m) is not None)
            if len(rows) < _PAGE:
                return
            offset += _PAGE

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = list(op.match_conditions or ())
        for condition in conditions:
            _check_condition(condition)
        if op.max_depth is not None and (isinstance(op.max_depth, bool) or not isinstance(op.max_depth, int)):
            raise InvalidInput(f"max_depth must be an integer or None, got {op.max_depth!r}")
        limit, offset = _count(op.limit, "limit"), _count(op.offset, "offset")
        found: set[tuple[str, ...]] = set()
        for memory in self._scan([STORE_TAG]):
            address = _address(memory)
            if address is not None and all(_ns_matches(c, address[0]) for c in conditions):
                found.add(address[0] if op.max_depth is None else address[0][: op.max_depth])
        return sorted(found)[offset : offset + limit]


# -- the mapping --------------------------------------------------------------------------------
def _digest(*parts: str) -> str:
    # labels and keys are joined by NUL, which LangGraph forbids in labels: no two paths collide
    return hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:24]


def _prefix_tag(prefix: tuple[str, ...]) -> str:
    return f"lg-ns:{_digest(*prefix)}" if prefix else STORE_TAG


def _item_tag(namespace: tuple[str, ...], key: str) -> str:
    return f"lg-item:{_digest(*namespace, '', key)}"


def _tags(namespace: tuple[str, ...], key: str) -> list[str]:
    prefixes = [_prefix_tag(namespace[:n]) for n in range(1, len(namespace) + 1)]
    return [STORE_TAG, *prefixes, _item_tag(namespace, key)]


def _address(memory: Memory) -> tuple[tuple[str, ...], str] | None:
    """(namespace, key) of a store item; None for any other memory that happens to carry our tag."""
    meta = memory.metadata.get(META_KEY)
    if not isinstance(meta, Mapping) or not isinstance(meta.get("key"), str) or not isinstance(meta.get("value"), dict):
        return None
    namespace = meta.get("namespace")
    if not isinstance(namespace, list) or not all(isinstance(label, str) for label in namespace):
        return None
    return tuple(namespace), meta["key"]


def _item(memory: Memory, score: float | None = None) -> SearchItem:
    address = _address(memory)
    if address is None:  # only memories _address accepts are ever turned into items
        raise InvalidInput(f"{memory.uri} is not a LangGraph store item")
    value = dict(memory.metadata[META_KEY]["value"])
    return SearchItem(address[0], address[1], value, memory.created_at, memory.updated_at, score)


def _text(namespace: tuple[str, ...], key: str, value: dict[str, Any], paths: list[str] | None) -> str:
    """What the lanes search: a heading naming the item, then the value's words."""
    if paths is None:
        words = list(_strings(value))
    else:
        words = [text for path in paths for text in get_text_at_path(value, path)]
    body = "\n".join(w for w in words if w.strip())
    # dedup compares normalised text (case, spacing): ("Foo",) and ("foo",), or a label with a
    # trailing newline, would merge into one memory. The item's digest in the heading keeps every
    # (namespace, key) a text of its own.
    heading = f"{'/'.join(namespace)} · {key} · {_item_tag(namespace, key).split(':')[1][:12]}"
    return heading + (f"\n{body}" if body else "")


def _strings(node: Any, name: str = "") -> Iterator[str]:
    if isinstance(node, str):
        yield f"{name}: {node}" if name else node
    elif isinstance(node, Mapping):
        for field, child in node.items():
            yield from _strings(child, str(field))
    elif isinstance(node, (list, tuple)):
        for child in node:
            yield from _strings(child, name)
    elif node is not None and not isinstance(node, bool):
        yield f"{name}: {json.dumps(node)}" if name else json.dumps(node)


# -- checks: what LangGraph's own methods check, for ops handed to batch() directly --------------
def _namespace(value: Any, what: str) -> tuple[str, ...]:
    """LangGraph's label rules (``validate_op_namespace``). Empty and "langgraph"-rooted namespaces
    are refused by ``BaseStore.put`` before ``batch``; ops handed to ``batch`` may use them, as in
    LangGraph's own stores."""
    if isinstance(value, str) or not isinstance(value, (tuple, list)):
        raise InvalidNamespace(f"{what} must be a tuple of strings like ('memories', 'ana'), got {value!r}")
    namespace = tuple(value)
    for label in namespace:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise InvalidNamespace(f"namespace label {label!r} in {namespace!r}: a non-empty string without '.' or NUL")
    return namespace


def _key(value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"an item key must be a string, got {value!r}")
    return value


def _count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInput(f"{what} must be an integer >= 0, got {value!r}")
    return value


def _check_condition(condition: Any) -> None:
    if not isinstance(condition, MatchCondition) or condition.match_type not in ("prefix", "suffix"):
        raise InvalidInput(f"match conditions are MatchCondition('prefix'|'suffix', path), got {condition!r}")
    _namespace(condition.path, f"{condition.match_type} path")


def _ns_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path) :]
    return all(want == "*" or want == have for want, have in zip(path, part, strict=True))


def _check_filter(flt: Any) -> dict[str, Any]:
    if flt is None:
        return {}
    if not isinstance(flt, Mapping) or not all(isinstance(k, str) for k in flt):
        raise InvalidInput(f"filter must be a dict of value fields, e.g. {{'author': 'Ana'}}, got {flt!r}")
    return dict(flt)


def _matches(value: Mapping[str, Any], flt: Mapping[str, Any]) -> bool:
    return all(_compare(_field(value, name), want) for name, want in flt.items())


def _field(value: Mapping[str, Any], name: str) -> Any:
    """``value[name]``, or a dotted path into nested objects (``"user.access-level"``) as the SQL stores read it."""
    if name in value:
        return value[name]
    node: Any = value
    for part in name.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


def _compare(have: Any, want: Any) -> bool:
    """LangGraph's filter semantics (JSONB-like): nested dicts match field by field, lists exactly,
    and a dict of ``$``-operators compares (``{"score": {"$gte": 3}}``)."""
    if isinstance(want, Mapping):
        if any(isinstance(k, str) and k.startswith("$") for k in want):
            return all(_operator(have, op, operand) for op, operand in want.items())
        return isinstance(have, Mapping) and all(_compare(have.get(k), v) for k, v in want.items())
    if isinstance(want, (list, tuple)):
        return (
            isinstance(have, (list, tuple))
            and len(have) == len(want)
            and all(_compare(h, w) for h, w in zip(have, want, strict=True))
        )
    return bool(have == want)


def _operator(have: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(have == operand)
    if op == "$ne":
        return bool(have != operand)
    if op not in _OPERATORS:
        raise InvalidInput(f"unknown filter operator {op!r}; use one of {', '.join(_OPERATORS)}")
    try:
        a, b = float(have), float(operand)
    except (TypeError, ValueError):  # a missing or non-numeric field is no match, as in SQL
        return False
    return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]


__all__ = ["InvalidNamespace", "MempagerStore"]
