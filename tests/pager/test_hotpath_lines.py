"""The fast page-line path renders exactly what fence.neutralize / render_line render."""

from __future__ import annotations

from datetime import datetime, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from mempager.fence import neutralize, render_line, render_snippet
from mempager.lanes.lines import line, neutral, snippet_line
from mempager.types import LaneHit, MemoryType, Snippet, Source

# Characters each rule of neutralize acts on, mixed with plain text, so every rule is exercised.
TRICKY = (
    "<>`~![]()#=\\ \t\n\r\v\f\x1c\x85\u2028\u2029\x00\x7f\u00ad\u034f\u061c\u115f\u1160\u180e\u200b\u200d"
    "\u202e\u2060\u3164\ufe0f\ufeff\uffa0\ufffa\U000e0001\ue000\u00a0\u3000é’❤😀"
)
texts = st.one_of(
    st.text(),
    st.text(alphabet=st.sampled_from(list(TRICKY) + list("abc XY1")), max_size=40),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=60),
)


@settings(max_examples=3000, deadline=None)
@given(texts)
def test_neutral_is_neutralize(text: str) -> None:
    assert neutral(text) == neutralize(text)


def test_neutral_on_known_cases() -> None:
    for text in [
        "",
        "plain words",
        " leading",
        "trailing ",
        "two  spaces",
        "# header",
        "= rule",
        "> quote",
        "a <b> c",
        "```code```",
        "~~~",
        "![img](http://x)",
        "emoji ❤️ with a variation selector",
        "tab\there",
        "line\nbreak",
        "zero\u200bwidth",
        "Hangul filler \u3164 printable",
        "café ’quoted’",
    ]:
        assert neutral(text) == neutralize(text), text


@settings(max_examples=500, deadline=None)
@given(texts, st.booleans(), st.sampled_from(list(Source)))
def test_line_is_render_line(text: str, truncated: bool, source: Source) -> None:
    at = datetime(2024, 2, 29, 23, 59, 59, 999_999, tzinfo=timezone.utc)
    uri = "mem://actor/event/0123456789abcdef"
    assert line(at, source.value, uri, text, truncated) == render_line(at, source.value, uri, text, truncated)


def test_snippet_line_is_render_snippet() -> None:
    snippet = Snippet(
        uri="mem://a/fact/0123456789abcdef",
        text="the <b>build</b> uses  make",
        type=MemoryType.FACT,
        score=0.5,
        lanes={"lexical": LaneHit("lexical", 1, 2.0)},
        label=7,
        source=Source.USER,
        created_at=datetime(2025, 1, 2, 3, 4, tzinfo=timezone.utc),
        tokens=12,
        truncated=True,
    )
    assert snippet_line(snippet) == render_snippet(snippet)
