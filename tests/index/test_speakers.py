"""The speaker of a memory (index/speakers.py): parsed from a transcript prefix, kept as one term
of the lexical index, found by ``spoken_by`` from postings, saved and loaded with the index."""

from __future__ import annotations

from pathlib import Path

import pytest

from mempager.index.lexical import LexicalIndex
from mempager.index.speakers import SPEAKER_MARK, speaker_of
from mempager.index.tokenize import Tokenizer


@pytest.mark.parametrize(
    ("text", "speaker"),
    [
        ("Caroline: I went to the support group", "Caroline"),
        ("  Jon Smith:  bought a boat", "Jon Smith"),
        ("user: deploy it tonight", "user"),
        ("Dr. Ana Ruiz: the scan is clear", "Dr. Ana Ruiz"),
        ("Zoë: on y va", "Zoë"),
        ("10:30 standup moved", None),
        ("see https://example.com: it is down", None),
        ("Caroline:no space after the colon", None),
        ("One two three four: more than three words", None),
        ("the deploy key is in vault", None),
        ("", None),
    ],
)
def test_speaker_prefix(text: str, speaker: str | None) -> None:
    assert speaker_of(text) == speaker


def test_the_speaker_term_follows_the_tokeniser_and_no_query_can_name_it() -> None:
    tok = Tokenizer()
    term = tok.speaker_term("Caroline: hi")
    assert term is not None and term.startswith(SPEAKER_MARK)
    assert term in tok.named_speakers("What is Caroline's relationship status?")  # possessive, stemmed
    assert tok.speaker_term("I: a stopword is no name") is None
    assert all(SPEAKER_MARK not in t for t in tok.terms(f"{term} {SPEAKER_MARK}caroline"))


def test_a_remembered_speaker_term_is_the_one_analysis_gives() -> None:
    # document_tokens remembers each name's term: a second document by the same speaker, and a
    # tokenizer whose memo was just emptied, must both give what the analysis of the name gives
    tok, fresh = Tokenizer(), Tokenizer()
    for text in ("Jon Smith: first", "Jon Smith: second", "Caroline: hi", "The: stopword only", "Running Dogs: x"):
        expected = fresh.speaker_term(text)
        fresh._speakers.clear()
        assert tok.speaker_term(text) == expected == fresh.speaker_term(text)
        if expected is not None:  # the speaker's term ends the document's tokens
            assert tok.document_tokens(text)[-1] == expected
    assert tok.speaker_term("Jon Smith: again") == f"{SPEAKER_MARK}jon smith"
    assert tok.speaker_term("The: stopword only") is None


DOCS = {
    1: "Caroline: I went camping at the lake",
    2: "Melanie: I went camping in the woods",
    3: "Melanie: painting helps me destress",
    4: "Jon Smith: the boat needs paint",
    5: "a note without a speaker mentions Melanie",
}


def test_spoken_by_answers_from_postings_and_follows_every_write() -> None:
    ix = LexicalIndex()
    ix.add(list(DOCS), list(DOCS.values()))
    assert ix.spoken_by("Where has Melanie camped?", DOCS) == [2, 3]
    assert ix.spoken_by("Where has Melanie camped?", [1, 3, 5, 99]) == [3]  # only the labels asked about
    assert ix.spoken_by("what did Caroline and Melanie do", DOCS) == [1, 2, 3]
    assert ix.spoken_by("What does Jon Smith own?", DOCS) == [4]
    assert ix.spoken_by("What does Jon own?", DOCS) == []  # a name is matched whole
    assert ix.spoken_by("where did anyone camp", DOCS) == []
    ix.add([3], ["Caroline: painting helps me destress"])  # an edit changes who said it
    assert ix.spoken_by("what did Melanie say", DOCS) == [2]
    assert ix.spoken_by("what did Caroline say", DOCS) == [1, 3]
    ix.remove([2])
    assert ix.spoken_by("what did Melanie say", DOCS) == []


def test_the_speaker_term_leaves_bm25_alone_and_survives_save_and_load(tmp_path: Path) -> None:
    ix = LexicalIndex()
    ix.add([1, 2], ["Caroline: I went camping", "I went camping, Caroline"])
    top, _ = ix.search_scored("camping", 5)
    assert len(top) == 2 and top[0][1] == top[1][1]  # the same words score the same (b = 0: length is no factor)
    ix.save(tmp_path / "lex")
    again = LexicalIndex()
    again.load(tmp_path / "lex")
    assert again.spoken_by("what did Caroline do", [1, 2]) == [1]
    assert again.search_scored("camping", 5)[0] == top


def test_spoken_by_reads_each_documents_own_last_token() -> None:
    """The speaker term is a document's last token: a document with no tokens, or one that only
    names the speaker in its words, is nobody's, whatever the document before it holds; a
    document whose words are all punctuation still has its speaker; compaction keeps all of it."""
    ix = LexicalIndex()
    ix.add([1, 2, 3, 4], ["Caroline: hi there", "?!", "Melanie: !!!", "I told Caroline"])
    assert ix.spoken_by("what did Caroline say", [1, 2, 3, 4]) == [1]
    assert ix.spoken_by("what did Melanie say", [2, 3, 4, 4, 3]) == [3]  # repeats count once
    filler = list(range(100, 3200))
    ix.add(filler, [f"note {i}" for i in filler])
    ix.remove(filler)  # enough dead rows for a compaction: rows move, tokens are copied
    assert ix.spoken_by("what did Caroline say", [1, 2, 3, 4, 100]) == [1]
    assert ix.spoken_by("what did Melanie say", [1, 2, 3, 4]) == [3]
