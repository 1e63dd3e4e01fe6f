"""The effects of a run's guards and hooks served from its recording: a replay does not call
them, as it does not ask a human again; it finds what they did where the run recorded it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from agentsm import facts as f
from agentsm.hooks import GuardInput, HookPlace, ToolCallInfo, TurnInfo
from agentsm.trace import TraceEntry

__all__ = ["RecordedHooks"]

_AT: dict[HookPlace, tuple[type, ...]] = {
    "input_guard": (f.InputChecked,),
    "before_turn": (f.HookAborted,),
    "after_turn": (f.HookAborted,),
    "before_tool_call": (f.ToolCallVetoed, f.ToolCallRewritten),
    "after_tool_call": (f.ObservationRewritten,),
}


class RecordedHooks:
    """What the guards and hooks did in a recorded run, served where it was recorded: asked
    with the log at seq `last`, each gives the fact of its kind recorded at `last + 1` (for a
    tool hook, about the same call), or None, as the run's hooks changed nothing there. So a
    refusal, a replaced message, an abort, a veto or a rewrite replays as recorded, with the
    hooks the builder has today or none."""

    def __init__(self, entries: Sequence[TraceEntry]) -> None:
        kinds = tuple({t for types in _AT.values() for t in types})
        self._at = {e.seq: e.fact for e in entries if isinstance(e.fact, kinds)}
        self._places = {
            place
            for place, types in _AT.items()
            if any(isinstance(x, types) for x in self._at.values())
        }

    def wants(self, place: HookPlace) -> bool:
        return place in self._places

    async def check_input(self, last: int, given: GuardInput) -> f.InputChecked | None:
        fact = self._at.get(last + 1)
        return fact if isinstance(fact, f.InputChecked) else None

    async def turn(
        self, hook: Literal["before_turn", "after_turn"], last: int, turn: TurnInfo
    ) -> f.HookAborted | None:
        fact = self._at.get(last + 1)
        return fact if isinstance(fact, f.HookAborted) and fact.hook == hook else None

    async def before_tool_call(
        self, last: int, info: ToolCallInfo
    ) -> f.ToolCallVetoed | f.ToolCallRewritten | None:
        fact = self._at.get(last + 1)
        if isinstance(fact, f.ToolCallVetoed | f.ToolCallRewritten) and fact.index == info.position:
            return fact
        return None

    async def after_tool_call(self, last: int, info: ToolCallInfo) -> f.ObservationRewritten | None:
        fact = self._at.get(last + 1)
        if isinstance(fact, f.ObservationRewritten) and fact.index == info.position:
            return fact
        return None

    def __repr__(self) -> str:
        return f"RecordedHooks({len(self._at)} recorded)"
