"""Where a branch's effects come from after its point, and the stop where none may come.

A recorded LLM response or tool result of the parent is reused only where the branch makes the
same request at the same place: its n-th LLM call after the point with the purpose, model,
messages (their digest) and tool set of the parent's n-th (`LlmRequested`), its n-th tool run
with the tool and arguments of the parent's n-th. An LLM given (`llm`) answers every LLM call
from the point on; the builder's tools run a call that differs only with `live_tools`. Where
neither may answer, the branch stops there, status "stopped" (`LiveNeeded`), and says what it
would need: it never serves an answer that saw other inputs, nor makes a result up. It stops
before it records the request (each source `declines` it), so its log ends where nothing is
under way, and resuming it makes the request afresh: no call is taken for one that was
interrupted."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, NoReturn

from agentsm import AgentMemory, LlmCaller, LlmResponse, ToolCall, ToolOutcome, ToolRegistry
from agentsm import facts as f
from agentsm.context import EffectDeclined, ToolRunner
from agentsm.frozen import thaw
from eventstore import EventStore, StoreError

from .effects import _recorded_error, _same_call
from .recording import ToolEffect

__all__ = [
    "BranchEffect",
    "BranchLlm",
    "BranchTools",
    "LiveNeeded",
    "RecordedCall",
    "Sources",
    "advice",
    "call_text",
]

Source = Literal["given", "reused", "live", "needed"]
Kind = Literal["llm", "tool"]
Surface = Literal["python", "cli", "viewer"]

_ADVICE: dict[str, dict[str, str]] = {
    "python": {"llm": "pass llm= (your LLM)", "tool": "pass live_tools=True and builder="},
    "cli": {"llm": "pass --live and --builder", "tool": "pass --live-tools and --builder"},
    "viewer": {
        "llm": "ask for a live LLM (the viewer started with --builder)",
        "tool": "ask for live tools (the viewer started with --builder)",
    },
}


def advice(kind: Kind, surface: Surface = "python") -> str:
    """What to pass to let a branch go live where it needed a `kind` effect, in the words of
    the surface it was asked from (Python, the `agentsm branch` command, the viewer)."""
    return _ADVICE[surface][kind]


@dataclass(frozen=True)
class BranchEffect:
    """One LLM call or tool run of a branch after its point, and where its result came from:
    `given` (the branch's change), `reused` (the result of the parent's same request, made at
    `parent_seq`), `live` (the LLM given, or the builder's tool), or `needed` (nothing allowed
    could answer: the branch stopped there). `seq` is the branch's fact that asked for it
    (LlmRequested, ToolCallStarted), for one needed the seq it will have: a branch stops
    before it records the request; `why` says why a result was not reused."""

    kind: Kind
    seq: int
    what: str
    source: Source
    parent_seq: int | None = None
    why: str = ""

    def line(self, surface: Surface = "python") -> str:
        """One line: source, seq, what, and (needed) what to pass to go live there."""
        text = f"{self.source:<6}  seq {self.seq}  {self.what}"
        if self.parent_seq is not None:
            text += f" (the parent's call at seq {self.parent_seq})"
        if self.why:
            text += f": {self.why}"
        if self.source == "needed":
            text += f"; {advice(self.kind, surface)}"
        return text

    def need(self, surface: Surface = "python", *, brief: bool = False) -> str:
        """What a branch that stopped here needs, why, and what to pass (`brief`: what only)."""
        live = "a live LLM" if self.kind == "llm" else f"the tool {self.what} run live"
        said = f"needs {live} at seq {self.seq}"
        return said if brief else f"{said} ({self.why}): {advice(self.kind, surface)}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class LiveNeeded(EffectDeclined):
    """A branch reached an effect that nothing it was allowed could answer: it stops there,
    before the request is recorded (status "stopped"). A BaseException, so no handler takes it
    for a failed effect."""

    def __init__(self, effect: BranchEffect) -> None:
        super().__init__(effect.need())
        self.effect = effect


@dataclass(frozen=True)
class RecordedCall:
    """One LLM call of the parent after the branch point: its request (at `seq`) and what came
    back."""

    seq: int
    request: f.LlmRequested
    outcome: f.LlmResponded | f.LlmFailed


class Sources:
    """Where each effect of a branch came from (`effects`, in order). An observer of the
    branch's engine, so that each is named by the seq of the fact that asked for it. A request
    declined (`need`) stops the run before it is recorded, with status "stopped" in the same
    commit, so no worker takes it up; `stop` is for one recorded already."""

    def __init__(self, store: EventStore, run_id: str) -> None:
        self.effects: list[BranchEffect] = []
        self._store = store
        self._run_id = run_id
        self._requests: deque[tuple[int, f.LlmRequested]] = deque()
        self._starts: deque[tuple[int, ToolCall]] = deque()

    def __call__(self, seq: int, state: str, fact: f.Fact, memory: AgentMemory) -> None:
        if isinstance(fact, f.LlmRequested):
            self._requests.append((seq, fact))
        elif isinstance(fact, f.ToolCallStarted) and fact.call is not None:
            self._starts.append((seq, fact.call))

    def request(self) -> tuple[int, f.LlmRequested | None]:
        """The LLM request recorded for the call being made (seq 0, None: not recorded)."""
        return self._requests.popleft() if self._requests else (0, None)

    def start(self, call: ToolCall) -> tuple[int, ToolCall]:
        """The start recorded for the tool run being made, and its call as the log holds it."""
        return self._starts.popleft() if self._starts else (0, call)

    def add(self, effect: BranchEffect) -> None:
        self.effects.append(effect)

    def need(self, effects: Sequence[BranchEffect]) -> LiveNeeded | None:
        """Note the needed effects of a request the branch declines, and what stops it there
        (None: none is needed)."""
        self.effects.extend(effects)
        return LiveNeeded(effects[0]) if effects else None

    def stop(self, effect: BranchEffect) -> NoReturn:
        """Record a needed effect whose request is recorded already (an effect asked for
        without `declines`), mark the run "stopped" and stop the engine there."""
        self.effects.append(effect)
        try:
            self._store.set_status(self._run_id, "stopped")
        except StoreError:
            pass  # the log still ends where the branch stopped; the catalog says interrupted
        raise LiveNeeded(effect)

    def __repr__(self) -> str:
        return f"Sources(run_id={self._run_id!r}, effects={len(self.effects)})"


def _request_differs(asked: f.LlmRequested | None, recorded: RecordedCall | None) -> str:
    """How a request differs from the parent's at its place ("" when it is the same)."""
    if asked is None:
        return "the call was not recorded as a request"
    if recorded is None:
        return "the parent made no LLM call there"
    before = recorded.request
    if asked.purpose != before.purpose:
        return f"a {asked.purpose} call where the parent made a {before.purpose} call"
    if asked.model != before.model:
        return f"model {asked.model!r}, where the parent asked {before.model!r}"
    if asked.messages_digest != before.messages_digest:
        return "its messages differ from the parent's"
    if asked.tools_digest != before.tools_digest:
        return "the tools offered differ from the parent's"
    return ""


class BranchLlm:
    """A branch's LLM: the answer given for its first call; then, for each call, the LLM given
    (`live`), or else the parent's recorded outcome at the same place for the same request;
    otherwise the branch stops there."""

    def __init__(
        self,
        recorded: Sequence[RecordedCall],
        sources: Sources,
        *,
        given: LlmResponse | None = None,
        live: LlmCaller | None = None,
    ) -> None:
        self._recorded = list(recorded)
        self._sources = sources
        self._given = given
        self._live = live
        self.asked = 0

    def _source(
        self, position: int, asked: f.LlmRequested | None
    ) -> tuple[Source, RecordedCall | None, str]:
        """Where the answer to the `position`-th call, asking `asked`, comes from; the
        parent's call it reuses; why it is given, or why the parent's is not reused."""
        if position == 0 and self._given is not None:
            return "given", None, "the answer given"
        if self._live is not None:
            return "live", None, ""
        recorded = self._recorded[position] if position < len(self._recorded) else None
        why = _request_differs(asked, recorded)
        return ("needed" if recorded is None or why else "reused"), recorded, why

    def declines(self, request: f.LlmRequested, seq: int) -> LiveNeeded | None:
        """What stops the branch before it records `request` (at `seq`), where nothing it is
        allowed may answer it; None where something may."""
        source, _, why = self._source(self.asked, request)
        what = f"LLM call ({request.purpose})"
        needed = [BranchEffect("llm", seq, what, source, why=why)] if source == "needed" else []
        return self._sources.need(needed)

    async def call(self, memory: AgentMemory, tools: ToolRegistry, model: str) -> LlmResponse:
        position = self.asked
        self.asked += 1
        seq, asked = self._sources.request()
        what = f"LLM call ({asked.purpose if asked is not None else 'unrecorded'})"
        source, recorded, why = self._source(position, asked)
        if source == "given" and self._given is not None:
            self._sources.add(BranchEffect("llm", seq, what, "given", why=why))
            return self._given
        if source == "live" and self._live is not None:
            self._sources.add(BranchEffect("llm", seq, what, "live"))
            return await self._live.call(memory, tools, model)
        if recorded is None or source == "needed":
            self._sources.stop(BranchEffect("llm", seq, what, "needed", why=why))
        self._sources.add(BranchEffect("llm", seq, what, "reused", recorded.seq))
        if isinstance(recorded.outcome, f.LlmFailed):
            raise _recorded_error(recorded.outcome)
        return recorded.outcome.response

    def __repr__(self) -> str:
        return f"BranchLlm(asked={self.asked}, recorded={len(self._recorded)})"


def call_text(call: ToolCall, width: int = 60) -> str:
    """A call as `name({"arg": ...})`, its arguments cut to `width` characters."""
    args = json.dumps(thaw(call.args), ensure_ascii=False, sort_keys=True)
    return f"{call.name}({args if len(args) <= width else args[: width - 1] + '…'})"


class BranchTools:
    """A branch's tool runner: the result given for its first run; then, for each run, the
    parent's recorded outcome at the same place when the call is the same (tool and
    arguments), else the builder's tools (`live`, told to `on_live`), else a stop."""

    def __init__(
        self,
        recorded: Sequence[ToolEffect],
        sources: Sources,
        *,
        given: ToolOutcome | None = None,
        live: ToolRunner | None = None,
        on_live: Callable[[ToolCall], None] | None = None,
    ) -> None:
        self._recorded = list(recorded)
        self._sources = sources
        self._given = given
        self._live = live
        self._on_live = on_live
        self.ran = 0

    def _source(self, position: int, logged: ToolCall) -> tuple[Source, ToolEffect | None, str]:
        """Where the result of the `position`-th run, of `logged` (the call as the log holds
        it), comes from; the parent's run it reuses; why it is given, or why the parent's
        result is not reused."""
        if position == 0 and self._given is not None:
            return "given", None, "the result given"
        recorded = self._recorded[position] if position < len(self._recorded) else None
        if recorded is not None and recorded.outcome is not None:
            if _same_call(recorded.call, logged):
                return "reused", recorded, ""
        why = (
            "the parent ran no tool there"
            if recorded is None
            else f"the parent ran {call_text(recorded.call)} there"
        )
        return ("needed" if self._live is None else "live"), recorded, why

    def declines(self, calls: Sequence[ToolCall], seq: int) -> LiveNeeded | None:
        """What stops the branch before it records the start of `calls` (as the log holds
        them, the first at `seq`), run together: a call that nothing it is allowed may serve
        stops them all, none started, so that resuming the branch runs them as one step again;
        None where each may be served."""
        needed = []
        for i, call in enumerate(calls):
            source, _, why = self._source(self.ran + i, call)
            if source == "needed":
                needed.append(BranchEffect("tool", seq + i, call_text(call), source, why=why))
        return self._sources.need(needed)

    async def __call__(self, call: ToolCall) -> ToolOutcome:
        position = self.ran
        self.ran += 1
        seq, logged = self._sources.start(call)  # as the log holds it (redacted, as recorded)
        what = call_text(logged)
        source, recorded, why = self._source(position, logged)
        if source == "given" and self._given is not None:
            self._sources.add(BranchEffect("tool", seq, what, "given", why=why))
            return self._given
        if source == "reused" and recorded is not None and recorded.outcome is not None:
            self._sources.add(BranchEffect("tool", seq, what, "reused", recorded.seq))
            return recorded.outcome
        if self._live is None:
            self._sources.stop(BranchEffect("tool", seq, what, "needed", why=why))
        self._sources.add(BranchEffect("tool", seq, what, "live", why=why))
        if self._on_live is not None:
            self._on_live(call)
        return await self._live(call)

    def __repr__(self) -> str:
        return f"BranchTools(ran={self.ran}, recorded={len(self._recorded)})"
