"""LangGraph's store tests, run against MempagerStore.

The langgraph packages ship no importable store conformance suite (the repo's
``libs/checkpoint-conformance`` covers checkpointers only), so these are the cases of the store
tests in the langgraph repo (``libs/checkpoint/tests/test_store.py`` and
``libs/checkpoint-sqlite/tests/test_store.py``) that apply to a store with its own search,
written here in our own code: batch ordering, get/put/delete, search by prefix, filter and
pagination, list_namespaces with prefix/suffix/wildcards/depth/pagination, namespace validation,
segment boundaries and literal metacharacters, non-ASCII text, and the async forms. Cases about
one backend's SQL, its embedding config or TTLs are left out (MempagerStore embeds with the pager's
own model and has no TTL).
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("langgraph")

from langgraph.store.base import (  # noqa: E402
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)

import mempager  # noqa: E402
from mempager.adapters.langgraph import MempagerStore  # noqa: E402


@pytest.fixture
def store(pager: mempager.Pager) -> MempagerStore:
    return MempagerStore(pager)


def test_batch_order(store: MempagerStore) -> None:
    store.put(("test", "foo"), "key1", {"data": "value1"})
    store.put(("test", "bar"), "key2", {"data": "value2"})
    results = store.batch(
        [
            GetOp(namespace=("test", "foo"), key="key1"),
            PutOp(namespace=("test", "bar"), key="key2", value={"data": "value2"}),
            SearchOp(namespace_prefix=("test",), filter={"data": "value1"}, limit=10, offset=0),
            ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0),
            GetOp(namespace=("test",), key="key3"),
        ]
    )
    assert len(results) == 5
    assert isinstance(results[0], Item) and results[0].value == {"data": "value1"}
    assert results[0].key == "key1" and results[0].namespace == ("test", "foo")
    assert results[1] is None
    assert isinstance(results[2], list) and [i.key for i in results[2]] == ["key1"]  # type: ignore[union-attr]
    assert isinstance(results[3], list) and {("test", "foo"), ("test", "bar")} <= set(results[3])
    assert results[4] is None
    results = store.batch(
        [
            SearchOp(namespace_prefix=("test",), filter=None, limit=5, offset=0),
            GetOp(namespace=("test", "bar"), key="key2"),
            ListNamespacesOp(match_conditions=None, max_depth=None, limit=5, offset=0),
            PutOp(namespace=("test",), key="key3", value={"data": "value3"}),
            GetOp(namespace=("test", "foo"), key="key1"),
        ]
    )
    assert isinstance(results[0], list) and len(results[0]) >= 2
    assert isinstance(results[1], Item) and results[1].value == {"data": "value2"}
    assert results[3] is None
    assert isinstance(results[4], Item) and results[4].value == {"data": "value1"}
    item3 = store.get(("test",), "key3")
    assert item3 is not None and item3.value == {"data": "value3"}


def test_batch_get_put_and_delete_ops(store: MempagerStore) -> None:
    assert store.batch(
        [
            PutOp(namespace=("test",), key="key1", value={"data": "value1"}),
            PutOp(namespace=("test",), key="key2", value={"data": "value2"}),
            PutOp(namespace=("test",), key="key3", value=None),  # a delete of nothing
        ]
    ) == [None, None, None]
    results = store.batch([GetOp(("test",), "key1"), GetOp(("test",), "key2"), GetOp(("test",), "key3")])
    assert [r.key if isinstance(r, Item) else r for r in results] == ["key1", "key2", None]


def test_batch_search_ops(store: MempagerStore) -> None:
    for namespace, key, value in [
        (("test", "foo"), "key1", {"data": "value1", "tag": "a"}),
        (("test", "bar"), "key2", {"data": "value2", "tag": "a"}),
        (("test", "baz"), "key3", {"data": "value3", "tag": "b"}),
    ]:
        store.put(namespace, key, value)
    tagged, first_two, foo = store.batch(
        [
            SearchOp(namespace_prefix=("test",), filter={"tag": "a"}, limit=10, offset=0),
            SearchOp(namespace_prefix=("test",), filter=None, limit=2, offset=0),
            SearchOp(namespace_prefix=("test", "foo"), filter=None, limit=10, offset=0),
        ]
    )
    assert isinstance(tagged, list) and sorted(i.key for i in tagged) == ["key1", "key2"]  # type: ignore[union-attr]
    assert isinstance(first_two, list) and len(first_two) == 2
    assert isinstance(foo, list) and [i.namespace for i in foo] == [("test", "foo")]  # type: ignore[union-attr]


def test_batch_list_namespaces_ops(store: MempagerStore) -> None:
    data = [("test", "documents", "public"), ("test", "documents", "private"), ("test", "images", "public")]
    data.append(("prod", "documents", "public"))
    for i, namespace in enumerate(data):
        store.put(namespace, f"doc{i}", {"content": "x"})
    every, shallow, public = store.batch(
        [
            ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0),
            ListNamespacesOp(match_conditions=None, max_depth=2, limit=10, offset=0),
            ListNamespacesOp(match_conditions=(MatchCondition("suffix", ("public",)),), max_depth=None, limit=10),
        ]
    )
    assert isinstance(every, list) and len(every) == len(data)
    assert isinstance(shallow, list) and all(len(ns) <= 2 for ns in shallow)  # type: ignore[arg-type]
    assert isinstance(public, list) and sorted(public) == sorted(ns for ns in data if ns[-1] == "public")  # type: ignore[type-var]


def test_basic_store_ops(store: MempagerStore) -> None:
    namespace = ("test", "documents")
    store.put(namespace, "doc1", {"title": "Test Document", "content": "Hello, World!"})
    item = store.get(namespace, "doc1")
    assert item is not None and item.namespace == namespace and item.key == "doc1"
    assert item.value == {"title": "Test Document", "content": "Hello, World!"}
    store.put(namespace, "doc1", {"title": "Updated Document", "content": "Hello, Updated!"})
    updated = store.get(namespace, "doc1")
    assert updated is not None and updated.value == {"title": "Updated Document", "content": "Hello, Updated!"}
    assert updated.created_at == item.created_at and updated.updated_at >= item.updated_at
    assert store.get(("test", "other_documents"), "doc1") is None
    store.put(namespace, "doc2", {"title": "Another Document", "content": "Greetings!"})
    assert sorted(i.key for i in store.search(("test",), limit=10)) == ["doc1", "doc2"]
    assert namespace in store.list_namespaces(prefix=("test",))
    store.delete(namespace, "doc1")
    store.delete(namespace, "doc2")
    assert store.get(namespace, "doc1") is None and store.get(namespace, "doc2") is None
    assert store.search(("test",), limit=10) == []


def test_search_prefix_filter_and_pagination(store: MempagerStore) -> None:
    base = "test_search_items"
    rows = [
        ((base, "documents", "user1"), {"title": "Doc 1", "author": "John Doe", "tags": ["important"]}),
        ((base, "documents", "user2"), {"title": "Doc 2", "author": "Jane Smith", "tags": ["draft"]}),
        ((base, "reports", "department1"), {"title": "Report A", "author": "John Doe", "tags": ["final"]}),
        ((base, "reports", "department2"), {"title": "Report B", "author": "Alice Johnson", "tags": ["draft"]}),
    ]
    for namespace, value in rows:
        store.put(namespace, f"item_{namespace[-1]}", value)
    assert {i.namespace[1] for i in store.search((base, "documents"))} == {"documents"}
    assert len(store.search((base, "reports"))) == 2
    first, second = store.search((base,), limit=2, offset=0), store.search((base,), limit=2, offset=2)
    assert len(first) == len(second) == 2 and {i.key for i in first}.isdisjoint({i.key for i in second})
    assert len(store.search((base,))) == 4
    assert len(store.search((base,), offset=3)) == 1
    assert {i.value["author"] for i in store.search((base,), filter={"author": "John Doe"})} == {"John Doe"}
    assert len(store.search((base,), filter={"author": "John Doe"})) == 2
    assert len(store.search((base,), filter={"tags": ["draft"]})) == 2  # a list matches exactly


def test_numeric_boolean_and_path_filters(store: MempagerStore) -> None:
    for key, price in [("item1", 10), ("item2", 20), ("item3", 30)]:
        store.put(("items",), key, {"price": price})
    assert sorted(r.key for r in store.search(("items",), filter={"price": {"$gt": 15}})) == ["item2", "item3"]
    assert len(store.search(("items",), filter={"price": {"$lt": float("inf")}})) == 3
    assert len(store.search(("items",), filter={"price": {"$gt": float("-inf")}})) == 3
    assert store.search(("items",), filter={"price": {"$eq": float("nan")}}) == []
    assert len(store.search(("items",), filter={"price": {"$lt": 10**100}})) == 3
    assert len(store.search(("items",), filter={"price": {"$gte": 20, "$lte": 20}})) == 1
    assert len(store.search(("items",), filter={"price": {"$ne": 20}})) == 2
    store.put(("flags",), "a", {"active": True})
    store.put(("flags",), "b", {"active": False})
    assert [r.key for r in store.search(("flags",), filter={"active": False})] == ["b"]
    store.put(("docs",), "hyphen", {"access-level": "public", "user": {"access-level": "nested"}})
    store.put(("docs",), "digit", {"123abc": "ok", "user": {"123abc": "ok2"}})
    assert [r.key for r in store.search(("docs",), filter={"access-level": "public"})] == ["hyphen"]
    assert [r.key for r in store.search(("docs",), filter={"user.access-level": "nested"})] == ["hyphen"]
    assert [r.key for r in store.search(("docs",), filter={"user": {"123abc": "ok2"}})] == ["digit"]


def test_list_namespaces(store: MempagerStore) -> None:
    namespaces = [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
        ("users", "123"),
        ("users", "456", "settings"),
        ("admin", "users", "789"),
    ]
    for i, ns in enumerate(namespaces):
        store.put(ns, f"id_{i}", {"data": f"value_{i:02d}"})
    assert store.list_namespaces(prefix=("a", "b")) == [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
    ]
    assert store.list_namespaces(suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]
    assert store.list_namespaces(prefix=("a",), suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f")]
    assert store.list_namespaces(prefix=("a", "b"), max_depth=3) == [("a", "b", "c"), ("a", "b", "d"), ("a", "b", "f")]
    assert store.list_namespaces(prefix=("a", "b"), limit=2) == [("a", "b", "c"), ("a", "b", "d", "e")]
    assert store.list_namespaces(prefix=("a", "b"), offset=2) == [("a", "b", "d", "i"), ("a", "b", "f")]
    assert store.list_namespaces(prefix=("a", "*", "f")) == [("a", "b", "f"), ("a", "c", "f")]
    assert store.list_namespaces(suffix=("*", "f")) == [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]
    assert store.list_namespaces(prefix=("nonexistent",)) == []
    assert store.list_namespaces(prefix=("users", "123")) == [("users", "123")]
    assert store.list_namespaces(prefix=("*", "users"), suffix=("*", "settings")) == []
    assert store.list_namespaces(max_depth=2) == sorted({ns[:2] for ns in namespaces})
    assert store.list_namespaces() == sorted(namespaces)


def test_list_namespaces_pagination_and_empty(store: MempagerStore) -> None:
    assert store.list_namespaces() == []
    for i in range(20):
        store.put(("namespace", f"sub_{i:02d}"), f"id_{i:02d}", {"data": i})
    for start in (0, 5, 15):
        expected = [("namespace", f"sub_{i:02d}") for i in range(start, start + 5)]
        assert store.list_namespaces(prefix=("namespace",), limit=5, offset=start) == expected


def test_namespace_validation(store: MempagerStore) -> None:
    doc = {"foo": "bar"}
    for bad in [(), ("the", "thing.about"), ("some", "fun", ""), ("langgraph", "foo")]:
        with pytest.raises(InvalidNamespaceError):
            store.put(bad, "foo", doc)
        with pytest.raises(InvalidNamespaceError):
            asyncio.run(store.aput(bad, "foo", doc))
    ns = ("foo", "langgraph", "foo")  # the reserved label is only reserved at the root
    store.put(ns, "bar", doc)
    item = store.get(ns, "bar")
    assert item is not None and item.value == doc
    assert store.search(ns, query="bar")[0].value == doc
    store.delete(ns, "bar")
    assert store.get(ns, "bar") is None
    store.batch([PutOp(("langgraph", "foo"), "bar", doc)])  # past the public API, as LangGraph's stores allow
    assert store.search(("langgraph", "foo"))[0].value == doc


def test_prefixes_stop_at_segment_boundaries_and_are_literal(store: MempagerStore) -> None:
    labels = [("foo",), ("foo", "child"), ("foo", "child", "deep"), ("foobar",), ("foobar", "baz"), ("foo2",)]
    labels += [("user_1",), ("user_1", "child"), ("userX1",), ("a%b",), ("axxb",), ("star*",), ("starX",)]
    labels += [("Foo",), ("users", "alice"), ("users", "alice\n"), ("uid", "users", "malice")]
    for ns in labels:
        store.put(ns, "k", {"v": 1})

    def found(prefix: tuple[str, ...]) -> set[tuple[str, ...]]:
        return {item.namespace for item in store.search(prefix, limit=100)}

    assert found(("foo",)) == {("foo",), ("foo", "child"), ("foo", "child", "deep")}
    assert found(("foobar",)) == {("foobar",), ("foobar", "baz")}
    assert found(("fo",)) == set()
    assert found(("user_1",)) == {("user_1",), ("user_1", "child")}
    assert found(("a%b",)) == {("a%b",)} and found(("star*",)) == {("star*",)}
    assert found(("Foo",)) == {("Foo",)}
    assert found(()) == set(labels)  # an empty prefix constrains nothing
    assert set(store.list_namespaces(suffix=("alice",), limit=100)) == {("users", "alice")}
    assert set(store.list_namespaces(prefix=("users", "alice"), limit=100)) == {("users", "alice")}


def test_non_ascii(store: MempagerStore) -> None:
    texts = ["这是中文", "これは日本語です", "이건 한국어야", "Это русский", "यह रूसी है"]
    for i, text in enumerate(texts, 1):
        store.put(("user_123", "memories"), str(i), {"text": text})
    for i, text in enumerate(texts, 1):
        assert store.search(("user_123", "memories"), query=text)[0].key == str(i)


def test_async_forms(store: MempagerStore) -> None:
    async def run() -> None:
        await store.aput(("a", "b"), "k", {"text": "async write"})
        item = await store.aget(("a", "b"), "k")
        assert item is not None and item.value == {"text": "async write"}
        assert [i.key for i in await store.asearch(("a",), query="async write")] == ["k"]
        assert await store.alist_namespaces(prefix=("a",)) == [("a", "b")]
        results = await store.abatch([GetOp(("a", "b"), "k"), PutOp(("a", "b"), "k", None), GetOp(("a", "b"), "k")])
        assert isinstance(results[0], Item) and results[1] is None and results[2] is None
        await store.aput(("a", "b"), "k", {"text": "again"})
        await store.adelete(("a", "b"), "k")
        assert await store.aget(("a", "b"), "k") is None

    asyncio.run(run())
