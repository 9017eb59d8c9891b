"""The write path's fast forms give exactly what the plain forms they replaced gave.

``remember_many`` runs per-item Python for every memory, so a few hot helpers have a fast form:
the dedup normaliser, the tokeniser's token analysis, and the mirror's batch upsert. A dedup key
that changed would let stored memories be written twice, and a token analysed differently would
make the index disagree with its queries, so each fast form is held to its reference here.
"""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mempager.index.tokenize as tk
from mempager.index.tokenize import RAW_TOKEN, STOPWORDS, Tokenizer, TokenizerConfig, Unit, stem_word
from mempager.store.base import naive_utc
from mempager.store.mirror import ActorTable
from mempager.types import Memory, MemoryType, Scope, Source
from mempager.validate import new_ids, normalize


def reference_normalize(text: str) -> str:
    """The regex form every stored dedup key was made with."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return re.sub(r"[\s.!;,]+$", "", re.sub(r"\s+", " ", folded).strip())


def test_str_split_whitespace_is_regex_whitespace_at_every_code_point() -> None:
    space = re.compile(r"\s")
    differ = [c for c in range(sys.maxunicode + 1) if chr(c).isspace() != bool(space.fullmatch(chr(c)))]
    assert differ == []


SPACES = st.sampled_from([" ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u2003", "\u3000", "\x1c", "\x85", "\u2028"])
PUNCT = st.sampled_from([".", "!", ";", ",", "...", "?", ":", "-", "。", "…"])
WORDISH = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
TEXTS = st.lists(st.one_of(WORDISH, SPACES, PUNCT), max_size=14).map("".join)


@settings(max_examples=600)
@given(TEXTS)
def test_normalize_equals_the_regex_form(text: str) -> None:
    assert normalize(text) == reference_normalize(text)


def test_normalize_examples() -> None:
    for text in ["Hello   World.", "  ends with spaces and dots . . .  ", "ﬁne\u00a0print!!", "a\n\nb;", ".,;!", ""]:
        assert normalize(text) == reference_normalize(text)


# -- tokeniser: the analysis of one raw token, as it was before the fast paths -------------------
# (the same patterns: the fast paths changed the control flow around them, not the patterns)
_NUMBER = re.compile(r"\d+")


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text.casefold())


def reference_analyse(raw: str, config: TokenizerConfig, stopwords: frozenset[str]) -> Unit:
    raw = tk._ELLIPSIS.sub("", raw)
    if tk._WORD.fullmatch(raw) and not tk._MIXED_CASE.search(raw):
        word = _fold(raw).replace("’", "'")
        word = word[:-2] if word.endswith("'s") else word
        word = word.replace("'", "")
        if config.stopwords and word in stopwords:
            return Unit.of((), ())
        return Unit.of((), (stem_word(word, config.stem),))
    if _NUMBER.fullmatch(raw):
        return Unit.of((), (raw,))
    whole = _fold(raw)
    pieces: list[str] = []
    for piece in tk._SPLIT.split(raw):
        if piece:
            pieces.extend(tk._HUMP.findall(piece) if tk._MIXED_CASE.search(piece) else (piece,))
    parts = []
    for piece in pieces:
        folded = _fold(piece)
        parts.append(stem_word(folded, config.stem) if folded.isalpha() else folded)
    if not config.subtokens or parts in ([], [whole]):
        return Unit.of((), (whole,))
    wholes = (whole, whole[1:]) if tk._VERSION.fullmatch(whole) else (whole,)
    return Unit.of(wholes, tuple(parts))


TRICKY = [
    "..hidden",
    "...",
    "..foo/bar",
    "²",
    "٣٤",
    "12",
    "007",
    "Straße",
    "ÉCOLE",
    "HTTPServer",
    "getUserName",
    "v1.2.3",
    "ref-123456",
    "don't",
    "Don’t",
    "user's",
    "café",
    "naïve",
    "running",
    "studied",
    "stopped",
    "snake_case_name",
    "x",
    "THE",
    "The",
    "ABCdef",
    "a1b2",
    "ﬁle",
    "Ⅻ",
    "½",
    "e-mail",
    "foo..bar",
    "über-cool",
]
CONFIGS = [
    TokenizerConfig(),
    TokenizerConfig(stem="none", subtokens=False, stopwords=False),
    TokenizerConfig(stem="plural"),
]


def test_analyse_equals_the_reference_on_tricky_tokens() -> None:
    for config in CONFIGS:
        tok = Tokenizer(config)
        for raw in TRICKY:
            # as the tokeniser meets them (after NFKC), and as given (the analysis alone)
            for found in [*RAW_TOKEN.findall(unicodedata.normalize("NFKC", raw)), raw]:
                assert tok.unit(found) == reference_analyse(found, config, STOPWORDS), (config, found)


@settings(max_examples=400)
@given(TEXTS, st.sampled_from(CONFIGS))
def test_analyse_equals_the_reference_on_any_text(text: str, config: TokenizerConfig) -> None:
    tok = Tokenizer(config)
    for raw in tok.raw_tokens(text):
        assert tok.unit(raw) == reference_analyse(raw, config, STOPWORDS)


# -- the raw-token scan: possessive quantifiers match what the plain pattern matched -------------
# the pattern's two character classes, read from it: the leading marks, then the connectors
MARKS, CONNECTORS = (re.sub(r"\\(.)", r"\1", c) for c in re.findall(r"\[((?:\\.|[^\]\\])+)\]", tk.RAW_TOKEN_PLAIN))
TOKENISH = st.lists(
    st.one_of(
        st.sampled_from(list(MARKS + CONNECTORS)),
        st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=4),
        st.sampled_from(["foo", "_", "x1", "..", "~/", "a.b", "12:30", "’s"]),
        SPACES,
    ),
    max_size=16,
).map("".join)


def test_marks_and_connectors_are_never_word_characters() -> None:
    """What makes the possessive form equal: no character it may not give back could start the next part."""
    assert (MARKS, CONNECTORS) == ("~./@#$", ".-/\\@:+#~?=&%'’")  # read as written
    assert [c for c in MARKS + CONNECTORS if re.fullmatch(r"\w", c)] == []


@pytest.mark.skipif(sys.version_info < (3, 11), reason="possessive quantifiers need Python 3.11")
@settings(max_examples=1500)
@given(TOKENISH)
def test_possessive_raw_tokens_equal_the_plain_pattern(text: str) -> None:
    assert re.findall(tk.RAW_TOKEN_POSSESSIVE, text) == re.findall(tk.RAW_TOKEN_PLAIN, text)


def test_possessive_raw_tokens_equal_the_plain_pattern_on_tricky_texts() -> None:
    plain = re.compile(tk.RAW_TOKEN_PLAIN)
    for text in [*TRICKY, " ".join(TRICKY), "~/.bashrc @neo #12 $5 ../x a.-b c.. d--e f’s g'h i?=j&k%l"]:
        assert RAW_TOKEN.findall(text) == plain.findall(text), text


# -- the mirror's batch upsert writes what per-row writes write ------------------------------------
def _memories(n: int, *, text_suffix: str = "", bump: int = 0) -> list[Memory]:
    base = datetime(2026, 1, 1, tzinfo=timezone.utc)
    now = base + timedelta(days=30, seconds=bump)
    out = []
    for i in range(n):
        mtype = list(MemoryType)[i % len(MemoryType)]
        out.append(
            Memory(
                label=1000 + i,
                id=f"{i:016x}",
                uri=f"mem://a/{mtype.value}/{i:016x}",
                actor="a",
                scope=Scope.PROJECT if i % 3 == 0 else Scope.GLOBAL,
                type=mtype,
                text=f"memory {i}{text_suffix}",
                source=list(Source)[i % len(Source)],
                confidence=(i % 10) / 10,
                importance=(i % 7) / 7,
                strength=(i % 5) / 5,
                created_at=base + timedelta(hours=i) if i % 4 else base.replace(tzinfo=None),  # naive = UTC
                updated_at=now,
                last_accessed_at=now,
                access_count=i % 6 + bump,
                tags=("t", str(i)) if i % 2 else (),
                metadata={"i": i, "z": [1, 2]} if i % 5 else {},
                content_hash=f"h{i}{text_suffix}",
                superseded_by=f"mem://a/fact/{i + 1:016x}" if i % 9 == 0 else None,
                valid_until=now + timedelta(days=i) if i % 8 == 0 else None,
            )
        )
    return out


def _snapshot(table: ActorTable) -> tuple[object, ...]:
    n = table.size
    nums = {name: arr[:n].tolist() for name, arr in table.num.items()}
    objs = {name: col[:n] for name, col in table.obj.items()}
    return (table.labels[:n].tolist(), dict(table.rows), dict(table.ids), json.dumps(nums, default=str), repr(objs))


def test_batch_upsert_writes_what_row_by_row_upserts_write() -> None:
    batched, single = ActorTable("a", capacity=16), ActorTable("a", capacity=16)
    first = _memories(200)
    batched.upsert(first)  # over the batch threshold: the columnar path, growing the table
    for m in first:
        single.upsert([m])  # one at a time: the per-row path
    assert _snapshot(batched) == _snapshot(single)
    # overwrite half of them and add new ones, in one batch again
    second = _memories(300, text_suffix=" edited", bump=3)[100:]
    for m in first[100:150]:  # rows the second batch overwrites
        got = batched.get(m.label)  # a built Memory is cached ...
        assert got is not None and (got.uri, got.text, got.tags) == (m.uri, m.text, m.tags)
    batched.upsert(second)
    for m in second:
        single.upsert([m])
    assert _snapshot(batched) == _snapshot(single)
    for m in second:
        assert batched.get(m.label) == single.get(m.label)
        assert batched.get(m.label).text.endswith(" edited")  # ... and dropped when its row changes
    for m in first[:100]:
        assert batched.get(m.label) == single.get(m.label)
        assert batched.get(m.label).text == m.text


# -- naive UTC: the stored time (and an event's dedup key) of any aware time, as before ------------
OFFSETS = st.integers(min_value=-23 * 60, max_value=23 * 60).map(lambda m: timezone(timedelta(minutes=m)))
TIMES = st.datetimes(min_value=datetime(1900, 1, 2), max_value=datetime(2200, 1, 1))


def reference_naive_utc(value: datetime) -> datetime:
    """The form every stored time and event dedup key was made with."""
    return value if value.tzinfo is None else value.astimezone(timezone.utc).replace(tzinfo=None)


@settings(max_examples=800)
@given(TIMES, st.one_of(st.none(), st.just(timezone.utc), OFFSETS), st.sampled_from([0, 1]))
def test_naive_utc_equals_the_replace_form(value: datetime, zone: timezone | None, fold: int) -> None:
    aware = value.replace(tzinfo=zone, fold=fold)
    got, want = naive_utc(aware), reference_naive_utc(aware)
    assert (got, got.tzinfo, got.fold, got.isoformat()) == (want, None, want.fold, want.isoformat())


# -- memory ids: one read of the random source a batch, ids as token_hex(8) made them -----------
def test_new_ids_are_fresh_16_digit_hex_ids() -> None:
    assert new_ids(0) == []
    ids = [*new_ids(5000), *new_ids(5000)]
    assert all(re.fullmatch(r"[0-9a-f]{16}", i) for i in ids)
    assert len(set(ids)) == len(ids)  # 64 random bits each: a repeat among 10k is ~3e-12 likely
    assert len({i[0] for i in ids}) == 16 and len({i[-1] for i in ids}) == 16  # every digit position varies
