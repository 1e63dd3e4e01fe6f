"""The table renderer lays rows out itself (cell widths from `rich.cells`), so that a listing
loads no console: it draws exactly what rich's own `Table` drew for the same columns, widths and
cells, wide and combining characters, cut cells and right-justified columns included."""

from __future__ import annotations

import io
import random

import pytest
from rich.console import Console
from rich.table import Table
from rich.text import Text

from agentsm.tables import Cell, Column, _layout, render_table
from agentsm.text import printable


def drawn_by_rich(columns: list[Column], rows: list[list[str]], width: int | None) -> str:
    """The table as rich's Table drew it (the renderer before it laid rows out itself)."""
    cells = [[(printable(v), "") for v in row] for row in rows]
    keep, widths = _layout(columns, cells, width)
    table = Table(box=None, padding=(0, 2, 0, 0), pad_edge=False, show_edge=False, expand=False)
    for i in keep:
        table.add_column(
            columns[i].header,
            justify=columns[i].justify,
            no_wrap=True,
            overflow="ellipsis",
            width=widths[i],
        )
    for row in cells:
        texts = [Text(row[i][0], no_wrap=True, end="") for i in keep]
        for text in texts:
            text.overflow = "ellipsis"
        table.add_row(*texts)
    buffer = io.StringIO()
    Console(
        file=buffer,
        width=sum(widths[i] + 2 for i in keep) + 2,
        color_system=None,
        no_color=True,
        highlight=False,
        emoji=False,
        markup=False,
        soft_wrap=False,
        legacy_windows=False,
    ).print(table)
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines())


@pytest.mark.parametrize("seed", range(4))
def test_tables_are_drawn_as_rich_drew_them(seed: int) -> None:
    rng = random.Random(seed)
    letters = [*"abc xyz-", "漢", "字", "é", "👍", "e\u0301", "…", "\n"]
    for _ in range(400):
        columns = [
            Column(
                rng.choice(["id", "task", "a", "a long header"]),
                rng.choice(["left", "right"]),
                flexible=rng.random() < 0.4,
                drop=rng.randint(0, 3),
            )
            for _ in range(rng.randint(1, 5))
        ]
        rows = [
            ["".join(rng.choice(letters) for _ in range(rng.randint(0, 30))) for _ in columns]
            for _ in range(rng.randint(0, 4))
        ]
        width = rng.choice([None, 12, 20, 30, 50, 80, 120])
        assert render_table(columns, rows, width=width) == drawn_by_rich(columns, rows, width)


def test_styles_colour_the_text_only_and_only_when_asked() -> None:
    rows = [[Cell("done", "green"), "1"], [Cell("failed", "bold red"), "2"]]
    styled = render_table(["status", "n"], rows, styled=True).splitlines()
    assert styled[0] == "\x1b[1mstatus\x1b[0m  \x1b[1mn\x1b[0m"
    assert styled[1] == "\x1b[32mdone\x1b[0m    1"
    assert styled[2] == "\x1b[1;31mfailed\x1b[0m  2"
    assert render_table(["status", "n"], rows) == "status  n\ndone    1\nfailed  2"
