"""What the worker, tail and otel commands share: `--db` handed to them, and one-line errors."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, cast

import click

from agentsm import AgentError
from eventstore import StoreError

from ..render import printable
from .common import common, db_path

__all__ = ["CommandFailed", "db_option", "reported"]

F = TypeVar("F", bound=Callable[..., Any])


class CommandFailed(click.ClickException):
    """A command that could not do its work: one line on stderr, exit status 2."""

    exit_code = 2

    def format_message(self) -> str:
        return str(printable(self.message))


def db_option(func: F) -> F:
    """`--db` and `--debug` as on every command (anywhere on the line, else $AGENTSM_DB, else
    ./agentsm.db), handed to the command as its `db` argument."""

    @functools.wraps(func)
    def with_db(*args: Any, **kwargs: Any) -> Any:
        return func(*args, db=db_path(), **kwargs)

    return cast(F, common(with_db))


@contextmanager
def reported() -> Iterator[None]:
    """Turn what a user can fix (a bad path, an unknown run, a broken builder) into one line."""
    try:
        yield
    except (StoreError, AgentError, ValueError) as e:
        raise CommandFailed(" ".join(str(e).split()) or type(e).__name__) from e
    except OSError as e:
        raise CommandFailed(f"{e.filename or ''} {e.strerror or e}".strip()) from e
