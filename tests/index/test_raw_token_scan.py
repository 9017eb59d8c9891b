"""The compiled raw-token scan (index/_tokens.c) returns what the regex returns, and its unit
lookup what the dict gives.

A token split differently would make a store's lexical index disagree with the queries made
against it, or with an index built before the scan existed (both go through this scan now).
"""

from __future__ import annotations

import string
import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mempager.index._tokens import ascii_raw_tokens, unit_ids
from mempager.index.tokenize import RAW_TOKEN, Tokenizer

# every ASCII character the pattern treats specially, with word characters and others around them
PIECES = st.one_of(
    st.sampled_from(list("~./@#$-\\:+?=&%'_")),
    st.text(alphabet=string.printable, max_size=5),
    st.sampled_from(["foo", "x1", "..", "~/", "a.b", "12:30", "it's", "...", "@neo", "a--", "#"]),
)
ASCII_TEXTS = st.lists(PIECES, max_size=20).map("".join)


@settings(max_examples=3000)
@given(ASCII_TEXTS)
def test_the_scan_is_the_regex_on_ascii_text(text: str) -> None:
    assert ascii_raw_tokens(text) == RAW_TOKEN.findall(text)


@settings(max_examples=500)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=40))
def test_the_scan_is_the_regex_on_any_ascii_string(text: str) -> None:
    assert ascii_raw_tokens(text) == RAW_TOKEN.findall(text)


def test_examples_at_the_edges() -> None:
    for text in [
        "",
        " ",
        ".",
        "...",
        "a",
        "a.",
        ".a",
        "a..b",
        "a. .b",
        "~-a",
        "~/.bashrc",
        "x@y.z:80/p?q=1&r=%2",
        "$5 #12",
    ]:
        assert ascii_raw_tokens(text) == RAW_TOKEN.findall(text), text
    assert ascii_raw_tokens("~/.bashrc and a.b-c, it's 12:30.") == ["~/.bashrc", "and", "a.b-c", "it's", "12:30"]


def test_a_non_ascii_string_is_left_to_the_regex() -> None:
    assert ascii_raw_tokens("café au lait") is None
    assert ascii_raw_tokens("it’s") is None  # the one connector outside ASCII


def test_a_non_str_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="takes a str, got bytes"):
        ascii_raw_tokens(b"abc")  # type: ignore[arg-type]


@settings(max_examples=500)
@given(st.one_of(ASCII_TEXTS, st.text(max_size=30)))
def test_the_tokenizer_gives_the_regex_form_of_any_text(text: str) -> None:
    """ASCII through the scan, the rest NFKC then the regex: one result either way."""
    assert Tokenizer().raw_tokens(text) == RAW_TOKEN.findall(unicodedata.normalize("NFKC", text))


def test_nfkc_still_applies_to_text_that_is_not_ascii() -> None:
    assert Tokenizer().raw_tokens("ﬁne print") == ["fine", "print"]  # the ligature is not ASCII


# -- unit_ids: each token's unit from the vocabulary's dict ------------------------------------------
def test_unit_ids_looks_up_every_token_and_names_the_missing_once_in_order() -> None:
    docs = [["the", "cat", "sat"], [], ["on", "the", "mat", "cat", "on"]]
    known = {"the": 0, "cat": 7}
    out = np.full(8, 99, np.int64)
    assert unit_ids(docs, known, out, False) == ["sat", "on", "mat"]  # first seen first, each once
    assert out.tolist() == [0, 7, -1, -1, 0, -1, 7, -1]
    known |= {"sat": 3, "on": 4, "mat": 5}
    out[0] = 42  # only the holes are looked up again
    assert unit_ids(docs, known, out, True) == []
    assert out.tolist() == [42, 7, 3, 4, 0, 5, 7, 4]


@settings(max_examples=300)
@given(
    st.lists(st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), max_size=6), max_size=6),
    st.sets(st.sampled_from("abcde")),
)
def test_unit_ids_is_the_dict_lookup(docs: list[list[str]], have: set[str]) -> None:
    known = {t: ord(t) for t in have}
    flat = [t for doc in docs for t in doc]
    out = np.empty(len(flat), np.int64)
    missing = unit_ids(docs, known, out, False)
    assert out.tolist() == [known.get(t, -1) for t in flat]
    assert missing == list(dict.fromkeys(t for t in flat if t not in known))


def test_unit_ids_refuses_what_does_not_fit() -> None:
    docs = [["a", "b"]]
    with pytest.raises(ValueError, match="shorter"):
        unit_ids(docs, {}, np.empty(1, np.int64), False)
    with pytest.raises(ValueError, match="longer"):
        unit_ids(docs, {}, np.empty(3, np.int64), False)
    with pytest.raises(TypeError, match="int64"):
        unit_ids(docs, {}, np.empty(2, np.int32), False)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not a list"):
        unit_ids([("a",)], {}, np.empty(1, np.int64), False)  # type: ignore[list-item]
    frozen = np.zeros(2, np.int64)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        unit_ids(docs, {}, frozen, False)
