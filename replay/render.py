"""Terminal output: colours when writing to a terminal (plain when piped or with NO_COLOR).

Everything shown passes through `printable`: recorded text never reaches the terminal with its
control characters raw; only the renderer's own colours do. Tables are drawn by the one
renderer of the library, `agentsm.tables.render_table`."""

from __future__ import annotations

import os
import sys
from typing import IO

from agentsm.text import Printable, printable

__all__ = ["Style", "printable"]

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

    def __repr__(self) -> str:
        return f"Style(enabled={self.enabled})"
