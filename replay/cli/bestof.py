"""`agentsm best-of`: branch a run N times from one point, run the branches together, and let a
judge pick one; the candidates and the pick are recorded."""

from __future__ import annotations

import json
import sys
import warnings
from typing import Any

import click

from agentsm import BuildError
from agentsm.tables import styles_wanted, terminal_width

from ..bestof import Variant, best_of
from ..branchnotes import UnusedChange
from ..errors import ChoiceRefused, UsageError
from ..judgement import BestOf
from ..judges import FunctionJudge, LlmJudge
from ..recording import Recording
from ..render import printable
from ..source import load_object, resolve_run
from ..timetravel import memory_at
from .common import builder_option, common, config_arg, example, get_builder, open_log, out

__all__ = ["best_of_command"]


def load_judge(spec: str) -> FunctionJudge:
    """`--judge module:function` or `path/to/file.py:function`: a function of the candidates."""
    try:
        return load_object(spec, "--judge", "function")[1]  # type: ignore[no-any-return]
    except BuildError as e:
        raise UsageError(str(e)) from e


def _show(result: BestOf) -> None:
    """The candidates as a table, then the pick (or why there is none) and where it is."""
    click.echo(result.table(terminal_width(sys.stdout), styled=styles_wanted(sys.stdout)))
    winner = result.winner
    if winner is not None:
        label = f" ({winner.label})" if winner.label else ""
        click.echo(out(f"picked #{winner.index} {winner.run_id}{label}", "green", "bold"))
        if result.reason:
            click.echo(f"reason: {printable(result.reason)}")
        click.echo(printable(winner.answer or "", lines=True))
    else:
        click.echo(out(f"no pick: {result.refused or 'no candidate finished'}", "red"))
    click.echo(f"judgement {result.judgement_id}: agentsm show {result.judgement_id}")


@click.command(
    "best-of",
    epilog=example(
        "agentsm best-of 3f2a --at 5 --answer 'It is Paris.' --answer 'Lyon, I think.' "
        "--judge myjudge:pick",
        "agentsm best-of 3f2a --at 5 --model gpt-4o --model gpt-4o-mini --judge-model gpt-4o "
        "--builder myagent:make_agent",
    ),
)
@click.argument("run")
@click.option(
    "--at",
    "--seq",
    "at",
    type=int,
    required=True,
    metavar="SEQ",
    help="sequence number to branch at",
)
@click.option(
    "--model",
    "models",
    multiple=True,
    metavar="MODEL",
    help="a candidate asking your builder's LLM for this model from the point (repeatable)",
)
@click.option(
    "--answer",
    "answers",
    multiple=True,
    metavar="TEXT",
    help="a candidate whose next LLM response is this final answer (repeatable)",
)
@click.option(
    "--config", metavar="JSON", help="AgentConfig fields every candidate changes (e.g. max_steps)"
)
@click.option("--judge", metavar="MODULE:FUNCTION", help="judge with your function(candidates)")
@click.option("--judge-model", metavar="MODEL", help="judge with your builder's LLM, this model")
@click.option(
    "--live-tools",
    is_flag=True,
    help="run your real tools (with --builder) for calls the parent has no result for",
)
@click.option("--json", "as_json", is_flag=True, help="the judgement as a JSON object")
@builder_option
@common
def best_of_command(
    run: str,
    at: int,
    models: tuple[str, ...],
    answers: tuple[str, ...],
    config: str | None,
    judge: str | None,
    judge_model: str | None,
    live_tools: bool,
    as_json: bool,
    builder: str | None,
) -> None:
    """Branch a run at SEQ once per --model and --answer, run the branches together, and let a
    judge pick the best: each candidate's run, status and answer, the pick marked, and the
    judgement run that records it. Exit 1 when nothing was picked."""
    if not models and not answers:
        raise UsageError(
            "best-of needs candidates: give --model MODEL or --answer TEXT once per candidate "
            "(repeat either, or both)."
        )
    if (judge is None) == (judge_model is None):
        raise UsageError("best-of needs one judge: --judge module:function or --judge-model MODEL.")
    make = get_builder(builder, required=bool(models) or judge_model is not None or live_tools)
    store = open_log(write=True)
    run_id = resolve_run(store, run)
    recording = Recording.load(store, run_id)
    task = recording.definition.task
    changed: dict[str, Any] | None = None
    if config:  # over the config where the branches start, as best_of reads it
        recorded, _ = memory_at(store, run_id, recording.branch_point(at))
        changed = config_arg(config, recorded.config).model_dump()
    variants = [Variant(model=m, config=changed, label=m) for m in models]
    variants += [Variant(answer=a, config=changed) for a in answers]
    chosen: FunctionJudge | LlmJudge
    if judge is not None:
        chosen = load_judge(judge)
    else:
        assert make is not None
        caller = make(task).llm_caller
        if caller is None:
            raise UsageError(
                f"--judge-model {judge_model}: your builder's agent has no LLM; give it "
                ".llm(...), or judge with --judge module:function."
            )
        chosen = LlmJudge(caller, model=judge_model or "")
    notes: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UnusedChange)
        try:
            result = best_of(
                store, run_id, at, variants, chosen, builder=make, live_tools=live_tools
            )
        except ChoiceRefused as e:
            result = e.result
    notes += [printable(str(w.message)) for w in caught if isinstance(w.message, UnusedChange)]
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    else:
        _show(result)
    for note in notes:
        click.echo(f"agentsm: warning: {note}", err=True)
    sys.exit(0 if result.pick is not None else 1)
