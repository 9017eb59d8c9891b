"""Page lines without the per-character pass when the text has nothing to neutralise.

``fence.neutralize`` looks at every character of a memory (``unicodedata.category`` in a Python
loop): ~12 µs for a 100-character line, the largest single cost of a page fault's packing and of
rendering a page. Most memories have no markup and no invisible or control characters, and for
them ``neutralize`` returns its input unchanged; ``neutral`` proves that with C-speed checks and
calls ``neutralize`` for everything else, so its output is always ``neutralize``'s own
(tests/pager/test_hotpath_lines.py checks the two against each other on arbitrary text).

Why the checks suffice, rule by rule of ``neutralize``, for text that ``str.isprintable()``:
printable excludes every character of categories Cc, Cf, Co, Cs (the controls it drops), Zl, Zp
and Zs but the ASCII space, so no line break, tab, control or non-ASCII space is left, and strip
can only remove ASCII spaces. What remains are the characters ``fence._INVISIBLE`` names (some
are printable: variation selectors, Hangul fillers), ``<``/``>``, runs of three backticks or
tildes, ``![`` and ``](``, two spaces in a row, spaces at either end, and a leading ``#``, ``>``
or ``=``: the searches below look for each.
"""

from __future__ import annotations

import re
from datetime import datetime

from mempager.fence import _INVISIBLE, neutralize
from mempager.types import Snippet

_TOUCHED = re.compile(r"[<>]|```|~~~|!\[|\]\(|  ")


def neutral(text: str) -> str:
    """``fence.neutralize(text)``, without its per-character pass when that would change nothing."""
    if (
        text.isprintable()
        and text[:1] not in ("#", "=", " ")
        and text[-1:] != " "
        and _TOUCHED.search(text) is None
        and (text.isascii() or _INVISIBLE.search(text) is None)  # every invisible one is non-ASCII
    ):
        return text
    return neutralize(text)


def line(created_at: datetime, source: str, uri: str, text: str, truncated: bool = False) -> str:
    """``fence.render_line``, character for character (tests/pager/test_hotpath_lines.py holds the
    two together), with ``neutral`` for the text."""
    mark = " · truncated" if truncated else ""
    return f"- [{created_at:%Y-%m-%d %H:%M} · {source}{mark} · {uri}] " + neutral(text)


def snippet_line(snippet: Snippet) -> str:
    """``fence.render_snippet``."""
    return line(snippet.created_at, snippet.source.value, snippet.uri, snippet.text, snippet.truncated)
