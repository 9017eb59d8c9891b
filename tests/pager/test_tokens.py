from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from mempager.tokens import TRUNCATION_MARKER, estimate_tokens, is_high_entropy, truncate_tokens

HIGH = [
    "0xdeadbeefcafebabe",
    "a3f9c2e1b7d4e5f6a7b8",
    "src/app/main.py",
    "v1.2.3-rc4",
    "550e8400-e29b-41d4-a716-446655440000",
    "https://example.com/x?y=1",
]


def test_estimate_is_bytes_over_four_rounded_up() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("é") == 1  # two bytes


def test_short_text_is_untouched() -> None:
    assert truncate_tokens("hello world", 10) == "hello world"


def test_truncation_is_marked_and_fits() -> None:
    text = "word " * 400
    out = truncate_tokens(text, 50)
    assert out.endswith(TRUNCATION_MARKER)
    assert estimate_tokens(out) <= 50


def test_high_entropy_tokens_recognised() -> None:
    for token in HIGH:
        assert is_high_entropy(token), token
    for token in ["hello", "release", "tomorrow"]:
        assert not is_high_entropy(token)


@settings(max_examples=300)
@given(
    words=st.lists(st.sampled_from(["alpha", "beta", "gamma", "key", "the", *HIGH]), min_size=1, max_size=80),
    budget=st.integers(min_value=1, max_value=200),
)
def test_truncation_never_splits_a_high_entropy_token(words: list[str], budget: int) -> None:
    text = " ".join(words)
    out = truncate_tokens(text, budget)
    assert estimate_tokens(out) <= budget
    body = out[: -len(TRUNCATION_MARKER)] if out.endswith(TRUNCATION_MARKER) else out
    assert text.startswith(body)
    for token in re.findall(r"\S+", body):
        assert token in words, f"split token {token!r} in {out!r}"


@given(st.text(max_size=400), st.integers(min_value=0, max_value=120))
def test_truncation_fits_any_unicode(text: str, budget: int) -> None:
    out = truncate_tokens(text, budget)
    assert estimate_tokens(out) <= max(budget, 0) or out == text and estimate_tokens(text) <= budget
    out.encode("utf-8")  # never a broken code point
