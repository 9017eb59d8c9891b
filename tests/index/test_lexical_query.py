"""Explicit-recall syntax: AND/OR/NOT, phrases, prefixes, parentheses, and errors that say how to fix."""

from __future__ import annotations

import pytest

from mempager.errors import InvalidInput
from mempager.index.lexical import LexicalIndex, QuerySyntaxError, QueryTooBroad
from mempager.index.lexquery import MAX_PREFIX_TERMS, And, Not, Or, Phrase, Prefix, Term, parse_query

CORPUS = {
    1: "Deploy to staging failed: the vault key expired",
    2: "Deploy to production succeeded after the key rotation",
    3: "The staging database was migrated to postgres 16",
    4: "Vault tokens expire daily; rotate the key in staging",
    5: "Coffee with Caroline about her adoption plans",
    6: "Crash in src/app/main.py at v1.2.3 (see deploy log)",
    7: "The key expired before the staging deploy",
}


@pytest.fixture(scope="module")
def ix() -> LexicalIndex:
    index = LexicalIndex()
    index.add(list(CORPUS), list(CORPUS.values()))
    return index


def found(ix: LexicalIndex, query: str) -> set[int]:
    return {label for label, _ in ix.match(query)}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("deploy", {1, 2, 6, 7}),
        ("deploy staging", {1, 7}),  # whitespace is AND
        ("deploy AND staging", {1, 7}),
        ("production OR postgres", {2, 3}),
        ("deploy NOT staging", {2, 6}),
        ("deploy -staging", {2, 6}),
        ("staging -(vault OR deploy)", {3}),
        ("(production OR database) AND (deploy OR migrated)", {2, 3}),
        ('"key expired"', {1, 7}),
        ('"vault key expired"', {1}),
        ('"expired key"', set()),  # order matters
        ('"the key expired"', {1, 7}),  # a stopword keeps its slot but need not match
        ("post*", {3}),
        ("rot*", {2, 4}),  # rotate, rotation
        ("expir* -deploy", {4}),
        ("main.py", {6}),  # an identifier's parts, in order, inside a longer path
        ("src/app/main.py", {6}),
        ("1.2.3", {6}),
        ("src/app/*", {6}),
        ("Deploy Staging", {1, 7}),  # case folds
        ("deploys", {1, 2, 6, 7}),  # stems like the documents
        ("zebra", set()),
        ("zebra OR caroline", {5}),
    ],
)
def test_match_semantics(ix: LexicalIndex, query: str, expected: set[int]) -> None:
    assert found(ix, query) == expected


def test_lower_case_operators_are_words(ix: LexicalIndex) -> None:
    assert found(ix, "deploy or zebra") == set()  # "or" is a stopword, so this is deploy AND zebra


def test_matches_rank_by_bm25_of_positive_terms(ix: LexicalIndex) -> None:
    hits = ix.match("key OR vault")
    assert [label for label, _ in hits][0] in (1, 4)  # the two that hold both terms lead
    assert {label for label, _ in hits[:2]} == {1, 4}
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    # a term under NOT does not add to the score
    assert dict(ix.match("key -production"))[1] == pytest.approx(dict(ix.match("key"))[1])


def test_match_respects_allow(ix: LexicalIndex) -> None:
    assert {label for label, _ in ix.match("deploy", allow=frozenset({2, 6, 50}))} == {2, 6}


def test_stopword_only_queries_match_nothing(ix: LexicalIndex) -> None:
    assert ix.match("the") == []
    assert ix.match('"of the"') == []
    assert ix.match("the -deploy") == []


def test_parse_tree() -> None:
    assert parse_query('a b OR "c d" -e f*') == Or(
        (And((Term("a"), Term("b"))), And((Phrase("c d"), Not(Term("e")), Prefix("f"))))
    )
    assert parse_query("NOT a AND (b)") == And((Not(Term("a")), Term("b")))
    assert parse_query("long-term - x") == And((Term("long-term"), Term("-"), Term("x")))


@pytest.mark.parametrize(
    ("query", "hint"),
    [
        ("", "empty query"),
        ("   ", "empty query"),
        ('"unclosed phrase', "close the phrase"),
        ('a "b" "c', "close the phrase"),
        ('""', "empty phrase"),
        ("(a OR b", "add the missing ')'"),
        ("a OR b)", "remove the extra ')'"),
        ("()", "() must not be empty"),
        ("NOT", "needs a term after it"),
        ("a NOT", "needs a term after it"),
        ("a AND", "AND/OR need a term on each side"),
        ("OR a", "AND/OR need a term on each side"),
        ("a OR OR b", "AND/OR need a term on each side"),
        ("-a", "only excludes"),
        ("NOT a NOT b", "only excludes"),
        ("*", "needs at least one letter"),
        ("-*", "needs at least one letter"),
    ],
)
def test_malformed_queries_raise_with_a_fix(ix: LexicalIndex, query: str, hint: str) -> None:
    with pytest.raises(QuerySyntaxError, match=hint.replace("(", r"\(").replace(")", r"\)")) as info:
        ix.match(query)
    assert isinstance(info.value, InvalidInput)


def test_search_never_parses_syntax(ix: LexicalIndex) -> None:
    assert ix.search('"unclosed (NOT', 5) == []  # the retrieval lane treats it as words
    assert {label for label, _ in ix.search("production OR postgres", 5)} == {2, 3}


def test_prefix_expansion_is_bounded() -> None:
    index = LexicalIndex()
    index.add(list(range(MAX_PREFIX_TERMS + 5)), [f"tag{i:04d}x" for i in range(MAX_PREFIX_TERMS + 5)])
    with pytest.raises(QueryTooBroad, match="type more letters"):
        index.match("tag*")
    assert len(index.match("tag00*")) == 100
