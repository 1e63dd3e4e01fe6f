"""Errors of replay, branch, resume and time travel, under agentsm's root `AgentError`.

ReplayError            root of what the replay package raises about a request
├── SeqOutOfRange      a sequence number the run does not have (also a ValueError)
├── BuilderRequired    the run used parts of the agent only the user's builder has
├── ExportRefused      a run whose hash chain does not verify: nothing exported (a LogTampered)
├── ImportRefused      an export file that is bad, cut off or holds a known run: nothing imported
├── CopyRefused        a run that cannot be copied as it is: nothing copied
├── UsageError         a command-line value that cannot be used as given
├── UnknownThread      a thread id the log holds no turn of (also a LookupError)
└── BestOfError        a best-of-N request that cannot be served (also a ValueError)
    └── ChoiceRefused  the judge picked no candidate that finished (the judgement is recorded)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from agentsm import AgentError
from eventstore import LogTampered

if TYPE_CHECKING:
    from .judgement import BestOf

__all__ = [
    "BestOfError",
    "BuilderRequired",
    "ChoiceRefused",
    "CopyRefused",
    "ExportRefused",
    "ImportRefused",
    "ReplayError",
    "SeqOutOfRange",
    "UnknownThread",
    "UsageError",
]


class ReplayError(AgentError):
    """A replay, branch, resume or time-travel request that cannot be served as asked."""


class SeqOutOfRange(ReplayError, ValueError):
    """A sequence number outside the run's facts 1..last."""

    def __init__(self, run_id: str, seq: int, last: int, what: str = "seq") -> None:
        self.run_id = run_id
        self.seq = seq
        self.last = last
        super().__init__(
            f"Run {run_id} has facts 1..{last}; {what} {seq} is not one of them: give a seq "
            f"from 1 to {last}."
        )


class BuilderRequired(ReplayError):
    """The run was recorded with custom states, handlers or tool flags that its log does not
    hold; without the user's builder another agent would run."""

    def __init__(self, run_id: str, needs: Sequence[str]) -> None:
        self.run_id = run_id
        self.needs = tuple(needs)
        super().__init__(
            f"{f'Run {run_id}' if run_id else 'This run'} used {', '.join(self.needs)}, which "
            "only your agent has: pass "
            "--builder module:factory (or builder=) so that the same agent runs."
        )


class UsageError(ReplayError):
    """A command-line value that cannot be used as given; the message shows the right form."""


class UnknownThread(ReplayError, LookupError):
    """No turn of this thread is in the log."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        super().__init__(
            f"The log holds no thread {thread_id!r}; `agentsm threads` lists the threads it holds."
        )


class ExportRefused(ReplayError, LogTampered):
    """A run that cannot be exported: its log was changed after it was recorded (its hash
    chain breaks at `seq`, see `agentsm verify`), so no import could accept the file; nothing
    was written. It is the `LogTampered` every reader of the run raises."""

    def __init__(self, run_id: str, seq: int, kind: str, problem: str | None = None) -> None:
        said = problem or f"its hash chain is broken at seq {seq} ({kind})"
        LogTampered.__init__(self, run_id, seq, kind, f"{said}; nothing was exported")

    def __repr__(self) -> str:
        return f"ExportRefused(run_id={self.run_id!r}, seq={self.seq}, kind={self.kind!r})"


class ImportRefused(ReplayError):
    """An export file that cannot be imported (a line that is not JSON, a fact that does not
    decode, a hash that does not match, facts cut off, a run that exists, no runs at all);
    nothing of the file was imported. `line` is where (0: the file as a whole)."""

    def __init__(
        self,
        line: int,
        problem: str,
        *,
        advice: str = "export the run again from its source database",
        at_end: bool = False,
    ) -> None:
        self.line = line
        self.problem = problem
        where = f"the file ends after line {line}: " if at_end else f"line {line}: " if line else ""
        super().__init__(
            f"{where}{problem.rstrip('.')}{' ' if problem.endswith('?') else '. '}Nothing of the "
            "file was imported" + (f"; {advice}." if advice else ".")
        )


class CopyRefused(ReplayError):
    """A run that cannot be copied as it is (its chain is broken in the source, or the
    destination holds other facts under its id); nothing was copied."""

    def __init__(self, run_id: str, problem: str) -> None:
        self.run_id = run_id
        super().__init__(
            f"Run {run_id} cannot be copied: {problem}. Nothing was copied; copy the other runs "
            "by naming them, or into another database."
        )


class BestOfError(ReplayError, ValueError):
    """A best-of-N request that cannot be served as given: no variants, a variant that names
    a model no LLM answers, a judge that is not one, a run that is not an agent run."""


class ChoiceRefused(BestOfError):
    """The judge's choice was refused: a candidate that did not finish, one there is not, an
    answer that names none, or a judge that failed. The candidates and the judgement (with
    the refusal) are recorded; `result` is the judgement, `judgement_id` its run."""

    def __init__(self, judgement_id: str, problem: str, result: BestOf) -> None:
        self.judgement_id = judgement_id
        self.problem = problem
        self.result = result
        super().__init__(
            f"Judgement {judgement_id} refused the judge's choice: {problem}. The candidates "
            "are recorded: judge them again with another judge (replay.judge_again), or read "
            f"the judgement with agentsm show {judgement_id}."
        )
