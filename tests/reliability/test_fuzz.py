"""Input fuzzing: every hostile input is accepted or refused with a typed ``mempager.PagerError``.

Never a raw DuckDB, hnswlib or numpy error, never a crash, and the store is intact afterwards: the
memories written before the fuzzing are unchanged after every example and the audit chain verifies.
Where the answer is knowable (text validity, vector shape and dtype) the test also checks that the
right inputs are the ones accepted, and that what was accepted reads back exactly.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import mempager
from mempager import PagerError
from mempager.index.hnsw import HnswIndex
from mempager.validate import normalize

from .conftest import HASH, assert_index_consistent, record, scratch_dir

# Examples per test; together >= 1,000 (the minimum per CI run).
TEXT_EXAMPLES = 300
METADATA_EXAMPLES = 250
FILTER_EXAMPLES = 100
STORE_VECTOR_EXAMPLES = 120
STORE_LABEL_EXAMPLES = 60
HNSW_VECTOR_EXAMPLES = 120
HNSW_LABEL_EXAMPLES = 60
HNSW_QUERY_EXAMPLES = 60
NAME_EXAMPLES = 200
CONFIGURED = {
    "text": TEXT_EXAMPLES,
    "metadata": METADATA_EXAMPLES,
    "filters": FILTER_EXAMPLES,
    "store vectors": STORE_VECTOR_EXAMPLES,
    "store labels": STORE_LABEL_EXAMPLES,
    "hnsw vectors": HNSW_VECTOR_EXAMPLES,
    "hnsw labels": HNSW_LABEL_EXAMPLES,
    "hnsw search": HNSW_QUERY_EXAMPLES,
    "uris and actors": NAME_EXAMPLES,
}
MAX_TEXT_BYTES = 1_000_000  # PagerConfig's default, which the fuzzed pager keeps

SQL = (
    "'; DROP TABLE memories; --",
    '" OR 1=1 --',
    "') UNION SELECT * FROM vectors --",
    "%",
    "_",
    "\\",
    "$1",
    "?",
    "/* */",
    ";",
    "NULL",
    "'",
    '"',
    "`",
    "[]",
    "{}",
    "$$",
    "E'\\x00'",
)
SPECIALS = ("\x00", "\u202e", "\u202d", "\u2066", "\u2069", "\u200b", "\u200f", "\ufeff", "\u0301", "\r", "\t")
chars = st.characters() | st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF) | st.sampled_from(SPECIALS)
hostile_text = st.text(chars, max_size=60) | st.sampled_from(SQL) | st.sampled_from(("", " ", "\n\t ", "\x00"))


def _sized(unit: str, target: int) -> str:
    """``unit`` repeated to just about ``target`` UTF-8 bytes (1 MB and beyond without drawing it byte by byte)."""
    size = len(unit.encode("utf-8", "surrogatepass"))
    return unit * max(1, math.ceil(target / size))


huge_text = st.builds(
    _sized,
    st.sampled_from(("a", "word ", "é", "💥", "\u202e", "x\x00", "\ud800", " ")),
    st.sampled_from((MAX_TEXT_BYTES - 4, MAX_TEXT_BYTES, MAX_TEXT_BYTES + 1, 2 * MAX_TEXT_BYTES)),
)
texts = st.one_of(hostile_text, hostile_text, hostile_text, hostile_text, huge_text)


def text_is_valid(text: str) -> bool:
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return False
    return bool(text.strip()) and "\x00" not in text and size <= MAX_TEXT_BYTES


def typed(fn: Callable[[], Any]) -> tuple[bool, Any]:
    """(True, result) or (False, the PagerError); any other exception fails the test as it is."""
    try:
        return True, fn()
    except PagerError as exc:
        return False, exc


@dataclass
class World:
    """One store for the whole module with a baseline that must survive every example."""

    path: Path
    p: mempager.Pager
    baseline: dict[str, tuple[str, Any]]  # uri -> (text, metadata)
    baseline_vectors: tuple[np.ndarray, np.ndarray] = field(default_factory=lambda: (np.zeros(0), np.zeros(0)))
    meta: mempager.Pager | None = None  # the metadata fuzzing writes as its own actor (see that test)
    examples: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)

    def intact(self) -> None:
        for uri, (text, meta) in self.baseline.items():
            memory = self.p.get(uri)
            assert (memory.text, memory.metadata) == (text, meta), f"baseline memory {uri} changed"
        labels, vectors = self.p.store.vectors(self.p.actor, self.p.semantic.model)
        before_labels, before = self.baseline_vectors
        keep = np.isin(labels, before_labels)
        assert np.array_equal(labels[keep], before_labels), "a baseline memory lost its vector"
        assert np.array_equal(vectors[keep], before), "a baseline vector changed"
        report = self.p.verify_audit()
        assert report.ok, f"audit chain broken: {report}"

    def outcome(self, test: str, accepted: bool, result: Any) -> None:
        self.outcomes[f"{test}: {'accepted' if accepted else type(result).__name__}"] += 1


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with scratch_dir(tmp_path_factory.mktemp("fuzz")) as directory:
        yield from make_world(directory / "agent.duckdb")


def make_world(path: Path) -> Iterator[World]:
    p = mempager.open(path, actor="neo", config=HASH)
    baseline = {}
    for i in range(10):
        meta = {"i": i, "note": "baseline"}
        baseline[p.remember_fact(f"baseline fact {i} about the deploy key", metadata=meta)] = (
            f"baseline fact {i} about the deploy key",
            meta,
        )
    assert p.sync(timeout=30)
    w = World(path, p, baseline, meta=mempager.open(path, actor="meta", config=HASH))
    w.baseline_vectors = p.store.vectors("neo", p.semantic.model)
    try:
        yield w
        assert p.sync(timeout=120)
        assert_index_consistent(p, synced=True, context="after fuzzing")
        w.intact()
    finally:
        p.close()
        if w.meta is not None:
            w.meta.close()
        record(
            "fuzz",
            examples=sum(w.examples.values()),
            per_test=dict(w.examples),
            outcomes=dict(w.outcomes),
            configured=CONFIGURED,
        )


def fuzz(n: int) -> Any:
    return settings(
        max_examples=n,
        deadline=None,
        database=None,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
        ],
    )


# -- text --------------------------------------------------------------------------------------------
@fuzz(TEXT_EXAMPLES)
@example(text="", mtype="fact")
@example(text="\x00", mtype="fact")
@example(text="lone \ud800 surrogate", mtype="fact")
@example(text="\u202eevil\u202c bidi \u2066isolate\u2069", mtype="fact")
@example(text=_sized("word ", MAX_TEXT_BYTES + 1), mtype="event")
@example(text=_sized("a", MAX_TEXT_BYTES), mtype="fact")
@example(text="'; DROP TABLE memories; --", mtype="rule")
@given(text=texts, mtype=st.sampled_from(["fact", "event", "profile", "rule"]))
def test_text(world: World, text: str, mtype: str) -> None:
    p = world.p
    world.examples["text"] += 1
    accepted, result = typed(lambda: p.remember(mtype, text))
    world.outcome("text", accepted, result)
    assert accepted == text_is_valid(text), f"accepted={accepted} for a text that is valid={text_is_valid(text)}"
    if accepted:
        stored = p.get(result).text
        assert stored == text or normalize(stored) == normalize(text), "stored text differs (and is not a dedup)"
    if len(text) < 10_000:  # the same text as a query: a 1 MB query is a different benchmark
        for read in (lambda: p.retrieve(text, k=3), lambda: p.recall(text, limit=3)):
            ok, got = typed(read)
            if ok:
                assert all(s.uri.startswith("mem://neo/") for s in got)
    world.intact()


# -- metadata and tags ---------------------------------------------------------------------------------
def _nest(depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {"leaf": "'; DROP TABLE memories; --"}
    for i in range(depth):
        out = {f"level{i}": out}
    return out


keys = st.text(chars, max_size=12) | st.sampled_from(SQL)
leaves = st.none() | st.booleans() | st.integers() | st.floats() | st.text(chars, max_size=20) | st.sampled_from(SQL)
json_like = st.recursive(
    leaves, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3), max_leaves=20
)
odd_metadata = st.sampled_from(
    [
        {"a": {1, 2}},
        {"a": b"bytes"},
        {(1, 2): "tuple key"},
        {"a": object()},
        {"a": 10**400},
        {1: "int key"},
        {None: "none key"},
        {"a": datetime(2024, 1, 1, tzinfo=timezone.utc)},
        {"a": Decimal("1.1")},
        {"a": float("nan"), "b": float("inf")},
        {"\ud800": "\udfff"},
        {"a": "\x00"},
        [1, 2],
        "a string",
        None,
        42,
    ]
)
# Hypothesis itself overflows the stack pretty-printing an example nested ~900 deep, so deep
# nesting beyond 200 is covered by test_deeply_nested_metadata below rather than generated here.
metadata = st.dictionaries(keys, json_like, max_size=4) | st.integers(1, 200).map(_nest) | odd_metadata
tags = st.lists(st.text(chars, max_size=12) | st.sampled_from(SQL) | st.just("x" * 201), max_size=4)


@fuzz(METADATA_EXAMPLES)
@example(meta={"'; DROP TABLE memories; --": '" OR 1=1 --'}, tag_list=["'; --", "%"])
@example(meta={"a": {1, 2}}, tag_list=[])
@example(meta={"ok": 1}, tag_list=["\ud800"])
@given(meta=metadata, tag_list=tags | st.just([]))
def test_metadata_and_tags(world: World, meta: Any, tag_list: list[str]) -> None:
    # Its own actor: an accepted memory that cannot be read back would otherwise break every
    # other test's reads of the baseline, and the failure would be blamed on them.
    p = world.meta
    assert p is not None
    world.examples["metadata"] += 1
    text = f"metadata example {world.examples['metadata']}"
    accepted, result = typed(lambda: p.remember_fact(text, metadata=meta, tags=tag_list))
    world.outcome("metadata", accepted, result)
    if accepted:
        # Applications call the pager from frameworks, servers and callbacks: an accepted memory
        # must read back from a stack that is already 200 frames deep, not only from a shallow one.
        memory = at_depth(200, lambda: p.get(result))
        assert memory.text == text
        # what comes back is what JSON can say about what went in
        assert json.dumps(memory.metadata, sort_keys=True) == json.dumps(meta, sort_keys=True)
        assert list(memory.tags) == list(tag_list)
        for tag in set(tag_list):
            assert result in {m.uri for m in p.recall(tags=[tag], limit=1_000_000)}
    else:
        assert text not in {m.text for m in p.recall(limit=1_000_000)}, "a refused write left a memory behind"
    world.intact()


@pytest.mark.parametrize("depth", [33, 900, 5000])
def test_deeply_nested_metadata(world: World, depth: int) -> None:
    p = world.meta
    assert p is not None
    accepted, result = typed(lambda: p.remember_fact(f"deep metadata {depth}", metadata=_nest(depth)))
    assert not accepted and isinstance(result, mempager.InvalidInput)
    world.intact()


def at_depth(frames: int, call: Callable[[], Any]) -> Any:
    return call() if frames == 0 else at_depth(frames - 1, call)


# -- recall / forget filters -----------------------------------------------------------------------------
filters = st.fixed_dictionaries(
    {},
    optional={
        "query": hostile_text,
        "types": st.lists(st.sampled_from(["fact", "event", "FACT", "nope", "'; --", ""]) | hostile_text, max_size=2),
        "tags": st.lists(hostile_text, max_size=2),
        "source": st.lists(st.sampled_from(["user", "observed", "llm", "nope", "' OR 1=1"]), max_size=2),
        "since": st.sampled_from(["7d", "2024-01-01", "'; --", "yesterday", 1e20, -1, None]),
        "until": st.sampled_from(["2999-01-01", "not a time", 0]),
        "limit": st.sampled_from([1, 20, 0, -1, 10**12, 1.5, "5"]),
        "offset": st.sampled_from([0, 3, -1, 10**12]),
    },
)


@fuzz(FILTER_EXAMPLES)
@example(where={"source": ["nope"]}, stray=None)
@example(where={"tags": ["'; DROP TABLE memories; --"], "query": "' OR 1=1 --"}, stray=None)
@example(where={}, stray="bogus")
@given(where=filters, stray=st.none() | st.sampled_from(["bogus", "limit", "actor", "hard", "'; --"]))
def test_recall_and_forget_filters(world: World, where: dict[str, Any], stray: str | None) -> None:
    """``where`` often comes from outside (CLI, MCP, JSON): a key forget does not know is input too."""
    p = world.p
    world.examples["filters"] += 1
    accepted, result = typed(lambda: p.recall(**where))
    world.outcome("filters", accepted, result)
    if accepted:
        assert all(m.actor == "neo" for m in result)
    # forget with the same filters, narrowed to nothing that exists: it must refuse or forget nothing
    narrowed = {k: v for k, v in where.items() if k not in ("limit", "offset")}
    narrowed["tags"] = [*narrowed.get("tags", []), "no-memory-has-this-tag"]
    if stray is not None:
        narrowed[stray] = 5
    ok, count = typed(lambda: p.forget(actor="neo", where=narrowed, hard=False))
    if ok:
        assert count == 0
    world.intact()


# -- vectors into the store ---------------------------------------------------------------------------------
# "words" and "objects" are arrays numpy cannot read as numbers (str/object arrays of numbers it can).
DTYPES = (
    np.float32,
    np.float32,
    np.float32,
    np.float32,
    np.float64,
    np.float16,
    np.int32,
    np.bool_,
    np.complex64,
    np.object_,
    np.str_,
    "words",
    "objects",
)
VALUES = ("normal", "zeros", "nan", "inf", "-inf", "huge", "tiny")


def make_vectors(dtype: Any, shape: tuple[int, ...], values: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = rng.standard_normal(shape) if all(shape) else np.zeros(shape)
    special = {"zeros": 0.0, "nan": math.nan, "inf": math.inf, "-inf": -math.inf, "huge": 1e300, "tiny": 1e-320}
    if values in special and base.size:
        base.flat[rng.integers(0, base.size)] = special[values]
        if values == "zeros":
            base[...] = 0.0
    if dtype == "words":
        return np.full(shape, "seven", dtype=str)
    if dtype == "objects":
        out = np.empty(shape, dtype=object)
        out[...] = None
        return out
    if dtype is np.str_:
        return base.astype(str)
    if dtype is np.object_:
        return base.astype(object)
    with np.errstate(all="ignore"):
        return base.astype(dtype)


shapes = st.sampled_from(["ok", "ok", "ok", "ok", "1d", "3d", "extra row", "missing row", "wrong dim", "zero dim"])


def shaped(kind: str, n: int, dim: int) -> tuple[int, ...]:
    return {
        "ok": (n, dim),
        "1d": (dim,),
        "3d": (n, dim, 1),
        "extra row": (n + 1, dim),
        "missing row": (max(0, n - 1), dim),
        "wrong dim": (n, dim + 1),
        "zero dim": (n, 0),
    }[kind]


@fuzz(STORE_VECTOR_EXAMPLES)
@example(dtype=np.float32, kind="ok", values="nan", n=2, seed=1, model="fuzz-a")
@example(dtype=np.float64, kind="ok", values="normal", n=2, seed=1, model="fuzz-a")
@example(dtype="words", kind="ok", values="normal", n=2, seed=1, model="fuzz-a")
@example(dtype=np.float32, kind="wrong dim", values="normal", n=2, seed=1, model="fuzz-a")
@given(
    dtype=st.sampled_from(DTYPES),
    kind=shapes,
    values=st.sampled_from(VALUES),
    n=st.integers(0, 4),
    seed=st.integers(0, 2**32 - 1),
    model=st.sampled_from(["fuzz-a", "fuzz-b"]) | hostile_text,
)
def test_store_put_vectors(world: World, dtype: Any, kind: str, values: str, n: int, seed: int, model: str) -> None:
    store, p = world.p.store, world.p
    world.examples["store vectors"] += 1
    targets = list(p.recall(limit=n)) if n else []
    labels = np.array([m.label for m in targets], dtype=np.int64)
    hashes = [m.content_hash for m in targets]
    vectors = make_vectors(dtype, shaped(kind, len(targets), 16), values, seed)
    accepted, result = typed(lambda: store.put_vectors(model, labels, vectors, hashes))
    world.outcome("store vectors", accepted, result)
    if accepted:
        assert vectors.dtype == np.float32 and vectors.ndim == 2 and len(vectors) == len(labels), (
            f"accepted {vectors.dtype} {vectors.shape} for {len(labels)} labels"
        )
        assert np.isfinite(vectors).all(), "accepted a non-finite vector"
        if len(labels):
            got_labels, got = store.vectors("neo", model)
            rows = {int(lab): got[i] for i, lab in enumerate(got_labels)}
            for lab, vec in zip(labels.tolist(), vectors, strict=True):
                assert np.array_equal(rows[lab], vec), "a stored vector reads back different"
    world.intact()


weird_labels = st.one_of(
    st.lists(st.integers(-(2**70), 2**70), min_size=1, max_size=3),
    st.lists(st.sampled_from(["a", "1", "", "'; --"]), min_size=1, max_size=3),
    st.lists(st.floats(), min_size=1, max_size=3),
    st.lists(st.none(), min_size=1, max_size=2),
)


@fuzz(STORE_LABEL_EXAMPLES)
@example(labels=["a"], hashes="right count")
@example(labels=[2**70], hashes="right count")
@given(labels=weird_labels, hashes=st.sampled_from(["right count", "none", "ints", "short"]))
def test_store_put_vectors_labels(world: World, labels: list[Any], hashes: str) -> None:
    store = world.p.store
    world.examples["store labels"] += 1
    vectors = np.ones((len(labels), 16), dtype=np.float32)
    content = {
        "right count": ["x" * 64] * len(labels),
        "none": [None] * len(labels),
        "ints": list(range(len(labels))),
        "short": ["x"],
    }[hashes]
    accepted, result = typed(lambda: store.put_vectors("fuzz-labels", labels, vectors, content))  # type: ignore[arg-type]
    world.outcome("store labels", accepted, result)
    world.intact()


# -- vectors into the HNSW index ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def hnsw() -> tuple[HnswIndex, np.ndarray]:
    index = HnswIndex(16)
    base = np.random.default_rng(7).standard_normal((50, 16)).astype(np.float32)
    index.add(np.arange(50), base)
    return index, base


def hnsw_intact(index: HnswIndex, base: np.ndarray) -> None:
    assert set(range(50)) <= {int(x) for x in index.labels()}, "a baseline label left the index"
    unit = base / np.linalg.norm(base, axis=1, keepdims=True)
    assert np.allclose(index.get_vectors(range(50)), unit, atol=1e-6)
    best = index.search(base[3], 1)
    assert best and best[0][0] == 3, f"the index no longer finds a baseline vector: {best}"


@fuzz(HNSW_VECTOR_EXAMPLES)
@example(dtype="words", kind="ok", values="normal", n=2, seed=1)
@example(dtype="objects", kind="ok", values="normal", n=2, seed=1)
@example(dtype=np.float64, kind="ok", values="huge", n=2, seed=1)
@given(
    dtype=st.sampled_from(DTYPES),
    kind=shapes,
    values=st.sampled_from(VALUES),
    n=st.integers(0, 4),
    seed=st.integers(0, 2**32 - 1),
)
def test_hnsw_add_vectors(
    world: World, hnsw: tuple[HnswIndex, np.ndarray], dtype: Any, kind: str, values: str, n: int, seed: int
) -> None:
    index, base = hnsw
    world.examples["hnsw vectors"] += 1
    labels = np.arange(1000 + 10 * (seed % 100), 1000 + 10 * (seed % 100) + n, dtype=np.int64)
    vectors = make_vectors(dtype, shaped(kind, n, 16), values, seed)
    accepted, result = typed(lambda: index.add(labels, vectors))
    world.outcome("hnsw vectors", accepted, result)
    if accepted:
        assert vectors.ndim == 2 and vectors.shape == (n, 16), f"accepted shape {vectors.shape} for {n} labels"
        assert set(labels.tolist()) <= {int(x) for x in index.labels()}
    hnsw_intact(index, base)


@fuzz(HNSW_LABEL_EXAMPLES)
@example(labels=["a"])
@example(labels=[2**70])
@given(labels=weird_labels)
def test_hnsw_add_labels(world: World, labels: list[Any]) -> None:
    # A fresh index each time: a float label 0.5 may legitimately land on label 0, so the labels
    # fuzzed here must not share an index with the baseline the other tests keep intact.
    world.examples["hnsw labels"] += 1
    index = HnswIndex(16)
    base = np.random.default_rng(7).standard_normal((50, 16)).astype(np.float32)
    index.add(np.arange(50), base)
    accepted, result = typed(lambda: index.add(labels, np.ones((len(labels), 16), dtype=np.float32)))  # type: ignore[arg-type]
    world.outcome("hnsw labels", accepted, result)
    if not accepted:
        hnsw_intact(index, base)
    assert index.search(base[3], 1), "the index stopped answering"


@fuzz(HNSW_QUERY_EXAMPLES)
@example(dtype="words", kind="ok", values="normal", seed=1, k=5)
@given(
    dtype=st.sampled_from(DTYPES),
    kind=st.sampled_from(["ok", "1d", "wrong dim", "zero dim", "3d"]),
    values=st.sampled_from(VALUES),
    seed=st.integers(0, 2**32 - 1),
    k=st.sampled_from([1, 5, 0, -1, 10**9]),
)
def test_hnsw_search(
    world: World, hnsw: tuple[HnswIndex, np.ndarray], dtype: Any, kind: str, values: str, seed: int, k: int
) -> None:
    index, base = hnsw
    world.examples["hnsw search"] += 1
    query = make_vectors(dtype, shaped(kind, 1, 16), values, seed)
    accepted, result = typed(lambda: index.search(query, k))
    world.outcome("hnsw search", accepted, result)
    if accepted:
        assert len(result) <= max(0, k)
    hnsw_intact(index, base)


# -- uris and actors ------------------------------------------------------------------------------------
NASTY = (
    "../x",
    "/abs",
    "a\x00b",
    "x" * 10_240,
    "",
    " ",
    ".",
    "..",
    "a/b",
    "a\\b",
    "~",
    "-a",
    ".hidden",
    "a..b",
    "a" * 128,
    "a" * 129,
    "neo\n",
    " neo",
    "neo ",
    "ä",
    "a:b",
    "a@b.c",
    "NEO",
    "\ud800",
    "mem://neo",
    "mem://neo/fact/0123456789abcdef",
    "mem://../fact/0123456789abcdef",
    "mem://neo/fact/../../etc/passwd",
    "mem://neo/FACT/0123456789abcdef",
    "mem://neo/nope/0123456789abcdef",
    "mem://neo/fact/" + "a" * 10_240,
    "mem://neo/fact/0123456789abcdef\x00",
    "mem://bob/fact/0123456789abcdef",
    "mem:///fact/0123456789abcdef",
    "file:///etc/passwd",
    "mem://neo/fact/0123456789ABCDEF",
)
names = st.sampled_from(NASTY) | st.text(chars, max_size=40) | st.text(st.sampled_from("ab./:@+-_\\\x00~"), max_size=12)


@fuzz(NAME_EXAMPLES)
@example(name="../x")
@example(name="/abs")
@example(name="a\x00b")
@example(name="x" * 10_240)
@example(name="a:b")
@given(name=names)
def test_uris_and_actors(world: World, name: str) -> None:
    p = world.p
    world.examples["uris and actors"] += 1
    for call in (
        lambda: p.get(name),
        lambda: p.forget(name),
        lambda: p.forget(name, hard=False),
        lambda: p.forget(actor=name, where={"tags": ["no-memory-has-this-tag"]}),
    ):
        accepted, result = typed(call)
        world.outcome("uri", accepted, result)
        assert not accepted or isinstance(result, int) and result == 0, f"{name!r} reached a memory: {result!r}"
    accepted, other = typed(lambda: mempager.open(world.path, actor=name, config=HASH))
    world.outcome("actor", accepted, other)
    if accepted:
        try:
            index_root = Path(str(world.path) + ".index").resolve()
            assert index_root in other.semantic.directory.resolve().parents, "an actor's index left the store"
            if name != "neo":
                assert other.retrieve("baseline fact deploy key", k=50) == [], "another actor sees neo's memories"
                uri = other.remember_fact("a memory of a fuzzed actor")
                assert uri.startswith(f"mem://{name}/")
                assert other.forget(uri) == 1
        finally:
            other.close()
    world.intact()
