"""Input guards and hooks: your code at set places of a run, which may stop it or change what
the LLM is sent or what a tool gets, each effect recorded as a fact.

- An input guard (`AgentBuilder.input_guard`) checks each user message (the task, then each
  message sent while the run goes on) before the planning LLM call that first sends it, and
  allows it (`None`), replaces its text (`Replace(text)`) or refuses it (`Refuse(reason)`: the
  run ends in Error). Every verdict is recorded (`InputChecked`), so the log says what was checked.
- A turn is one planning step: one LLM call and what it leads to. `before_turn` runs before
  the call, `after_turn` once the step's tool results are in history, or with the final answer
  before it is accepted; either may end the run (`Abort(reason)`, recorded as `HookAborted`).
- `before_tool_call` runs before each planned call starts and may refuse it (`Veto(reason)`,
  recorded as `ToolCallVetoed`: the LLM reads the refusal as its result) or give it other
  arguments (a dict, recorded as `ToolCallRewritten`); `after_tool_call` may change what the
  LLM reads of the result (a string, recorded as `ObservationRewritten`; the `ToolExecuted`
  keeps what the tool returned). A hook that changes nothing records nothing.

Guards and hooks are effects, like tools and human decisions: each gets a copy of what it
looks at (messages, arguments), sync and async functions alike, and the run uses only what
was recorded. A replay does not call them: it serves the recorded effects back at the place
they were recorded (`HookEffects` is the seam), as it serves recorded human decisions.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, runtime_checkable

from . import facts as f
from .codec import clean_text
from .frozen import same_json, thaw
from .types import TokenUsage, ToolCall

__all__ = [
    "Abort",
    "GuardInput",
    "HookEffects",
    "HookPlace",
    "Hooks",
    "Refuse",
    "Replace",
    "ToolCallInfo",
    "TurnInfo",
    "Veto",
]

HookPlace = Literal[
    "input_guard", "before_turn", "after_turn", "before_tool_call", "after_tool_call"
]
"""Where a guard or hook runs (the `AgentBuilder` method that adds it)."""


@dataclass(frozen=True)
class Refuse:
    """An input guard's verdict: the message may not be sent; the run ends in Error with
    `reason`."""

    reason: str


@dataclass(frozen=True)
class Replace:
    """An input guard's verdict: send `text` in place of the message (from then on)."""

    text: str


@dataclass(frozen=True)
class Abort:
    """A `before_turn` or `after_turn` hook's verdict: end the run in Error with `reason`."""

    reason: str


@dataclass(frozen=True)
class Veto:
    """A `before_tool_call` hook's verdict: do not run the call; the LLM reads `reason` as its
    failure."""

    reason: str


@dataclass(frozen=True)
class GuardInput:
    """What an input guard checks: the user's message `text` (message `number`: 0 is the
    task, then each message sent while the run went on), before step `step`'s LLM call, and a
    copy of the `messages` that call is about to send (`AgentMemory.build_messages()`)."""

    text: str
    number: int
    step: int
    messages: list[dict[str, Any]] = field(repr=False)


@dataclass(frozen=True)
class TurnInfo:
    """A turn as a `before_turn` or `after_turn` hook sees it: its step, a copy of the
    messages (about to be sent; or with the step's results, after it), the tokens the run has
    used, and, for a final answer, the `answer` about to be accepted."""

    step: int
    messages: list[dict[str, Any]] = field(repr=False)
    usage: TokenUsage = field(default_factory=TokenUsage)
    answer: str | None = None


@dataclass(frozen=True)
class ToolCallInfo:
    """A planned call as a tool hook sees it: the `call` (a copy, with the real arguments the
    tool gets), its step and `position` among the step's calls, and, after it ran, its
    `observation` (what the LLM will read) and `success`."""

    call: ToolCall
    step: int
    position: int
    observation: str | None = None
    success: bool | None = None


Guard = Callable[[GuardInput], Any]
TurnHook = Callable[[TurnInfo], Any]
ToolHook = Callable[[ToolCallInfo], Any]


@runtime_checkable
class HookEffects(Protocol):
    """Where a run gets the effects of its guards and hooks: by calling them (`Hooks`, a live
    run), or from a recording (replay). `last` is the seq of the last fact recorded, so a
    recording serves the fact recorded right after it. Each gives the fact to record, or None
    (nothing to record: a hook that changed nothing)."""

    def wants(self, place: HookPlace) -> bool:
        """Whether anything runs at `place` (if not, the run does not even look)."""
        ...

    async def check_input(self, last: int, given: GuardInput) -> f.InputChecked | None: ...

    async def turn(
        self, hook: Literal["before_turn", "after_turn"], last: int, turn: TurnInfo
    ) -> f.HookAborted | None: ...

    async def before_tool_call(
        self, last: int, info: ToolCallInfo
    ) -> f.ToolCallVetoed | f.ToolCallRewritten | None: ...

    async def after_tool_call(
        self, last: int, info: ToolCallInfo
    ) -> f.ObservationRewritten | None: ...


async def _called(func: Callable[[Any], Any], given: Any) -> Any:
    result = func(given)
    if inspect.isawaitable(result):
        result = await result
    return result


def _name(func: Callable[..., Any]) -> str:
    return getattr(func, "__qualname__", None) or repr(func)


def _refused(func: Callable[..., Any], place: HookPlace, got: Any, wanted: str) -> TypeError:
    return TypeError(
        f"The {place} {_name(func)} returned {got!r}; return {wanted}. Nothing was recorded for it."
    )


def _text(func: Callable[..., Any], place: HookPlace, value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"The {place} {_name(func)} gave {what} {value!r}; give it as a string.")
    return clean_text(value)


class Hooks:
    """The guards and hooks of an agent, each kind called in the order added (a live run):
    a guard sees the text the guards before it left, and the first refusal ends the checks; a
    tool hook sees the arguments (or observation) the hooks before it left, and the first
    veto ends them; the first turn hook to abort ends the run."""

    def __init__(self) -> None:
        self._added: dict[HookPlace, list[Callable[[Any], Any]]] = {
            "input_guard": [],
            "before_turn": [],
            "after_turn": [],
            "before_tool_call": [],
            "after_tool_call": [],
        }

    def add(self, place: HookPlace, func: Callable[[Any], Any]) -> None:
        """Add a guard or hook at `place`, after those added before."""
        self._added[place].append(func)

    def copy(self) -> Hooks:
        """Another `Hooks` with the same functions, to which more can be added apart."""
        made = Hooks()
        for place, funcs in self._added.items():
            made._added[place] = list(funcs)
        return made

    def wants(self, place: HookPlace) -> bool:
        return bool(self._added[place])

    async def check_input(self, last: int, given: GuardInput) -> f.InputChecked | None:
        text = given.text
        for guard in self._added["input_guard"]:
            seen = replace(given, text=text, messages=copy.deepcopy(given.messages))
            verdict = await _called(guard, seen)
            if verdict is None or verdict is True:
                continue
            if isinstance(verdict, Refuse):
                reason = _text(guard, "input_guard", verdict.reason, "the reason")
                return f.InputChecked(verdict="refused", reason=reason)
            if isinstance(verdict, Replace):
                text = _text(guard, "input_guard", verdict.text, "the text")
                continue
            raise _refused(
                guard, "input_guard", verdict, "None (allow), Refuse(reason) or Replace(text)"
            )
        if text != given.text:
            return f.InputChecked(verdict="replaced", text=text)
        return f.InputChecked(verdict="allowed")

    async def turn(
        self, hook: Literal["before_turn", "after_turn"], last: int, turn: TurnInfo
    ) -> f.HookAborted | None:
        for func in self._added[hook]:
            seen = replace(turn, messages=copy.deepcopy(turn.messages))
            verdict = await _called(func, seen)
            if verdict is None or verdict is True:
                continue
            if isinstance(verdict, Abort):
                reason = _text(func, hook, verdict.reason, "the reason")
                return f.HookAborted(hook=hook, reason=reason)
            raise _refused(func, hook, verdict, "None (go on) or Abort(reason)")
        return None

    async def before_tool_call(
        self, last: int, info: ToolCallInfo
    ) -> f.ToolCallVetoed | f.ToolCallRewritten | None:
        args: dict[str, Any] = thaw(info.call.args)
        for func in self._added["before_tool_call"]:
            call = ToolCall.model_construct(name=info.call.name, args=thaw(args), id=info.call.id)
            verdict = await _called(func, replace(info, call=call))
            if verdict is None or verdict is True:
                continue
            if isinstance(verdict, Veto):
                reason = _text(func, "before_tool_call", verdict.reason, "the reason")
                return f.ToolCallVetoed(index=info.position, reason=reason)
            if isinstance(verdict, dict):
                args = thaw(verdict)
                continue
            raise _refused(
                func,
                "before_tool_call",
                verdict,
                "None (run it), a dict of arguments or Veto(reason)",
            )
        if same_json(args, info.call.args):
            return None
        return f.ToolCallRewritten(index=info.position, args=args)

    async def after_tool_call(self, last: int, info: ToolCallInfo) -> f.ObservationRewritten | None:
        observation = info.observation or ""
        for func in self._added["after_tool_call"]:
            verdict = await _called(func, replace(info, observation=observation))
            if verdict is None:
                continue
            observation = _text(func, "after_tool_call", verdict, "the observation")
        if observation == (info.observation or ""):
            return None
        return f.ObservationRewritten(index=info.position, observation=observation)

    def __repr__(self) -> str:
        added = ", ".join(f"{place}={len(funcs)}" for place, funcs in self._added.items() if funcs)
        return f"Hooks({added or 'none'})"


NO_HOOKS = Hooks()
"""An agent without guards or hooks."""
