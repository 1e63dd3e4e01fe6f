"""What every `agentsm` command shares: `--db` and `--debug` accepted anywhere on the line
(from `options`), the log it opens, the user's builder, JSON option values, and listings
as tables, JSON or CSV."""

from __future__ import annotations

import functools
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import click

from agentsm.tables import Cell, Column, render_table, styles_wanted, terminal_width
from agentsm.text import plural

from ..render import Style, printable
from .options import (
    DEFAULT_DB,
    common,
    db_path,
    debugging,
    did_you_mean,
    example,
    reset,
)

if TYPE_CHECKING:  # the agent's parts load with the commands that run an agent
    from agentsm import AgentConfig
    from eventstore import EventStore

    from ..source import Builder

__all__ = [
    "DEFAULT_DB",
    "Listing",
    "builder_option",
    "common",
    "config_arg",
    "db_path",
    "debugging",
    "did_you_mean",
    "echo",
    "example",
    "format_options",
    "get_builder",
    "json_arg",
    "output_format",
    "limit_option",
    "open_log",
    "out",
    "parse_since",
    "plural",
    "reset",
    "shown",
    "status_cell",
    "when",
]

out = Style(sys.stdout)
F = TypeVar("F", bound=Callable[..., Any])


def open_log(*, write: bool = False) -> EventStore:
    """The log of `--db`; commands that only inspect it open it read-only."""
    from ..opening import open_store  # SQLite loads with the first command that reads a log

    return open_store(db_path(), read_only=not write)


def builder_option(func: F) -> F:
    """`--builder module:factory` on a command that may run the user's agent."""
    return click.option(
        "--builder",
        metavar="MODULE:FACTORY",
        help="your agent: factory(task) returns an AgentBuilder; default $AGENTSM_BUILDER",
    )(func)


def get_builder(spec: str | None, required: bool = False) -> Builder | None:
    """The user's agent from `--builder` or `$AGENTSM_BUILDER`; a one-line error when a
    command needs it and neither is given."""
    spec = spec or os.environ.get("AGENTSM_BUILDER")
    if spec:
        from ..source import load_builder

        return load_builder(spec)
    if required:
        from ..errors import UsageError

        raise UsageError(
            "This command needs your agent: pass --builder module:factory (or set "
            "AGENTSM_BUILDER), where factory(task) returns an AgentBuilder."
        )
    return None


def json_arg(option: str, text: str, example_form: str) -> Any:
    """A JSON command-line value, or an error naming the option and showing the form."""
    import json

    try:
        return json.loads(text)
    except ValueError as e:
        from ..errors import UsageError

        raise UsageError(f"{option} is not valid JSON ({e}); give it as in {example_form}.") from e


def config_arg(text: str, recorded: AgentConfig) -> AgentConfig:
    """The recorded config with the fields given in `--config` changed (the others kept); an
    unknown or invalid field is one line naming the valid ones."""
    from pydantic import ValidationError

    from agentsm import AgentConfig

    from ..errors import UsageError

    form = """--config '{"max_steps": 3}'"""
    value = json_arg("--config", text, form)
    if not isinstance(value, dict):
        raise UsageError(f"--config must be a JSON object of AgentConfig fields, e.g. {form}.")
    fields = ", ".join(AgentConfig.model_fields)
    unknown = sorted(set(value) - set(AgentConfig.model_fields))
    if unknown:
        import difflib

        close = difflib.get_close_matches(unknown[0], AgentConfig.model_fields, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UsageError(
            f"--config: no field {', '.join(map(repr, unknown))}{hint}; the fields are {fields}."
        )
    try:
        return AgentConfig.model_validate({**recorded.model_dump(), **value})
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the value"
        raise UsageError(
            f"--config is not a valid AgentConfig: {where}: {first['msg']}; the fields are "
            f"{fields}, e.g. {form}."
        ) from e


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_since(text: str | None, now: float | None = None) -> float | None:
    """`--since`: a duration back from now (`90s`, `30m`, `2h`, `1d`, `1w`) or a date or time
    (`2026-11-22`, `2026-11-22T08:00`), as an epoch time."""
    if text is None:
        return None
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text)
    if match:
        return (now or time.time()) - float(match[1]) * _UNITS[match[2]]
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        from ..errors import UsageError

        raise UsageError(
            f"--since {text!r}: give a duration (30m, 2h, 1d, 1w) or a date (2026-11-22) "
            "or a time (2026-11-22T08:00)."
        ) from None


def echo(text: str) -> None:
    """Write command output: through a pager when it is longer than the terminal."""
    if terminal_width(sys.stdout) and text.count("\n") + 2 > _terminal_lines():
        click.echo_via_pager(text + "\n")
    else:
        click.echo(text)


def _terminal_lines() -> int:
    import shutil

    return shutil.get_terminal_size().lines


class Listing:
    """Rows of a listing with their raw values, shown as a table fitted to the terminal, or as
    JSON (a list of objects) or CSV for other programs."""

    def __init__(self, columns: Sequence[Column], key: Sequence[str]) -> None:
        self.columns = list(columns)
        self.key = list(key)
        self.records: list[dict[str, Any]] = []
        self.shown: list[list[str | Cell]] = []

    def add(self, record: dict[str, Any], shown: Sequence[str | Cell]) -> None:
        """One row: its raw values (JSON, CSV) and its cells as the table shows them."""
        self.records.append(record)
        self.shown.append(list(shown))

    def emit(self, fmt: str | None) -> None:
        """Print the rows as `fmt` ("json", "csv") or as a table (None). CSV shows control
        characters as escapes (`printable`), as the table does; JSON keeps them, escaped."""
        if fmt == "json":
            import json

            click.echo(json.dumps(self.records, indent=2, ensure_ascii=False))
        elif fmt == "csv":
            import csv
            import io

            buffer = io.StringIO()
            writer = csv.DictWriter(buffer, fieldnames=self.key, lineterminator="\n")
            writer.writeheader()
            writer.writerows(
                {k: printable(v) if isinstance(v, str) else v for k, v in r.items()}
                for r in self.records
            )
            click.echo(buffer.getvalue(), nl=False)
        else:
            echo(self.table())

    def __repr__(self) -> str:
        return f"Listing(columns={[c.header for c in self.columns]}, rows={len(self.records)})"

    def table(self) -> str:
        return render_table(
            self.columns,
            self.shown,
            width=terminal_width(sys.stdout),
            styled=styles_wanted(sys.stdout),
        )


def limit_option(what: str, *, name: str = "--limit", default: int = 50) -> Callable[[F], F]:
    """`-n N` on a command that lists things: at most N `what` (0: all of them); click refuses
    a negative N. Every command reads -n the same way."""
    return click.option(
        "-n",
        name,
        type=click.IntRange(min=0),
        default=default,
        show_default=bool(default),
        help=f"at most N {what} (0: all)",
    )


def output_format(as_json: bool, as_csv: bool) -> str | None:
    """ "json", "csv" or None (a table) from `--json` and `--csv`, which exclude each other."""
    if as_json and as_csv:
        from ..errors import UsageError

        raise UsageError("give --json or --csv, not both.")
    return "json" if as_json else "csv" if as_csv else None


def format_options(func: F) -> F:
    """`--json` and `--csv` on a listing, passed to it as `fmt` (see `output_format`)."""

    @functools.wraps(func)
    def command(*args: Any, as_json: bool, as_csv: bool, **kwargs: Any) -> Any:
        return func(*args, fmt=output_format(as_json, as_csv), **kwargs)

    wrapped = click.option("--csv", "as_csv", is_flag=True, help="CSV, with a header row")(command)
    return click.option("--json", "as_json", is_flag=True, help="a JSON list of objects")(wrapped)  # type: ignore[return-value]


def status_cell(status: str) -> Cell:
    """A run status, coloured by what it means (on a terminal)."""
    colour = {
        "done": "green",
        "failed": "red",
        "aborted": "red",
        "waiting": "yellow",
        "ready": "yellow",
        "running": "cyan",
        "stopped": "yellow",
        "interrupted": "yellow",
    }.get(status, "")
    return Cell(status, colour)


def when(ts: float) -> str:
    """An epoch time as local date and time."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def shown(text: object) -> str:
    """Recorded text made safe to print (see `agentsm.text.printable`)."""
    return printable(text)
