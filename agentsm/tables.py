"""The one table renderer of agentsm, for `Trace.print()` and the `agentsm` command alike.

Rows fit the given width: the columns marked flexible (tasks, answers, summaries) give up room
first and a cut cell ends with an ellipsis; every cell stays on one line, since recorded text
is shown through `printable` (a newline in an answer is shown as `\\n`). Without a width (output
piped to a file or a program) nothing is cut, and without styles no escape sequence is written.
Cells are measured in terminal cells (a CJK character takes two) with `rich.cells`, and laid out
here, so that a listing loads no console machinery; text of narrow characters only (Latin,
Latin-1 and extended Latin letters, one cell each, as rich counts them too) is measured without
loading rich at all.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import IO, Literal, NamedTuple

from .text import printable

__all__ = ["Cell", "Column", "render_table", "styles_wanted", "terminal_width"]


class Column(NamedTuple):
    """A column of a table: its header, alignment, whether it may be cut to fit (`flexible`:
    cut with an ellipsis), and whether it may be left out on a narrow terminal (`drop`)."""

    header: str
    justify: Literal["left", "right"] = "left"
    flexible: bool = False
    drop: int = 0
    """Where room is short, columns with a higher `drop` are left out first (0: always kept)."""


class Cell(NamedTuple):
    """A cell shown in a style (`"green"`, `"bold red"`) when the table is styled."""

    text: str
    style: str = ""


def terminal_width(stream: IO[str] | None = None) -> int | None:
    """The width of the terminal `stream` writes to, or None when it is not a terminal."""
    target = stream if stream is not None else sys.stdout
    if not (hasattr(target, "isatty") and target.isatty()):
        return None
    import shutil  # only for a terminal: piped output loads no more

    return shutil.get_terminal_size().columns


def styles_wanted(stream: IO[str] | None = None) -> bool:
    """Colours for a terminal only, and never when NO_COLOR is set."""
    target = stream if stream is not None else sys.stdout
    return bool(hasattr(target, "isatty") and target.isatty()) and "NO_COLOR" not in os.environ


def render_table(
    columns: Sequence[Column | str],
    rows: Sequence[Sequence[str | Cell]],
    *,
    width: int | None = None,
    styled: bool = False,
) -> str:
    """The table as text: a header line, then one line per row, columns two spaces apart.
    `width`: fit into that many characters (cutting flexible columns first); None: no limit."""
    cols = [c if isinstance(c, Column) else Column(c) for c in columns]
    cells: list[list[tuple[str, str]]] = [
        [(printable(v.text), v.style) if isinstance(v, Cell) else (printable(v), "") for v in row]
        for row in rows
    ]
    keep, widths = _layout(cols, cells, width)
    if not keep:
        return ""
    table: list[list[tuple[str, str]]] = [[(c.header, "bold") for c in cols], *cells]
    lines = []
    for row in table:
        line = "  ".join(
            _fitted(row[i][0], widths[i], cols[i].justify, row[i][1] if styled else "")
            for i in keep
        )
        lines.append(line.rstrip())
    return "\n".join(lines)


_NARROW = frozenset(map(chr, [*range(0x20, 0x7F), *range(0xA0, 0xAD), *range(0xAE, 0x300)]))
"""Characters one terminal cell wide by rich's own table of them (`rich.cells`)."""


def cell_len(text: str) -> int:
    """How many terminal cells `text` takes (`rich.cells.cell_len`)."""
    if _NARROW.issuperset(text):
        return len(text)
    from rich.cells import cell_len as cells  # wide or combining characters

    return cells(text)


def set_cell_size(text: str, total: int) -> str:
    """`text` cut or padded to `total` terminal cells (`rich.cells.set_cell_size`)."""
    if _NARROW.issuperset(text):
        return text[:total] if len(text) >= total else text + " " * (total - len(text))
    from rich.cells import set_cell_size as sized

    return sized(text, total)


_SGR = {"bold": "1", "dim": "2", "italic": "3", "underline": "4"} | {
    colour: str(30 + n)
    for n, colour in enumerate(("black", "red", "green", "yellow", "blue", "magenta", "cyan"))
}
"""The ANSI codes of the styles a `Cell` may name (`"bold red"`)."""


def _fitted(text: str, width: int, justify: str, style: str) -> str:
    """`text` in exactly `width` terminal cells: cut with an ellipsis when longer, padded to
    its side when shorter (right-justified text loses its trailing spaces first); in `style`
    (padding aside) when one is given."""
    if justify == "right":
        text = text.rstrip()
    if cell_len(text) > width:
        text = set_cell_size(text, width - 1) + "…" if width > 0 else ""
    pad = " " * (width - cell_len(text))
    codes = ";".join(_SGR[word] for word in style.split() if word in _SGR)
    if codes:
        text = f"\x1b[{codes}m{text}\x1b[0m"
    return pad + text if justify == "right" else text + pad


_ROOM = 20
"""The fewest characters a flexible column gets before droppable columns are left out."""


def _layout(
    cols: Sequence[Column], cells: Sequence[Sequence[tuple[str, str]]], width: int | None
) -> tuple[list[int], list[int]]:
    """Which columns are shown and how wide each is: fixed columns at their content's width;
    flexible ones share the rest. Without a width nothing is cut or left out."""
    natural = [
        max([cell_len(c.header), *(cell_len(row[i][0]) for row in cells)])
        for i, c in enumerate(cols)
    ]
    keep = list(range(len(cols)))
    if width is None:
        return keep, natural
    empty = {i for i, c in enumerate(cols) if c.drop and all(not row[i][0] for row in cells)}
    keep = [i for i in keep if i not in empty]

    def room(shown: list[int]) -> int:
        fixed = sum(natural[i] for i in shown if not cols[i].flexible)
        return width - fixed - 2 * (len(shown) - 1)

    def wanted(shown: list[int]) -> int:
        return sum(min(natural[i], _ROOM) for i in shown if cols[i].flexible)

    for i in sorted((i for i in keep if cols[i].drop), key=lambda i: -cols[i].drop):
        if room(keep) >= wanted(keep):
            break
        keep.remove(i)
    widths = list(natural)
    flexible = [i for i in keep if cols[i].flexible]
    left = room(keep)
    if flexible and sum(natural[i] for i in flexible) > left:
        share = max(left, len(flexible) * 4)
        total = sum(natural[i] for i in flexible)
        for i in flexible:
            widths[i] = max(4, natural[i] * share // total)
        for i in flexible:
            widths[i] = min(natural[i], widths[i])
        spare = share - sum(widths[i] for i in flexible)
        for i in flexible:  # what a short column leaves goes to the longer ones
            extra = min(spare, natural[i] - widths[i])
            widths[i] += extra
            spare -= extra
    return keep, widths
