"""Terminal output: tables, and colours when writing to a terminal (plain when piped).

Everything shown passes through `printable`: recorded text never reaches the terminal with its
control characters raw; only the renderer's own colours do."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import IO

from agentsm.text import Printable, printable

__all__ = ["Style", "printable", "table"]

_CODES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}


class Style:
    """ANSI colours, on only for a terminal and when NO_COLOR is not set."""

    def __init__(self, stream: IO[str] = sys.stdout) -> None:
        self.enabled = stream.isatty() and "NO_COLOR" not in os.environ

    def __call__(self, text: str, *styles: str) -> Printable:
        """`text` made printable, in these styles when colours are on."""
        safe = printable(text)
        if not self.enabled or not styles:
            return safe
        codes = ";".join(_CODES[s] for s in styles)
        return Printable(f"\033[{codes}m{safe}\033[0m")

    def status(self, status: str) -> Printable:
        """A run status, coloured by what it means."""
        colour = {
            "done": "green",
            "failed": "red",
            "aborted": "red",
            "waiting": "yellow",
            "ready": "yellow",
            "running": "cyan",
            "stopped": "yellow",
            "interrupted": "yellow",
        }.get(status)
        return self(status, colour) if colour else printable(status)


def _visible(text: str) -> int:
    import re

    return len(re.sub(r"\033\[[0-9;]*m", "", text))


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], style: Style) -> str:
    """Left-aligned columns sized to their content, with a bold header; each cell is made
    printable (cells the renderer styled are kept as they are)."""
    cells = [[printable(c) for c in row] for row in rows]
    widths = [_visible(h) for h in headers]
    for row in cells:
        widths = [max(w, _visible(c)) for w, c in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c + " " * (w - _visible(c)) for c, w in zip(cells, widths, strict=True))

    out: list[str] = [style(line(headers).rstrip(), "bold")]
    out.extend(line(r).rstrip() for r in cells)
    return "\n".join(out)
