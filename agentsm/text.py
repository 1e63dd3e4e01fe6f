"""Recorded text made safe to print: what an LLM or a tool wrote can hold terminal escape
sequences (clear screen, set the window title, colours), other control characters and bidi
overrides that would act on the reader's terminal. `printable` shows them as escapes. And
`plural`, for counts said in words, and `shortened`, for the start of a long text."""

from __future__ import annotations

import re

__all__ = ["Printable", "plural", "printable", "shortened"]

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_SURROGATES = "\ud800-\udfff"  # no terminal can be sent one alone: text edited outside agentsm
_ESCAPED = {
    False: f"[\x00-\x1f\x7f-\x9f{_BIDI}{_SURROGATES}]",
    True: f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}{_SURROGATES}]",  # newlines and tabs kept
}
"""What `printable` escapes, one line or several (compiled with the first text that needs it)."""
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


class Printable(str):
    """Text already made safe (escaped, or produced by the renderer itself): `printable`
    returns it unchanged, so the renderer's own colours are never escaped."""

    __slots__ = ()


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def printable(text: object, *, lines: bool = False) -> Printable:
    """`text` with every control character (C0, DEL, C1), bidi control and lone surrogate
    shown as an escape (`\\x1b[2J`, `\\u202e`, `\\udcff`); with `lines`, newlines and tabs
    are kept (multi-line output)."""
    if isinstance(text, Printable):
        return text
    text = str(text)
    if text.isprintable():  # no control, format (bidi) or separator character but the space
        return Printable(text)
    return Printable(re.compile(_ESCAPED[lines]).sub(_escape, text))


def plural(n: int, word: str, many: str | None = None) -> str:
    """`1 run`, `2 runs`, `0 runs`; `1 entry`, `3 entries` (irregular plurals given as `many`)."""
    return f"{n} {word if n == 1 else many or word + 's'}"


def shortened(text: str, limit: int) -> str:
    """`text` in at most `limit` characters: when longer, cut after its last whole word that
    fits, and ended with "…" (mid-word only where that word is over two thirds of the room, as
    a URL or a JSON value may be)."""
    if len(text) <= limit:
        return text
    cut = text[: max(limit - 1, 0)]
    space = max(cut.rfind(" "), cut.rfind("\n"), cut.rfind("\t"))
    if space >= limit // 3 and not text[limit - 1].isspace():
        cut = cut[:space]
    return cut.rstrip() + "…"
