"""The `agentsm` command line (a click group): record (demo), list, search, count, show,
time-travel, replay, branch, diff, resume, decide, export and import runs of an agentsm log;
chat with an agent and list, show, replay and branch its threads.

Every command takes `--db` (and `--debug`) anywhere on the line, after `$AGENTSM_DB` and
./agentsm.db. Commands are registered by name in `COMMANDS` (where each lives, and the line
`agentsm --help` shows for it) and imported only when run, so `agentsm --help`, `--version`
and `runs` start at once; `cli.add_command` adds one that is already imported."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from agentsm import __version__

from .options import common as common_options
from .options import debugging, did_you_mean, example, reset

__all__ = ["COMMANDS", "LazyGroup", "cli", "main"]

COMMANDS: dict[str, tuple[str, str]] = {
    "answer": (
        "replay.cli.outside:answer_command",
        "Answer the question a waiting run asked a person (its ask_human tool, or a handler's "
        "ctx.ask); the run is ready to go on once nothing else waits.",
    ),
    "approve": ("replay.cli.change:approve", "Approve the call(s) a run waits on."),
    "backup": (
        "replay.cli.inspect:backup",
        "Copy the log, live or not, into a new file (one consistent snapshot).",
    ),
    "best-of": (
        "replay.cli.bestof:best_of_command",
        "Branch a run at SEQ once per --model and --answer, run the branches together, and let "
        "a judge pick the best: each candidate's run, status and answer, the pick marked, and "
        "the judgement run that records it.",
    ),
    "branch": (
        "replay.cli.threaded:branch",
        "Start a new run from a point of a run, with a change, and report what it did: its id, "
        "final status, state and answer, where it started (and why, when not at SEQ), then "
        "where each LLM response and tool result after the point came from: given, reused from "
        "the parent (the same request at the same place), live, or needed (the branch stopped "
        "there).",
    ),
    "chat": (
        "replay.cli.threads:chat",
        "Talk with your agent: each line you type is a message, each answer is printed, and "
        "every turn is recorded as a run of one thread (its id is shown first; continue it "
        "later with --thread).",
    ),
    "copy": (
        "replay.cli.copy:copy_command",
        "Copy runs (ids or unique prefixes; every run when none is named) from one log into "
        "another, on the same backend or another, with their hash chains, parent links and "
        "catalog entries.",
    ),
    "demo": (
        "replay.cli.change:demo",
        "Run the demo agent into the log the other commands read: record, print, rebuild, "
        "replay, branch; then list the commands to explore it.",
    ),
    "diff": ("replay.cli.inspect:diff", "Where two runs part, and how each ends."),
    "export": (
        "replay.cli.inspect:export",
        "Write a run as JSON lines (its catalog entry, then one line per fact).",
    ),
    "family": (
        "replay.cli.inspect:family",
        "A run's family as a tree (its branches, and its sub-agent runs on dashed edges), each "
        "run labelled with its answer or error.",
    ),
    "graph": (
        "replay.cli.inspect:graph",
        "The transition table as a state diagram, with a run's path (Mermaid text, or an image).",
    ),
    "import": (
        "replay.cli.inspect:import_",
        "Add the runs of a JSON lines export to the log (all of them, or none).",
    ),
    "memory": (
        "replay.cli.inspect:memory",
        "A run's memory and state at a sequence number, rebuilt by folding its log up to it.",
    ),
    "migrate": (
        "replay.cli.migrate:migrate_command",
        "Bring a log of format 1 (one row per fact, as releases up to 0.3 write it) to log "
        "format 2 (facts packed into few, narrow rows): a read-only copy is made first, then the "
        "log is converted in one transaction, every run's hash chain checked, and the file "
        "compacted.",
    ),
    "modify": ("replay.cli.change:modify", "Approve a waiting call with other arguments."),
    "otel": (
        "replay.cli.otel:otel_command",
        "Send RUNS (ids or unique prefixes) as traces: an invoke_agent span per run, a chat "
        "span per LLM call, an execute_tool span per tool call (GenAI semantic conventions).",
    ),
    "reject": ("replay.cli.change:reject", "Reject the call(s) a run waits on."),
    "replay": (
        "replay.cli.threaded:replay",
        "Replay runs against their recording: identical, or a changed definition and the first "
        "divergence in behaviour.",
    ),
    "resume": (
        "replay.cli.change:resume",
        "Continue a run that stopped without finishing (exit 3 when it waits for a human).",
    ),
    "runs": (
        "replay.cli.runs:runs",
        "List the runs of the log, newest last: status, steps, tokens, cost, model, and the "
        "start of the answer or error (read from the catalog; no run is folded).",
    ),
    "search": (
        "replay.cli.listing:search",
        "Full-text search over tasks, LLM answers, tool observations and errors: the facts "
        'holding every word (case and accents aside; a "quoted phrase" or an address as words '
        "in a row, prefix* for any ending), best first, with their runs and matching text.",
    ),
    "serve": (
        "replay.cli.serve:serve_command",
        "Serve conversations with your agent over HTTP: start threads, post messages and read "
        "each turn as server-sent events, answer questions, decide approvals, steer and stop "
        "turns; every turn is recorded as `agentsm chat` records it.",
    ),
    "show": (
        "replay.cli.threaded:show",
        "Print a run's trace: one line per fact (seq, step, state, fact, summary).",
    ),
    "stats": (
        "replay.cli.listing:stats",
        "What happened over a time window: runs by status and model, tokens (prompt-cache reads"
        " and writes apart) and cost, tool calls and failures, error classes, and the slowest "
        "tools.",
    ),
    "steer": (
        "replay.cli.outside:steer_command",
        "Send a running run a message: its LLM reads it before its next call, whichever process"
        " or host drives the run (a run that waits takes it when it goes on).",
    ),
    "stop": (
        "replay.cli.outside:stop_command",
        "Stop a run: the process or worker that drives it (on any host) stops it at its next "
        "transition; a run nobody drives is stopped at once.",
    ),
    "submit": (
        "replay.cli.worker:submit_command",
        "Record a run of TASK to run later (status queued) and print its id: a worker runs it.",
    ),
    "tail": (
        "replay.cli.tail:tail_command",
        "Print the facts of RUN (an id or a unique prefix) as they are recorded, from any "
        "process, and exit when the run ends (status 0 done, 1 failed or aborted) unless "
        "--follow; or, with --all, the facts of every run until interrupted.",
    ),
    "threads": (
        "replay.cli.threads:threads_command",
        "List the conversations of the log, the last updated last: each thread's turns, the "
        "status of its last turn, its last message and answer (read from the catalog; no run is"
        " folded).",
    ),
    "timeline": (
        "replay.cli.inspect:timeline",
        "A run's timeline: states, tool calls, tokens, durations.",
    ),
    "ui": (
        "replay.cli.ui:ui_command",
        "Serve recorded runs in the browser: the catalog, each run's diagram, timeline, facts "
        "and memory at any fact, branch families and diffs, live runs; a JSON API under /api/.",
    ),
    "verify": (
        "replay.cli.inspect:verify",
        "Check the hash chain of a run's facts: intact, or the first broken link (exit 0/1).",
    ),
    "worker": (
        "replay.cli.worker:worker_command",
        "Claim runs that can go on (submitted, decided by a human, or left by a dead worker) "
        "and drive each to its end; one line per run.",
    ),
}
"""Every command by name: `module:attribute` of its click command, and the line of help
`agentsm --help` lists it with (the first sentence of its docstring; a test keeps them equal)."""


class LazyGroup(click.Group):
    """A click group whose commands are imported when they run (or show their own help):
    listing them takes only their names and one line each from `registry`. Loaded commands
    are kept apart from `commands` (those added with `add_command`), which therefore never
    holds some of the registry only: tools that read it (mkdocs-click) find it empty and ask
    `list_commands` and `get_command`."""

    def __init__(self, *args: object, registry: dict[str, tuple[str, str]], **kwargs: object):
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.registry = registry
        self.loaded: dict[str, click.Command] = {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.registry})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands or cmd_name not in self.registry:
            return self.commands.get(cmd_name)
        if cmd_name not in self.loaded:
            import importlib

            module, _, attribute = self.registry[cmd_name][0].partition(":")
            command = getattr(importlib.import_module(module), attribute)
            if not isinstance(command, click.Command):
                raise TypeError(f"{module}:{attribute} is not a click command; fix COMMANDS.")
            self.loaded[cmd_name] = command
        return self.loaded[cmd_name]

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        names = self.list_commands(ctx)
        if name and not name.startswith("-") and name not in names and not ctx.resilient_parsing:
            raise click.UsageError(f"No such command {name!r}.{did_you_mean(name, names)}", ctx)
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of `--help` from the registry's lines: nothing is imported."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names), default=0)
        rows = []
        for name in names:
            if name in self.registry and name not in self.commands:
                line = click.Command(name, help=self.registry[name][1]).get_short_help_str(limit)
            else:
                command = self.commands[name]
                if command.hidden:
                    continue
                line = command.get_short_help_str(limit)
            rows.append((name, line))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(
    cls=LazyGroup,
    registry=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=example(
        "agentsm demo",
        "agentsm runs -n 20 --status error --since 1d",
        "agentsm show 3f2a --kind ToolExecuted",
    ),
)
@click.version_option(__version__, "--version", prog_name="agentsm")
@common_options
def cli() -> None:
    """Record, list, search, inspect, replay, branch and resume agent runs."""


def _one_line(error: BaseException) -> str:
    """An error as one line: our own errors say what was wrong and what to do; anything else
    is named as unexpected, with the way to see more."""
    from agentsm.errors import AgentError
    from eventstore.errors import StoreError

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
        from ..render import printable

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
        from ..render import printable

        if debugging():
            import traceback

            print(printable(traceback.format_exc(), lines=True), file=sys.stderr, end="")
        print(f"agentsm: {printable(_one_line(e))}", file=sys.stderr)
        return 2
