"""RunContext: what a state handler gets. It reads memory, records facts, and performs effects.

Effects (LLM calls, tool runs, human decisions) go through the context so that each one is
recorded, committed before it starts, and can be served back from the log by replay.
"""

from __future__ import annotations

import asyncio
import inspect
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from . import facts as f
from .codec import clean_text
from .custom import CustomFact
from .errors import LlmDeadlineExceeded, OwnershipViolation, UnrecordableFact
from .facts import Decision, Fact
from .frozen import thaw
from .hooks import NO_HOOKS, GuardInput, HookEffects, ToolCallInfo, TurnInfo
from .inputs import message_text
from .llm.base import LlmCaller
from .memory import AgentMemory
from .outputs import AgentOutput, ToolFinished, ToolStarted
from .progress import CallReports
from .questions import handler_question
from .recorder import Recorder
from .tool_context import ToolContext, _current
from .tools import ToolOutcome, ToolRegistry
from .types import AgentConfig, ApprovalRequest, LlmResponse, ToolCall

__all__ = [
    "SUSPEND",
    "AwaitingAnswer",
    "UNRECORDABLE",
    "ApprovalCallback",
    "EffectDeclined",
    "RunContext",
    "Suspend",
    "ToolRunner",
    "ValueSource",
    "live_value",
]

ApprovalCallback = Callable[[ApprovalRequest], Any]
"""Gets a request; returns True (approve), False (reject) or a dict of new arguments,
directly or as an awaitable."""

ToolRunner = Callable[[ToolCall], Awaitable[ToolOutcome]]
"""Runs one call. A runner may also have `declines(calls, seq)`, asked before the calls of a
batch are recorded as started (as the log holds them; `seq`: the first start's): an
`EffectDeclined` it returns stops the run there (see `EffectDeclined`). So may an LLM caller,
with `declines(request, seq)`, asked with the `LlmRequested` about to be recorded."""

ValueSource = Callable[[f.DrawSource], float | str]
"""Where `ctx.now()`, `ctx.uuid()` and `ctx.random()` get their values: the clock, uuid4 and
`random` in a live run (`live_value`); the recorded values on replay."""


def live_value(source: f.DrawSource) -> float | str:
    """A live run's value: the clock, a fresh uuid4 (hex), or a random float in [0, 1)."""
    if source == "now":
        return time.time()
    if source == "uuid":
        return uuid.uuid4().hex
    return random.random()


UNRECORDABLE = "Unrecordable"
"""The error type of an LLM response or tool output that could not be recorded as given (NaN,
a lone surrogate, a value JSON cannot hold): the run goes on with the refusal as data."""


class Suspend:
    """Returned by a handler that cannot go on without outside input (a human decision)."""

    def __repr__(self) -> str:
        return "SUSPEND"


SUSPEND = Suspend()


class EffectDeclined(BaseException):  # noqa: N818 - it stops the run, it is not a failure
    """What an effect's source returns from its `declines` check for a request it will not
    serve (a branch that may not go live there): the run stops before the request is recorded,
    so its log ends where nothing is under way, with status `status`, and is raised. A handler
    that has committed nothing yet loses what it recorded, and runs again from its start when
    the run is resumed; one that has keeps it all, as at any stop. A BaseException, so that no
    handler takes it for a failed effect."""

    status: str = "stopped"


class AwaitingAnswer(BaseException):  # noqa: N818 - it suspends the run, it is not a failure
    """Raised by `ctx.ask` when the question has no answer yet: the engine suspends the run
    there, as at SUSPEND. A BaseException, so that a handler's `except Exception` lets it by."""


def _plain(call: ToolCall) -> ToolCall:
    """The call with a plain copy of its (read-only) arguments, for an effect to use as it
    likes: what was recorded cannot change through it."""
    return ToolCall.model_construct(name=call.name, args=thaw(call.args), id=call.id)


_ENGINE_FACTS = frozenset(
    {
        "RunStarted",
        "Transitioned",
        "RunBranched",
        "RunAborted",
        "Steered",
        "StopRequested",
        "QuestionAsked",
        "HumanAnswered",
    }
)


class RunContext:
    """The handler's view of the run: memory, tools, config, `record`, and effect helpers."""

    def __init__(
        self,
        *,
        run_id: str,
        state: str,
        recorder: Recorder,
        tools: ToolRegistry,
        llm: LlmCaller,
        tool_runner: ToolRunner,
        approval: ApprovalCallback | None,
        emit: Callable[[AgentOutput], None],
        patches: Callable[[str], bool] | None = None,
        run_deadline: float | None = None,
        values: ValueSource | None = None,
        asked_from: int = 0,
        hooks: HookEffects | None = None,
    ) -> None:
        self.run_id = run_id
        self.run_deadline = run_deadline
        """The event loop time by which this execution's LLM calls must end (None: never)."""
        self.state = state
        self.tools = tools
        self.llm = llm
        self._recorder = recorder
        self._run_tool = tool_runner
        self._approval = approval
        self._emit = emit
        self._patches = patches
        self._values = values or live_value
        self._asked_from = asked_from  # where this state's questions start in memory.asked
        self._asks = 0  # questions this handler asked so far (`ask`)
        self._hooks = hooks or NO_HOOKS
        self._begun = recorder.last, recorder.memory  # where this handler began (`_declined`)

    @property
    def memory(self) -> AgentMemory:
        """The current memory, including the facts this handler recorded so far."""
        return self._recorder.memory

    @property
    def config(self) -> AgentConfig:
        """The run's configuration."""
        return self._recorder.memory.config

    def record(self, fact: Fact | CustomFact, metrics: dict[str, Any] | None = None) -> None:
        """Record a fact: it is applied to memory now and committed with the transition. The
        engine's own facts (RunStarted, Transitioned, RunBranched, RunAborted, Steered,
        StopRequested) and those `ask` records are refused, and so is a fact of the user's
        that this state's handler does not declare (`records`)."""
        if fact.kind in _ENGINE_FACTS:
            raise OwnershipViolation(self.state, fact.kind, frozenset())
        self._recorder.record(fact, self.state, metrics)

    def patched(self, change_id: str) -> bool:
        """True where the new code of a deliberate change runs (as Temporal's `patched`):
        always in a live run, which records a `PatchMarked` the first time; on replay, only if
        the recorded run has the marker, so a run recorded before the change replays its old
        path. `if ctx.patched("retry-v2"): new behaviour, else: old behaviour`."""
        if change_id in self.memory.patches:
            return True
        if self._patches is not None and not self._patches(change_id):
            return False
        self._recorder.record(f.PatchMarked(change_id=change_id), self.state)
        return True

    def now(self) -> float:
        """The time (seconds since the epoch), recorded: a replay gets the recorded value.
        Handlers read the clock this way, never `time.time()`, so that replays match."""
        return float(self._draw("now"))

    def uuid(self) -> str:
        """A fresh uuid4 as 32 hex digits, recorded (a replay gets the same one)."""
        return str(self._draw("uuid"))

    def random(self) -> float:
        """A random float in [0, 1), recorded (a replay gets the same one)."""
        return float(self._draw("random"))

    def _draw(self, source: f.DrawSource) -> float | str:
        value = self._values(source)
        self._recorder.record(f.ValueDrawn(source=source, value=value), self.state)
        return value

    async def commit(self) -> None:
        """Commit what was recorded so far, durably: a handler awaits it before each effect
        of its own (the built-in effect helpers do it for theirs), so that after a crash the
        log says which effects may have happened. The event loop goes on meanwhile."""
        await self._recorder.commit(effect=True)

    def emit(self, output: AgentOutput) -> None:
        """Send an output to `engine.stream()` listeners."""
        self._emit(output)

    def select_model(self) -> str:
        """`config.models[task_type]`, else `config.models["default"]`, else ""."""
        return self.config.model_for(self.memory.task_type)

    def over_budget(self) -> bool:
        """True when the recorded usage has reached the token budget."""
        budget = self.memory.budget
        return (
            budget is not None and self.memory.total_usage.total_tokens >= budget.max_total_tokens
        )

    async def call_llm(
        self,
        purpose: f.Purpose,
        memory: AgentMemory | None = None,
        tools: ToolRegistry | None = None,
    ) -> f.LlmResponded | f.LlmFailed:
        """Ask the LLM (about `memory`, by default the run's own) and record what came back."""
        view = memory if memory is not None else self.memory
        registry = tools if tools is not None else self.tools
        model = self.select_model()
        request = f.LlmRequested(
            purpose=purpose,
            model=model,
            messages_digest=view.messages_digest(),
            tools=tuple(registry.names()),
            tools_digest=registry.digest(),
        )
        declines = getattr(self.llm, "declines", None)
        if declines is not None:
            await self._declined(declines(request, self._recorder.last + 1))
        self.record(request)
        await self.commit()
        started = time.perf_counter()
        seconds, which = self._llm_time_left()
        fact: f.LlmResponded | f.LlmFailed
        stop: LlmDeadlineExceeded | None = None
        self._recorder.find_images(view)  # the bytes of the images it sends, from the store
        try:
            async with asyncio.timeout(seconds) as limit:
                response = await self.llm.call(view, registry, model)
            if not isinstance(response, LlmResponse):
                raise TypeError(
                    f"{type(self.llm).__name__}.call returned {type(response).__name__}, "
                    "not LlmResponse"
                )
            fact = f.LlmResponded(purpose=purpose, response=response)
        except LlmDeadlineExceeded as e:  # a recorded deadline, served back by replay
            stop = e
        except Exception as e:  # a provider failure is data
            if limit.expired():
                stop = LlmDeadlineExceeded(f"The LLM gave no answer within {which}")
            else:
                fact = f.LlmFailed(
                    purpose=purpose, error_type=type(e).__name__, message=clean_text(str(e))
                )
        if stop is not None:
            fact = f.LlmFailed(purpose=purpose, error_type=type(stop).__name__, message=stop.reason)
        latency = round((time.perf_counter() - started) * 1000, 3)
        try:
            self.record(fact, {"latency_ms": latency})
        except UnrecordableFact as e:  # bad values from the LLM are data too: a refusal
            fact = f.LlmFailed(purpose=purpose, error_type=UNRECORDABLE, message=e.problem)
            self.record(fact, {"latency_ms": latency})
        if stop is not None:
            raise stop  # the engine records RunAborted and stops: the run can be resumed
        return fact

    async def _declined(self, refusal: EffectDeclined | None) -> None:
        """Stop the run before an effect its source declined (`refusal`; None: go on): commit
        what is recorded, but what this handler recorded when it has committed nothing yet
        (it runs again from its start on resume), with the refusal's status, and raise it."""
        if refusal is None:
            return
        begun, memory = self._begun
        if self._recorder.seq <= begun:
            self._recorder.discard(begun, memory)
        await self._recorder.commit(status=refusal.status)
        raise refusal

    def _llm_time_left(self) -> tuple[float | None, str]:
        """Seconds the next LLM call may take, and which deadline that is."""
        per_call = self.config.llm_deadline
        own = f"llm_deadline={per_call:g} s" if per_call is not None else "no deadline"
        if self.run_deadline is None:
            return per_call, own
        left = max(0.0, self.run_deadline - asyncio.get_running_loop().time())
        if per_call is not None and per_call <= left:
            return per_call, own
        return left, f"the run's deadline (run_deadline={self.config.run_deadline:g} s)"

    async def check_input(self) -> bool:
        """Have the input guards check each user message no planning call has sent yet (the
        task, then each message sent while the run went on), recording each verdict
        (`InputChecked`); True when one was refused: the run is to end."""
        hooks = self._hooks
        if not hooks.wants("input_guard"):
            return False
        while (memory := self.memory).checked_messages < memory.user_messages:
            number = memory.checked_messages
            text = message_text(memory, number)
            given = GuardInput(text or "", number, memory.step + 1, memory.build_messages())
            fact = await hooks.check_input(self._recorder.last, given)
            if fact is None:  # nothing recorded here (a replay of a run checked differently)
                return False
            self.record(fact)
            if fact.verdict == "refused":
                return True
        return False

    async def turn_hook(
        self, hook: Literal["before_turn", "after_turn"], answer: str | None = None
    ) -> bool:
        """Run the `before_turn` or `after_turn` hooks (`answer`: the final answer about to be
        accepted); True when one ended the run (recorded as `HookAborted`)."""
        hooks = self._hooks
        if not hooks.wants(hook):
            return False
        memory = self.memory
        step = memory.step + 1 if hook == "before_turn" else memory.step
        turn = TurnInfo(step, memory.build_messages(), memory.total_usage, answer)
        fact = await hooks.turn(hook, self._recorder.last, turn)
        if fact is None:
            return False
        self.record(fact)
        return True

    async def _checked_calls(
        self, calls: tuple[ToolCall, ...]
    ) -> tuple[tuple[ToolCall, ...], list[ToolCall | None]]:
        """The calls to run after the `before_tool_call` hooks (each planned call not started
        yet): one vetoed is left out (its refusal recorded as its result), one given other
        arguments is the planned call as it now stands; with each, the call with the real
        arguments a hook gave it (None: the recorded call's own)."""
        hooks = self._hooks
        if not hooks.wants("before_tool_call"):
            return calls, [None] * len(calls)
        kept: list[ToolCall] = []
        given: list[ToolCall | None] = []
        taken: set[int] = set()
        for call in calls:
            memory = self.memory
            alike = memory._unfinished_alike(self._recorder.as_recorded(call))
            position = next((i for i in alike if i not in memory.started and i not in taken), None)
            if position is None:  # run again after a stop, or a handler's own: checked before
                kept.append(call)
                given.append(None)
                continue
            taken.add(position)
            real = _plain(self._real(call, position))
            fact = await hooks.before_tool_call(
                self._recorder.last, ToolCallInfo(real, memory.step, position)
            )
            if fact is not None:
                self.record(fact)
            if isinstance(fact, f.ToolCallVetoed):
                continue
            if isinstance(fact, f.ToolCallRewritten):
                kept.append(self.memory.planned_calls[position])
                given.append(
                    ToolCall.model_construct(name=call.name, args=thaw(fact.args), id=call.id)
                )
                continue
            kept.append(call)
            given.append(None)
        return tuple(kept), given

    async def _after_call(
        self, call: ToolCall, position: int | None, outcome: ToolOutcome, real: ToolCall | None
    ) -> str:
        """What the LLM reads of a planned call's result once the `after_tool_call` hooks have
        seen it (a change recorded as `ObservationRewritten`)."""
        hooks = self._hooks
        if position is None or not hooks.wants("after_tool_call"):
            return outcome.observation
        info = ToolCallInfo(
            real or _plain(self._real(call, position)),
            self.memory.step,
            position,
            outcome.observation,
            outcome.success,
        )
        fact = await hooks.after_tool_call(self._recorder.last, info)
        if fact is None:
            return outcome.observation
        self.record(fact)
        return fact.observation

    async def run_tools(self, calls: tuple[ToolCall, ...], *, concurrent: bool) -> None:
        """Run calls (one after another, or all at once), each recorded as started before it
        runs and as executed after; results are recorded in call order. A call abandoned with
        its outcome unknown stays in flight (not executed), and a sequence stops there."""
        if not calls:
            return
        if not concurrent:
            for call in calls:
                if not await self._run_batch((call,)):
                    return
            return
        await self._run_batch(calls)

    def _start(self, call: ToolCall) -> tuple[int | None, int]:
        """Record the call as started, named by its place; its position in the plan (None for
        a call that is not planned: a custom handler's own, written in full this once) and
        the place its result names."""
        memory = self.memory
        position = memory.start_position(self._recorder.as_recorded(call))
        if position is not None:
            self.record(f.ToolCallStarted(index=position))
            return position, position
        place = memory.next_place()
        self.record(f.ToolCallStarted(index=place, call=call))
        return None, place

    def _tool_context(
        self, call: ToolCall, position: int | None, seq: int, reports: CallReports
    ) -> ToolContext:
        step = self.memory.step
        if position is None:  # not a planned call (a custom handler's): keyed by its start
            key = f"{self.run_id}-seq{seq}"
            return ToolContext(self.run_id, call.id, call.name, step, 0, key, seq, reports)
        return ToolContext(
            self.run_id, call.id, call.name, step, position, seq=seq, on_report=reports
        )

    def _real(self, call: ToolCall, position: int) -> ToolCall:
        """The call with the real arguments redaction kept from the log (the n-th of the plan's
        calls that look alike once redacted gets the n-th real arguments)."""
        alike = sum(1 for c in self.memory.planned_calls[:position] if c == call)
        return self._recorder.reveal(call, alike)

    async def _run_batch(self, calls: tuple[ToolCall, ...]) -> bool:
        """Run calls at once; False if one was abandoned with its outcome unknown. A batch
        the tool runner declines (`declines`) stops the run before any of its calls starts. A
        tool that raised KeyboardInterrupt or SystemExit gets a failed result, and the exception
        is raised again once the batch is recorded and committed; so is anything a tool runner
        raised, its call left in flight (as a crash leaves it) and the other calls' results
        kept."""
        calls, given = await self._checked_calls(calls)
        if not calls:
            return True
        declines = getattr(self._run_tool, "declines", None)
        if declines is not None:
            logged = tuple(self._recorder.as_recorded(call) for call in calls)
            await self._declined(declines(logged, self._recorder.last + 1))
        places = [self._start(call) for call in calls]
        positions = [position for position, _ in places]
        await self.commit()
        first_seq = self._recorder.seq - len(calls) + 1
        reports = [CallReports(c, self._emit) for c in calls]
        contexts = [
            self._tool_context(c, p, first_seq + i, reports[i])
            for i, (c, p) in enumerate(zip(calls, positions, strict=True))
        ]
        for call in calls:
            self.emit(ToolStarted(call))
        stops: list[BaseException] = []

        async def timed(
            call: ToolCall, context: ToolContext, real: ToolCall | None
        ) -> tuple[ToolOutcome, float]:
            started = time.perf_counter()
            token = _current.set(context)
            try:
                outcome = await self._run_tool(real or _plain(self._real(call, context.position)))
            except (KeyboardInterrupt, SystemExit) as e:
                stops.append(e)
                outcome = ToolOutcome.failed(
                    type(e).__name__, f"'{call.name}' raised {e!r}, which stopped the run"
                )
            except asyncio.CancelledError:
                raise
            except BaseException as e:  # a runner that raised (replay's stand-in for a crash)
                stops.append(e)  # the call stays in flight; the other calls' results are kept
                outcome = ToolOutcome.unknown(type(e).__name__, str(e))
            finally:
                _current.reset(token)
            return outcome, round((time.perf_counter() - started) * 1000, 3)

        if len(calls) == 1:
            done = [await timed(calls[0], contexts[0], given[0])]
        else:
            done = list(await asyncio.gather(*map(timed, calls, contexts, given)))
        for call, (position, place), (outcome, ms), said, real in zip(
            calls, places, done, reports, given, strict=True
        ):
            counts = said.settled()  # how many reports it made: measured, not facts
            observation = outcome.observation
            if outcome.known:  # else it stays in flight: a human says whether it took effect
                outcome = self._record_result(call, place, outcome, {"duration_ms": ms, **counts})
                observation = await self._after_call(call, position, outcome, real)
            self.emit(ToolFinished(call, observation, outcome.success))
        if stops:
            await self.commit()
            raise stops[0]
        return all(outcome.known for outcome, _ in done)

    def _record_result(
        self, call: ToolCall, place: int, outcome: ToolOutcome, metrics: dict[str, Any]
    ) -> ToolOutcome:
        """Record a call's outcome (naming the call by its place) with its measurements; one
        that cannot be stored is recorded as a failure saying why, which the LLM then sees."""
        try:
            self.record(_executed(place, outcome), metrics)
            return outcome
        except UnrecordableFact as e:
            problem = e.problem
        outcome = ToolOutcome.failed(
            UNRECORDABLE, f"the output of '{call.name}' cannot be stored: {problem}"
        )
        self.record(_executed(place, outcome), metrics)
        return outcome

    async def ask(self, question: str) -> str:
        """Ask a person `question` and return the answer. The builder's approval callback may
        answer at once (it gets a request of kind "question" and returns the answer as text);
        otherwise the run waits (status waiting: `pending_requests` shows the question, and
        `replay.answer`, `agentsm answer` or the viewer answers it), and once answered this
        handler runs again from its start, where this call returns the recorded answer. So ask
        before recording anything else: what a handler recorded before it waited is recorded
        again when it runs again. Replay serves the recorded answers back."""
        position = self._asked_from + self._asks
        self._asks += 1
        asked = self.memory.asked
        if position < len(asked):
            answer = asked[position][1]
            if answer is not None:
                return answer
        else:
            self._recorder.record(f.QuestionAsked(question=clean_text(question)), self.state)
        if self._approval is not None:
            await self.commit()  # the question is on record before anyone is asked
            request = handler_question(self.run_id, self.memory)
            assert request is not None
            given = self._approval(request)
            if inspect.isawaitable(given):
                given = await given
            if isinstance(given, str):
                self._recorder.record(f.HumanAnswered(answer=clean_text(given)), self.state)
                answered = self.memory.asked[position][1]
                assert answered is not None
                return answered
            if given is not None:
                raise TypeError(
                    f"The approval callback returned {given!r} for a question; return the "
                    "answer as text, or None to leave the run waiting."
                )
        raise AwaitingAnswer(question)

    async def ask_human(self, request: ApprovalRequest) -> Decision | None:
        """The human's decision on a call (its answer, for a question to a person), or None
        when no decision can be had now."""
        if self._approval is None:
            return None
        await self.commit()  # the question is on record before anyone is asked
        answer = self._approval(request.model_copy(update={"call": _plain(request.call)}))
        if inspect.isawaitable(answer):
            answer = await answer
        if isinstance(answer, Decision):
            return answer
        call_id, index = request.call.id, request.index
        if request.kind == "question":
            if isinstance(answer, str):
                return Decision(
                    call_id=call_id, verdict="answered", answer=clean_text(answer), index=index
                )
            if answer is False:
                return Decision(call_id=call_id, verdict="rejected", index=index)
            if answer is None:
                return None
            raise TypeError(
                f"The approval callback returned {answer!r} for a question; return the answer "
                "as text, False to decline it, or None to leave the run waiting."
            )
        if answer is True:
            return Decision(call_id=call_id, verdict="approved", index=index)
        if answer is False:
            return Decision(call_id=call_id, verdict="rejected", index=index)
        if isinstance(answer, dict):
            return Decision(call_id=call_id, verdict="modified", args=answer, index=index)
        if answer is None:
            return None
        raise TypeError(
            f"The approval callback returned {answer!r}; return True (approve), False (reject) "
            "or a dict of replacement arguments."
        )

    def __repr__(self) -> str:
        return f"RunContext(run_id={self.run_id!r}, state={self.state!r}, step={self.memory.step})"


def _executed(place: int, outcome: ToolOutcome) -> f.ToolExecuted:
    return f.ToolExecuted(
        index=place,
        observation=outcome.observation,
        success=outcome.success,
        error_type=outcome.error_type,
        usage=outcome.usage,
        images=outcome.images or None,
    )
