"""The `agentsm` command line (a click group): record (demo), list, search, count, show,
time-travel, replay, branch, diff, resume, decide, export and import runs of an agentsm log;
chat with an agent and list, show, replay and branch its threads.

Every command takes `--db` (and `--debug`) anywhere on the line, after `$AGENTSM_DB` and
./agentsm.db; more commands are added to the group with `cli.add_command`."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Sequence
from importlib.metadata import version

import click

from agentsm import AgentError
from eventstore import StoreError

from . import (
    cli_bestof,
    cli_change,
    cli_copy,
    cli_inspect,
    cli_list,
    cli_otel,
    cli_outside,
    cli_tail,
    cli_threads,
    cli_ui,
    cli_worker,
)
from .cli_common import common, debugging, example, reset
from .render import printable

__all__ = ["cli", "main"]


@click.group(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=example(
        "agentsm demo",
        "agentsm runs -n 20 --status error --since 1d",
        "agentsm show 3f2a --kind ToolExecuted",
    ),
)
@click.version_option(version("agentsm"), "--version", prog_name="agentsm")
@common
def cli() -> None:
    """Record, list, search, inspect, replay, branch and resume agent runs."""


for command in (
    cli_list.runs,
    cli_list.search,
    cli_list.stats,
    *cli_inspect.COMMANDS,
    *cli_change.COMMANDS,
    cli_bestof.best_of_command,
    cli_worker.submit_command,
    cli_worker.worker_command,
    cli_tail.tail_command,
    cli_otel.otel_command,
    cli_copy.copy_command,
    cli_ui.ui_command,
    *cli_threads.COMMANDS,
    *cli_outside.COMMANDS,
):
    cli.add_command(command)
cli_threads.add_thread_options(cli_inspect.show, cli_change.replay, cli_change.branch)


def _one_line(error: BaseException) -> str:
    """An error as one line: our own errors say what was wrong and what to do; anything else
    is named as unexpected, with the way to see more."""
    text = " ".join(str(error).split())
    if isinstance(error, StoreError | AgentError | ValueError):
        return text or type(error).__name__
    if isinstance(error, OSError) and error.strerror:
        name = f" {error.filename!r}" if error.filename else ""
        return f"cannot use{name}: {error.strerror}; check the path and its permissions."
    return (
        f"unexpected {type(error).__name__}: {text or 'no message'}; run the command again with "
        "--debug for the traceback."
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `agentsm` command: 0 done, 1 a replay diverged or a run failed,
    2 an error (one line on stderr; the traceback with --debug), 3 a run waits for a human."""
    reset()
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        cli.main(args=args, prog_name="agentsm", standalone_mode=False)
        return 0
    except click.exceptions.Exit as e:
        return int(e.exit_code)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 0 if e.code is None else 1
    except click.exceptions.NoArgsIsHelpError as e:
        print(e.ctx.get_help() if e.ctx else "")  # `agentsm` alone: the overview
        return 0
    except click.ClickException as e:
        where = e.ctx.command_path if isinstance(e, click.UsageError) and e.ctx else "agentsm"
        message = " ".join(e.format_message().split()).rstrip(".")
        joint = " " if message.endswith("?") else "; "
        print(f"agentsm: {printable(message)}{joint}see {where} --help.", file=sys.stderr)
        return 2
    except click.Abort:
        print("agentsm: interrupted.", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("agentsm: interrupted.", file=sys.stderr)
        return 130
    except Exception as e:
        if debugging():
            print(printable(traceback.format_exc(), lines=True), file=sys.stderr, end="")
        print(f"agentsm: {printable(_one_line(e))}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
