"""What the worker, tail and otel commands share: the `--db` option and one-line errors."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from agentsm import AgentError
from eventstore import StoreError

from .render import printable

__all__ = ["CommandFailed", "db_option", "reported"]

F = TypeVar("F", bound=Callable[..., Any])


class CommandFailed(click.ClickException):
    """A command that could not do its work: one line on stderr, exit status 2."""

    exit_code = 2

    def format_message(self) -> str:
        return str(printable(self.message))


def db_option(func: F) -> F:
    """`--db PATH_OR_URL`, else $AGENTSM_DB, else ./agentsm.db (as on every command)."""
    return click.option(
        "--db",
        default=lambda: os.environ.get("AGENTSM_DB") or "agentsm.db",
        show_default="$AGENTSM_DB, else ./agentsm.db",
        help="the agentsm log: a SQLite file (or a database URL)",
    )(func)


@contextmanager
def reported() -> Iterator[None]:
    """Turn what a user can fix (a bad path, an unknown run, a broken builder) into one line."""
    try:
        yield
    except (StoreError, AgentError, ValueError) as e:
        raise CommandFailed(" ".join(str(e).split()) or type(e).__name__) from e
    except OSError as e:
        raise CommandFailed(f"{e.filename or ''} {e.strerror or e}".strip()) from e
