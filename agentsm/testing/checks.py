"""Static checks of a transition table against its handlers, with a report naming each problem."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import BuildError
from ..facts import FACTS, OWNERS
from ..states import AgentState, default_handlers
from ..states.base import handler_records
from ..types import TERMINAL_STATES, State, as_state
from .watch import declared_emits

__all__ = ["Problem", "TableReport", "check_table"]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a table: what kind, the states and events involved, and why."""

    kind: str
    states: tuple[str, ...]
    events: tuple[str, ...]
    message: str

    def __str__(self) -> str:
        return f"[{self.kind}] {self.message}"


@dataclass(frozen=True)
class TableReport:
    """The outcome of `check_table`: `ok` when no problem was found."""

    problems: tuple[Problem, ...] = field(default_factory=tuple)
    rows: int = 0
    states: tuple[str, ...] = ()
    unchecked: tuple[str, ...] = ()
    """States whose handler declares no `emits`: what they return is checked only by running
    them (`agent_runs`, `AgentMachine`), not here."""

    @property
    def ok(self) -> bool:
        return not self.problems

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        if self.ok:
            lines = [f"table ok: {self.rows} rows, {len(self.states)} states, no problems"]
        else:
            lines = [f"table has {len(self.problems)} problem(s) ({self.rows} rows):"]
            lines.extend(f"  - {p}" for p in self.problems)
        if self.unchecked:
            lines.append(
                f"not checked statically: the handler of {', '.join(self.unchecked)} declares "
                "no emits, so the events it returns are unknown until it runs; declare them "
                "(emits = frozenset({...}) on a handler class) or run generated runs "
                "(agent_runs), which check every event a handler returns"
            )
        return "\n".join(lines)

    def __repr__(self) -> str:
        unchecked = f", unchecked={list(self.unchecked)}" if self.unchecked else ""
        return f"TableReport(ok={self.ok}, problems={len(self.problems)}{unchecked})"


def _rows(table: Mapping[tuple[str, str], str]) -> dict[tuple[str, str], str]:
    return {(as_state(str(s)), str(e)): as_state(str(t)) for (s, e), t in table.items()}


def _record_problems(state: str, handler: Any) -> list[Problem]:
    """What is wrong with the facts a handler declares it records (`records`): a kind that is
    not registered (nothing could read it back), or a built-in fact its built-in state does
    not own."""
    try:
        declared = handler_records(handler) or frozenset()
    except BuildError as e:
        return [Problem("bad-records", (state,), (), f"the handler of {state}: {e}")]
    problems = []
    for kind in sorted(declared):
        if kind not in FACTS.versions:
            problems.append(
                Problem(
                    "unregistered-fact",
                    (state,),
                    (),
                    f"the handler of {state} declares it records {kind}, which is not a "
                    f"registered fact kind; register it with AgentBuilder.fact({kind}, reducer, "
                    "part=..., initial=...)",
                )
            )
        owners = OWNERS.get(kind)
        if owners is not None and state in set(State) and state not in owners:
            problems.append(
                Problem(
                    "not-owner",
                    (state,),
                    (),
                    f"the handler of {state} declares it records {kind}, which only "
                    f"{', '.join(sorted(owners))} may record",
                )
            )
    return problems


def check_table(
    table: Mapping[tuple[str, str], str],
    handlers: Mapping[str, AgentState | Callable[..., Any]] | None = None,
) -> TableReport:
    """Check a table (a TransitionTable or any mapping of rows) against handlers (by default
    the built-in ones, plus any given): every non-terminal state is reachable from Idle, every
    state can reach Done or Error, no row leaves a terminal state, every state has a handler,
    every event a handler declares in `emits` has a row from its state, and every fact it
    declares in `records` is registered (and, for a built-in state, its own). Handlers that
    declare no `emits` (function handlers) are listed in `unchecked`."""
    rows = _rows(table)
    known: dict[str, Any] = {**default_handlers()}
    known.update({as_state(k): v for k, v in (handlers or {}).items()})
    states: set[str] = {State.Idle, *(s for s, _ in rows), *rows.values()}
    problems: list[Problem] = []
    unchecked: list[str] = []

    for (src, event), dst in sorted(rows.items()):
        if src in TERMINAL_STATES:
            problems.append(
                Problem(
                    "leaves-terminal",
                    (src, dst),
                    (event,),
                    f"row ({src}, {event}) -> {dst} leaves the terminal state {src}; terminal "
                    "states end the run and must have no outgoing rows",
                )
            )

    reachable: set[str] = {State.Idle}
    frontier: list[str] = [State.Idle]
    while frontier:
        here = frontier.pop()
        for (src, _), dst in rows.items():
            if src == here and dst not in reachable:
                reachable.add(dst)
                frontier.append(dst)
    for state in sorted(states - reachable - set(TERMINAL_STATES)):
        problems.append(
            Problem(
                "unreachable",
                (state,),
                (),
                f"state {state} cannot be reached from Idle: no chain of rows leads to it",
            )
        )

    can_end: set[str] = set(TERMINAL_STATES)
    changed = True
    while changed:
        changed = False
        for (src, _), dst in rows.items():
            if dst in can_end and src not in can_end:
                can_end.add(src)
                changed = True
    for state in sorted(states - can_end):
        leaving = sorted(e for (s, e) in rows if s == state)
        how = f"its rows ({', '.join(leaving)}) only lead" if leaving else "it has no rows and"
        problems.append(
            Problem(
                "dead-end",
                (state,),
                tuple(leaving),
                f"state {state} can never reach Done or Error: {how} into states that cannot end "
                "the run; a run entering it would be stuck until the safety cap",
            )
        )

    for state in sorted(states):
        handler = known.get(state)
        if handler is None:
            problems.append(
                Problem(
                    "no-handler",
                    (state,),
                    (),
                    f"state {state} has no handler; register one with AgentBuilder.handler"
                    f"({state!r}, ...)",
                )
            )
            continue
        problems.extend(_record_problems(state, handler))
        if state in TERMINAL_STATES:
            continue
        declared = declared_emits(handler)
        if declared is None:
            unchecked.append(state)
            continue
        accepted = {e for (s, e) in rows if s == state}
        for event in sorted(declared - accepted):
            problems.append(
                Problem(
                    "missing-row",
                    (state,),
                    (event,),
                    f"the handler of {state} can return {event}, but the table has no row "
                    f"({state}, {event}); the run would stop with InvalidTransition",
                )
            )
    return TableReport(tuple(problems), len(rows), tuple(sorted(states)), tuple(unchecked))
