"""Token budget arithmetic: a deterministic bytes/4 estimate and a truncation that never corrupts.

The verbatim trust contract: a high-entropy token (address, hash, id, path, URL, version) is
either copied whole or left out. A paraphrased or half-copied ``0x…`` is a corrupted memory.
"""

from __future__ import annotations

import re

TRUNCATION_MARKER = " …[truncated]"

_HEX = re.compile(r"^(0x)?[0-9a-fA-F]{8,}$")
_PATHLIKE = re.compile(r"[/\\]|^[a-zA-Z][a-zA-Z0-9+.-]*://")
_LONG_RUN = 40  # an unbroken run longer than this is prose without spaces, not a word
_DIGITS = re.compile(r"\d")
_ALPHA = re.compile(r"[A-Za-z]")


def estimate_tokens(text: str) -> int:
    """bytes/4 rounded up: dependency-free, deterministic, and the same everywhere budgets are."""
    return (len(text.encode("utf-8")) + 3) // 4


def is_high_entropy(token: str) -> bool:
    """True for tokens that must never be split: hex, hashes, ids, paths, URLs, versions."""
    core = token.strip("()[]{}<>\"'`,;:.!?")
    if len(core) < 6:
        return False
    if core.lower().startswith("0x") or _HEX.match(core):
        return True
    if _PATHLIKE.search(core):
        return True
    # mixed letters and digits (uuids, api ids, v1.2.3-rc4, sha prefixes)
    if _DIGITS.search(core) and (_ALPHA.search(core) or "." in core or "-" in core):
        return True
    # long unbroken tokens without vowels-and-spaces structure are ids, base64, etc.
    return len(core) >= 24 and " " not in core


def _utf8_prefix(text: str, max_bytes: int) -> str:
    """The longest prefix of ``text`` whose UTF-8 encoding fits in ``max_bytes``."""
    raw = text.encode("utf-8")
    if len(raw) <= max_bytes:
        return text
    return raw[: max(0, max_bytes)].decode("utf-8", errors="ignore")


def truncate_tokens(text: str, max_tokens: int, marker: str = TRUNCATION_MARKER) -> str:
    """Fit ``text`` into ``max_tokens`` (bytes/4), appending ``marker`` when anything was cut.

    The cut backs off to the last whitespace so no word is split; a high-entropy token that
    would be split is dropped whole. Returns "" when not even the marker fits.
    """
    if estimate_tokens(text) <= max_tokens:
        return text
    room = max_tokens * 4 - len(marker.encode("utf-8"))
    if room <= 0:
        return ""
    head = _utf8_prefix(text, room)
    cut_inside_token = len(head) < len(text) and not text[len(head)].isspace()
    if cut_inside_token:
        boundary = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"))
        partial = head[boundary + 1 :]
        whole = text[boundary + 1 :].split(None, 1)[0] if text[boundary + 1 :] else ""
        if boundary >= 0:
            head = head[:boundary]
        elif is_high_entropy(whole) or is_high_entropy(partial) or len(whole) <= _LONG_RUN:
            head = ""
        # else: one long ordinary run with no spaces (e.g. CJK prose): a code-point-safe cut
    return head.rstrip() + marker
