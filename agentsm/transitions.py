"""The transition table: every legal move `(state, event) -> state`, and nothing else."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType

from .errors import BuildError, InvalidTransition
from .events import Event
from .types import TERMINAL_STATES, State, as_state

__all__ = ["TransitionTable", "build_transition_table"]

Row = tuple[str, str]


class TransitionTable(Mapping[Row, str]):
    """An immutable mapping `(state, event) -> next state`; the single source of truth.

    States and events are `State` / `Event` members for the built-in ones and plain strings for
    a custom table's own. Build a variant with `with_rows` / `without_rows`: the table itself
    never changes once built.
    """

    def __init__(self, rows: Mapping[tuple[str, str], str]) -> None:
        normalized: dict[Row, str] = {}
        for (state, event), target in rows.items():
            for name, what in ((state, "state"), (event, "event"), (target, "state")):
                if not isinstance(name, str) or not name:
                    raise BuildError(
                        f"Transition table {what} names must be strings, not {name!r}."
                    )
            src = as_state(state)
            if src in TERMINAL_STATES:
                raise BuildError(
                    f"Row ({state}, {event}) -> {target} leaves the terminal state {state}; "
                    "Done and Error end a run and have no outgoing rows."
                )
            normalized[(src, _as_event(event))] = as_state(target)
        self._rows = MappingProxyType(normalized)

    def next_state(self, state: str, event: str) -> str:
        """The state after `event` in `state`; `InvalidTransition` when there is no such row."""
        try:
            return self._rows[(state, event)]
        except KeyError:
            raise InvalidTransition(state, event) from None

    def states(self) -> set[str]:
        """Every state the table mentions (as a source or a target), plus Idle."""
        names: set[str] = {State.Idle}
        for (src, _), dst in self._rows.items():
            names.update((src, dst))
        return names

    def with_rows(self, rows: Mapping[tuple[str, str], str]) -> TransitionTable:
        """A new table: this one plus `rows` (a row for an existing pair replaces it)."""
        return TransitionTable({**self._rows, **rows})

    def without_rows(self, *pairs: tuple[str, str]) -> TransitionTable:
        """A new table: this one minus the given `(state, event)` pairs."""
        drop = set(pairs)
        return TransitionTable({k: v for k, v in self._rows.items() if k not in drop})

    def __getitem__(self, key: Row) -> str:
        return self._rows[key]

    def __iter__(self) -> Iterator[Row]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def to_mermaid(self) -> str:
        """The table as a Mermaid state diagram (see `agentsm.pictures.to_mermaid` for a run's
        path on it)."""
        from .pictures.diagram import to_mermaid

        return to_mermaid(self)

    def __repr__(self) -> str:
        return f"TransitionTable({len(self._rows)} rows, states={sorted(self.states())})"


def _as_event(name: str) -> str:
    try:
        return Event(name)
    except ValueError:
        return name


def build_transition_table() -> TransitionTable:
    """The default table: exactly these rows, no others.

    `ToolOutcomeUnknown` is taken only by a resumed run whose tool was running when the process
    stopped: a non-idempotent call is not run again without a human saying so.
    `ContextFull` is taken when the next request would not fit `config.context_window`:
    Reflecting compacts history, then planning goes on.
    `InputRejected` is taken when an input guard refuses a user message, `HookAborted` when a
    `before_turn` or `after_turn` hook ends the run (see `agentsm.hooks`).
    """
    S, E = State, Event
    return TransitionTable(
        {
            (S.Idle, E.Start): S.Planning,
            (S.Planning, E.LlmToolCall): S.Acting,
            (S.Planning, E.LlmParallelToolCalls): S.ParallelActing,
            (S.Planning, E.LlmFinalAnswer): S.Done,
            (S.Planning, E.MaxSteps): S.Error,
            (S.Planning, E.LowConfidence): S.Reflecting,
            (S.Planning, E.AnswerTooShort): S.Planning,
            (S.Planning, E.ToolBlacklisted): S.Planning,
            (S.Planning, E.HumanApprovalRequired): S.WaitingForHuman,
            (S.Planning, E.BudgetExceeded): S.Error,
            (S.Planning, E.FatalError): S.Error,
            (S.WaitingForHuman, E.HumanApproved): S.Acting,
            (S.WaitingForHuman, E.HumanModified): S.Acting,
            (S.WaitingForHuman, E.HumanRejected): S.Observing,
            (S.WaitingForHuman, E.HumanApprovedBatch): S.ParallelActing,
            (S.Acting, E.ToolSuccess): S.Observing,
            (S.Acting, E.ToolFailure): S.Observing,
            (S.Acting, E.FatalError): S.Error,
            (S.Acting, E.ToolOutcomeUnknown): S.WaitingForHuman,
            (S.ParallelActing, E.ToolSuccess): S.Observing,
            (S.ParallelActing, E.ToolFailure): S.Observing,
            (S.ParallelActing, E.ToolOutcomeUnknown): S.WaitingForHuman,
            (S.Observing, E.Continue): S.Planning,
            (S.Observing, E.NeedsReflection): S.Reflecting,
            (S.Reflecting, E.ReflectDone): S.Planning,
            (S.Planning, E.ContextFull): S.Reflecting,
            (S.Planning, E.InputRejected): S.Error,
            (S.Planning, E.HookAborted): S.Error,
            (S.Observing, E.HookAborted): S.Error,
        }
    )
