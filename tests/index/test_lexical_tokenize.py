"""The lexical tokeniser: identifiers stay whole and also split, words are folded, stopped and stemmed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mempager.index.tokenize import Tokenizer, TokenizerConfig, Vocabulary, stem_word


@pytest.fixture
def tok() -> Tokenizer:
    """The light suffix stripper: these tests pin its behaviour (Snowball, the default, below)."""
    return Tokenizer(TokenizerConfig(stem="light"))


def test_the_default_stems_with_snowball_and_still_stops_and_folds() -> None:
    import Stemmer  # PyStemmer

    snowball = Stemmer.Stemmer("english")
    tok = Tokenizer()
    assert TokenizerConfig().stem == "snowball" and "stem=snowball" in tok.version
    words = ["stories", "caroline", "dogs", "running", "stopped", "happily"]
    assert tok.terms("The Stories of Caroline's DOGS were running and she stopped happily") == [
        snowball.stemWord(w) for w in words
    ]
    assert tok.terms("running") == tok.terms("runs") == ["run"]  # what the light stemmer also did
    assert tok.terms("generously") == tok.terms("generous")  # what it did not: -ly, -ous
    # identifiers stay whole; their alphabetic parts are stemmed like words
    [unit] = tok.units("user@examples.com")
    assert unit.wholes[0] == "user@examples.com" and list(unit.leaves) == ["user", "exampl", "com"]


@pytest.mark.parametrize(
    ("text", "whole", "parts"),
    [
        ("src/app/main.py", "src/app/main.py", ["src", "app", "main", "py"]),
        ("user@example.com", "user@example.com", ["user", "example", "com"]),
        ("v1.2.3", "v1.2.3", ["v1", "2", "3"]),
        ("3.11", "3.11", ["3", "11"]),
        ("snake_case_name", "snake_case_name", ["snake", "case", "name"]),
        ("getUserName", "getusername", ["get", "user", "name"]),
        ("HTTPServer", "httpserver", ["http", "server"]),
        ("~/.bashrc", "~/.bashrc", ["bashrc"]),
        ("https://x.org/a?b=1", "https://x.org/a?b=1", ["http", "x", "org", "a", "b", "1"]),
    ],
)
def test_identifiers_stay_whole_and_emit_parts(tok: Tokenizer, text: str, whole: str, parts: list[str]) -> None:
    [unit] = tok.units(f"{text}")
    assert unit.wholes[0] == whole
    assert list(unit.leaves) == parts


@pytest.mark.parametrize("text", ["0xdeadbeef", "a3f9c2e1b7d4", "2023", "python3"])
def test_unseparated_identifiers_and_numbers_are_one_term(tok: Tokenizer, text: str) -> None:
    assert tok.terms(f"see {text}.") == ["see", text]


def test_versions_also_stand_without_their_v(tok: Tokenizer) -> None:
    assert {"v1.2.3", "1.2.3"} <= set(tok.terms("v1.2.3"))


def test_words_are_folded_stopped_and_stemmed(tok: Tokenizer) -> None:
    assert tok.terms("The Stories of Caroline's DOGS were running and she stopped") == [
        "story",
        "caroline",
        "dog",
        "run",
        "stop",
    ]


def test_identifier_parts_are_never_stopped(tok: Tokenizer) -> None:
    assert "the" in tok.terms("the/end")


def test_nfkc_and_casefold(tok: Tokenizer) -> None:
    assert tok.terms("ＦＵＬＬ Straße ﬁle") == ["full", "strasse", "file"]


def test_trailing_punctuation_and_ellipses_drop_off(tok: Tokenizer) -> None:
    assert tok.terms("(see main.py), then deploy! ...later") == ["see", "main.py", "main", "py", "deploy", "later"]


def test_glued_prose_is_an_identifier_whose_parts_still_match(tok: Tokenizer) -> None:
    assert tok.terms("wait...deploy") == ["wait...deploy", "wait", "deploy"]


def test_positions_keep_stopword_gaps_and_give_parts_consecutive_slots(tok: Tokenizer) -> None:
    terms, positions = tok.analyse("the cat saw src/app.py today")
    assert list(zip(terms, positions, strict=True)) == [
        ("cat", 1),
        ("saw", 2),
        ("src/app.py", 3),
        ("src", 3),
        ("app", 4),
        ("py", 5),
        ("today", 6),
    ]


@pytest.mark.parametrize(
    ("word", "light", "plural"),
    [
        ("stories", "story", "story"),
        ("running", "run", "running"),
        ("making", "make", "making"),
        ("stopped", "stop", "stopped"),
        ("walked", "walk", "walked"),
        ("studied", "study", "studied"),
        ("sing", "sing", "sing"),
        ("bed", "bed", "bed"),
        ("agreed", "agreed", "agreed"),
        ("class", "class", "class"),
        ("boxes", "box", "box"),
    ],
)
def test_light_stemmer(word: str, light: str, plural: str) -> None:
    assert stem_word(word, "light") == light
    assert stem_word(word, "plural") == plural
    assert stem_word(word, "none") == word


def test_options_change_the_version_string() -> None:
    configs = [
        TokenizerConfig(stem="none"),
        TokenizerConfig(stem="light"),
        TokenizerConfig(subtokens=False),
        TokenizerConfig(stopwords=False),
    ]
    assert len({Tokenizer(c).version for c in configs}) == 4


def test_subtokens_can_be_turned_off() -> None:
    assert Tokenizer(TokenizerConfig(subtokens=False)).terms("src/app/main.py") == ["src/app/main.py"]


WORDS = st.sampled_from(
    [
        "the",
        "cat",
        "Cats",
        "running",
        "src/app/main.py",
        "v1.2.3",
        "0xBEEF",
        "a-b",
        "...",
        "user@example.com",
        "getUserName",
        "Straße",
        "don't",
        "42",
        ",",
        "(x)",
        "ünï",
    ]
)


@given(st.lists(st.lists(WORDS, max_size=12).map(" ".join), min_size=1, max_size=6))
def test_vocabulary_encoding_equals_analyse(texts: list[str]) -> None:
    tok = Tokenizer()
    vocab = Vocabulary()
    counts, term_ids, positions = vocab.encode(tok, [tok.raw_tokens(t) for t in texts])
    at = 0
    for text, count in zip(texts, counts.tolist(), strict=True):
        terms, pos = tok.analyse(text)
        got = [
            (vocab.terms[t], p)
            for t, p in zip(term_ids[at : at + count].tolist(), positions[at : at + count].tolist(), strict=True)
        ]
        assert got == list(zip(terms, pos, strict=True))
        at += count
    assert at == len(term_ids)
