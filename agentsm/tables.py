"""The one table renderer of agentsm, for `Trace.print()` and the `agentsm` command alike.

Rows fit the given width: the columns marked flexible (tasks, answers, summaries) give up room
first and a cut cell ends with an ellipsis; every cell stays on one line, since recorded text
is shown through `printable` (a newline in an answer is shown as `\\n`). Without a width (output
piped to a file or a program) nothing is cut, and without styles no escape sequence is written.
"""

from __future__ import annotations

import io
import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Literal

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .text import printable

__all__ = ["Cell", "Column", "render_table", "styles_wanted", "terminal_width"]


@dataclass(frozen=True, slots=True)
class Column:
    """A column of a table: its header, alignment, whether it may be cut to fit (`flexible`:
    cut with an ellipsis), and whether it may be left out on a narrow terminal (`drop`)."""

    header: str
    justify: Literal["left", "right"] = "left"
    flexible: bool = False
    drop: int = 0
    """Where room is short, columns with a higher `drop` are left out first (0: always kept)."""


@dataclass(frozen=True, slots=True)
class Cell:
    """A cell shown in a style (`"green"`, `"bold red"`) when the table is styled."""

    text: str
    style: str = ""


def terminal_width(stream: IO[str] | None = None) -> int | None:
    """The width of the terminal `stream` writes to, or None when it is not a terminal."""
    target = stream if stream is not None else sys.stdout
    if not (hasattr(target, "isatty") and target.isatty()):
        return None
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
    cells = [
        [(printable(v.text), v.style) if isinstance(v, Cell) else (printable(v), "") for v in row]
        for row in rows
    ]
    keep, widths = _layout(cols, cells, width)
    table = Table(
        box=None,
        padding=(0, 2, 0, 0),
        pad_edge=False,
        show_edge=False,
        header_style="bold" if styled else "",
        expand=False,
    )
    for i in keep:
        table.add_column(
            cols[i].header,
            justify=cols[i].justify,
            no_wrap=True,
            overflow="ellipsis",
            width=widths[i],
        )
    for row in cells:
        texts = []
        for i in keep:
            text, style = row[i]
            texts.append(Text(text, style=style if styled else "", no_wrap=True, end=""))
            texts[-1].overflow = "ellipsis"
        table.add_row(*texts)
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=sum(widths[i] + 2 for i in keep) + 2,
        color_system="standard" if styled else None,
        force_terminal=styled,
        no_color=not styled,
        highlight=False,
        emoji=False,
        markup=False,
        soft_wrap=False,
        legacy_windows=False,
    )
    console.print(table)
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines())


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
