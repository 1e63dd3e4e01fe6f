"""The options every `agentsm` command takes (`--db` and `--debug`, anywhere on the line) and
the small helpers the command group needs: only click is imported here, so that `agentsm
--help` answers at once (the rest of `common` loads with the commands)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import click

__all__ = [
    "DB_HELP",
    "DEFAULT_DB",
    "common",
    "db_path",
    "debugging",
    "did_you_mean",
    "example",
    "reset",
]

DEFAULT_DB = "agentsm.db"
DB_HELP = f"the agentsm log (default: $AGENTSM_DB, else ./{DEFAULT_DB})"
F = TypeVar("F", bound=Callable[..., Any])
_SETTINGS: dict[str, Any] = {"debug": False}


def _keep_db(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None:  # kept on this command line's contexts (`meta` is shared by them)
        ctx.meta["agentsm.db"] = value


def _keep_debug(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        _SETTINGS["debug"] = True


def common(func: F) -> F:
    """`--db` and `--debug` on a command (the group takes them too: before or after it)."""
    func = click.option(
        "--db", metavar="PATH", help=DB_HELP, expose_value=False, callback=_keep_db
    )(func)
    return click.option(
        "--debug",
        is_flag=True,
        help="show the traceback of an error",
        expose_value=False,
        callback=_keep_debug,
    )(func)


def reset() -> None:
    """Forget the options of an earlier command line (`main` runs several in one process)."""
    _SETTINGS.update(debug=False)


def debugging() -> bool:
    """Whether `--debug` was given."""
    return bool(_SETTINGS["debug"])


def db_path() -> str:
    """`--db` (anywhere on the line), else `$AGENTSM_DB`, else ./agentsm.db."""
    ctx = click.get_current_context(silent=True)
    given = ctx.meta.get("agentsm.db") if ctx is not None else None
    return str(given or os.environ.get("AGENTSM_DB") or DEFAULT_DB)


def example(*lines: str) -> str:
    """A command's help epilog: its examples, one per line."""
    return "\b\n" + "\n".join(f"example: {line}" for line in lines)


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """` Did you mean 'runs'?` when `word` is close to some of `choices` (up to three), else
    "": the end of a message about an unknown name."""
    import difflib

    close = [repr(c) for c in difflib.get_close_matches(word, list(choices), n=3)]
    if len(close) > 1:
        close = [", ".join(close[:-1]), close[-1]]
    return f" Did you mean {' or '.join(close)}?" if close else ""
