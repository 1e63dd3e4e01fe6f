"""AgentEngine: the dumb loop. Terminal? stop. Run the state's handler, look the event up in the
table, record the transition, repeat. No business logic lives here."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Literal, NoReturn

from eventstore import EventStore, Inbox, StoredEvent, StoreError

from . import facts as f
from ._scope import run_scope
from ._sync import run_sync
from .codec import clean_text
from .context import (
    SUSPEND,
    ApprovalCallback,
    AwaitingAnswer,
    RunContext,
    Suspend,
    ToolRunner,
    ValueSource,
)
from .errors import (
    AgentFailed,
    BuildError,
    EngineBusy,
    EngineError,
    HandlerCrashed,
    HumanInputRequired,
    NoHandlerForState,
    RunStopped,
    SafetyCapExceeded,
    UnreadableFact,
)
from .hooks import HookEffects
from .inbox import Heard, LocalMessages, Messages, StoreMessages
from .llm.base import LlmCaller, _text_sink
from .memory import AgentMemory, fold_with_state, initial_memory
from .outputs import (
    AgentOutput,
    ApprovalNeeded,
    FinalAnswer,
    RunErrored,
    SteerTaken,
    StopTaken,
    TransitionTaken,
)
from .recorder import Recorder
from .redaction import Redactor
from .states.base import AgentState, handler_records
from .states.waiting import human_requests
from .subagent import with_waiting_children
from .tools import ToolOutcome, ToolRegistry
from .trace import Trace, decode
from .transitions import TransitionTable
from .types import TERMINAL_STATES, State, ToolCall

__all__ = ["AgentEngine"]

Ending = Literal["done", "failed", "waiting", "stopped"]


def _asked_before_last_transition(facts: list[f.Fact]) -> int:
    """How many questions handlers had asked (`ctx.ask`) when the run entered its current
    state: the current state's questions come after those."""
    asked = current = 0
    for fact in facts:
        if isinstance(fact, f.QuestionAsked):
            asked += 1
        elif isinstance(fact, f.Transitioned):
            current = asked
    return current


def _check_known(run_id: str, stored: list[StoredEvent], facts: list[f.Fact]) -> None:
    """Refuse to continue a run holding a fact this process cannot fold: a kind its definition
    does not declare is damage (`UnreadableFact`); a user's kind it declares needs the builder
    that registers it (`BuildError`), or memory would go on without that fact's reducer."""
    first = facts[0] if facts else None
    declared = first.custom_facts or {} if isinstance(first, f.RunStarted) else {}
    for event, fact in zip(stored, facts, strict=True):
        if not isinstance(fact, f.UnknownFact):
            continue
        if fact.kind not in declared:
            reason = f"this agentsm knows no fact kind {fact.kind!r}"
            raise UnreadableFact(run_id, event.seq, fact.kind, reason)
        raise BuildError(
            f"Run {run_id} records {fact.kind} (seq {event.seq}), which this agent does not "
            f"register; continue it with the builder that does (.fact({fact.kind}, ...))."
        )


class AgentEngine:
    """Runs one agent run to a terminal state, recording every fact into the store.

    Build it with `AgentBuilder`. `run()` returns the final answer or raises `AgentFailed`;
    `arun()` is the same for async code; `stream()` yields outputs as the run goes on.
    """

    def __init__(
        self,
        *,
        store: EventStore,
        definition: f.RunStarted,
        tools: ToolRegistry,
        llm: LlmCaller,
        table: TransitionTable,
        handlers: Mapping[str, AgentState],
        approval: ApprovalCallback | None = None,
        run_id: str | None = None,
        clock: Callable[[], float] = time.time,
        tool_runner: ToolRunner | None = None,
        redactor: Redactor | None = None,
        patches: Callable[[str], bool] | None = None,
        values: ValueSource | None = None,
        messages: Messages | None = None,
        hooks: HookEffects | None = None,
    ) -> None:
        self.run_id = run_id or uuid.uuid4().hex[:12]
        if redactor is not None:  # the task reaches the catalog too: redacted like the facts
            definition = redactor.fact(definition)
        self.store = store
        self.tools = tools
        self.llm = llm
        self.table = table
        self.handlers = dict(handlers)
        self.records: dict[str, frozenset[str]] = {
            state: kinds
            for state, handler in self.handlers.items()
            if (kinds := handler_records(handler)) is not None
        }
        """The facts each state's handler declares it may record (`records`), for the states
        that declare them: the ownership rules of custom states and the user's own facts."""
        self.approval = approval
        self.definition = definition
        self._clock = clock
        self._tool_runner = tool_runner  # None: run_tool (not kept: the engine would be in a
        # reference cycle, and a finished run's memory would wait for the cyclic collector)
        self._redactor = redactor
        self._patches = patches
        self._values = values
        self._hooks = hooks  # the guards and hooks (agentsm.hooks), or their recorded effects
        self._recorder = Recorder(
            store,
            self.run_id,
            initial_memory(definition),
            0,
            clock,
            redactor=redactor,
            records=self.records,
        )
        self._state: str = State.Idle
        self._transitions = 0
        self._created = False
        self._closed = False
        self._busy = False
        self._run_deadline: float | None = None
        self._local = LocalMessages()  # what this process sends the run (steer, request_stop)
        self._messages = messages or StoreMessages(store, self.run_id)  # and the others
        self._asked_from = 0  # where the current state's questions start in memory.asked
        self._listening = False  # whether the next tick looks for messages first (`_listen`)

    @classmethod
    def attach(
        cls,
        *,
        store: EventStore,
        run_id: str,
        tools: ToolRegistry,
        llm: LlmCaller,
        table: TransitionTable,
        handlers: Mapping[str, AgentState],
        approval: ApprovalCallback | None = None,
        clock: Callable[[], float] = time.time,
        tool_runner: ToolRunner | None = None,
        redactor: Redactor | None = None,
        patches: Callable[[str], bool] | None = None,
        values: ValueSource | None = None,
        messages: Messages | None = None,
        hooks: HookEffects | None = None,
    ) -> AgentEngine:
        """An engine continuing a run already in the store, from its last committed fact."""
        stored = store.read(run_id)
        facts = [decode(e) for e in stored]
        _check_known(run_id, stored, facts)
        if not facts or not isinstance(facts[0], f.RunStarted):
            raise EngineError(f"Run {run_id!r} has no RunStarted fact; it cannot be continued.")
        engine = cls(
            store=store,
            definition=facts[0],
            tools=tools,
            llm=llm,
            table=table,
            handlers=handlers,
            approval=approval,
            run_id=run_id,
            clock=clock,
            tool_runner=tool_runner,
            redactor=redactor,
            patches=patches,
            values=values,
            messages=messages,
            hooks=hooks,
        )
        memory, state = fold_with_state(facts)
        engine._recorder = Recorder(
            store, run_id, memory, stored[-1].seq, clock, redactor=redactor, records=engine.records
        )
        engine._state = state
        engine._transitions = sum(isinstance(x, f.Transitioned) for x in facts)
        engine._asked_from = _asked_before_last_transition(facts)
        engine._created = True
        engine._closed = isinstance(facts[-1], f.RunFinished)
        return engine

    # -- inspection -----------------------------------------------------------------------

    @property
    def memory(self) -> AgentMemory:
        """The current memory: the fold of everything recorded so far."""
        return self._recorder.memory

    @property
    def seq(self) -> int:
        """The sequence number of the last committed fact."""
        return self._recorder.seq

    @property
    def finished(self) -> bool:
        """True once the run reached Done or Error and recorded its closing fact."""
        return self._closed

    def current_state(self) -> str:
        """The state the run is in (a `State` for the built-in ones)."""
        return self._state

    def trace(self) -> Trace:
        """Every fact recorded for this run, read back from the store."""
        if not self._created:
            return Trace(self.run_id, [])
        return Trace.load(self.store, self.run_id)

    def observe(self, callback: Callable[[int, str, f.Fact, AgentMemory], None]) -> None:
        """Call `callback(seq, state, fact, memory)` after every fact this engine records, with
        the memory right after it (for invariant checks and live views; not for decisions)."""
        self._recorder.observers.append(callback)

    def note(self, fact: f.Fact) -> None:
        """Record and commit a fact from outside the handlers (a branch's changes, a human's
        decision given later); it is checked against the current state like any other."""
        if not self._created:
            self._create()
        self._recorder.record(fact, self._state)
        self._recorder.flush()

    def steer(self, text: str) -> None:
        """Send the run a message while it goes on, from any thread: it is recorded
        (`Steered`) at the next transition, and the LLM reads it as a user message after the
        latest entries from its next call on; several are taken in the order sent. From
        another process, `replay.steer` does the same through the store."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"A message to the run is a non-empty string, not {text!r}.")
        self._refuse_ended("steer")
        self._local.put(f.Steered(text=clean_text(text)))

    def request_stop(self, reason: str = "") -> None:
        """Ask the run to stop, from any thread: at the next transition it records
        `StopRequested`, commits with status "stopped" and `run()` raises `RunStopped`;
        resuming it goes on from there. From another process, `replay.request_stop`."""
        self._refuse_ended("stop")
        self._local.put(f.StopRequested(reason=clean_text(reason)))

    def _refuse_ended(self, what: str) -> None:
        if self._closed:
            raise ValueError(
                f"Run {self.run_id} has ended ({self._state}); there is nothing to {what}. "
                "In a thread, send the message as the next turn."
            )

    def submit(self) -> str:
        """Record the run's definition with status "queued" and return its id, without running
        it: a worker (`replay.worker.Worker`, `agentsm worker`) claims and runs it later."""
        if self._created:
            raise EngineError(
                f"Run {self.run_id!r} is recorded already; only a new run can be submitted "
                "(build another engine)."
            )
        self._recorder.record(self.definition, State.Idle)
        self._recorder.create(
            self.definition.task, created_at=self._clock(), status="queued", claim=False
        )
        self._created = True
        return self.run_id

    # -- running --------------------------------------------------------------------------

    def run(self) -> str:
        """Run to the end and return the final answer; works inside a running loop too."""
        return run_sync(self.arun())

    async def arun(self) -> str:
        """Run to the end; the final answer, or `AgentFailed` / `HumanInputRequired`."""
        ending = await self._drive(lambda output: None)
        return self._result(ending)

    async def stream(self) -> AsyncIterator[AgentOutput]:
        """Run to the end, yielding transitions, tool starts and ends, text deltas and the
        final answer (or error, or approval request) as they happen."""
        queue: asyncio.Queue[AgentOutput | None] = asyncio.Queue()
        task = asyncio.ensure_future(self._drive(queue.put_nowait))
        task.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (item := await queue.get()) is not None:
                yield item
            await task
        finally:
            if not task.done():
                task.cancel()

    async def run_until(self, seq: int) -> int:
        """Run transitions until the log reaches seq `seq` (or the run ends or waits); returns
        the seq reached. Replay uses it to stop exactly where a run was branched."""
        with self._driving():
            token = _text_sink.set(None)
            self._start_clock()
            try:
                async with run_scope():  # what the drive opens (MCP sessions) ends with it
                    await self._start_driving()
                    while (
                        self._recorder.last < seq and await self._tick(lambda output: None) is None
                    ):
                        pass
                    await self._recorder.commit()
            finally:
                _text_sink.reset(token)
        return self.seq

    def _result(self, ending: Ending) -> str:
        if ending == "done":
            return self.memory.final_answer or "[No answer produced]"
        if ending == "waiting":
            requests = human_requests(self.run_id, self.memory, self._state)
            raise HumanInputRequired(self.run_id, with_waiting_children(self.store, requests))
        if ending == "stopped":
            raise RunStopped(self.run_id, self._stopped)
        raise AgentFailed(self.memory.error or "Unknown error", self.run_id)

    async def run_tool(self, call: ToolCall) -> ToolOutcome:
        """Run one call with the registry's tools (the default tool runner)."""
        return await self.tools.aexecute(
            call.name, call.args, timeout=self.memory.config.tool_timeout
        )

    def _create(self) -> None:
        created_at = self._clock()
        self._recorder.record(self.definition, State.Idle)
        self._recorder.create(self.definition.task, created_at=created_at, status="running")
        self._created = True

    async def _start_driving(self) -> None:
        """Create the run (off the event loop) or mark it running again at the next commit."""
        if self._created:
            self._recorder.driving()
            return
        created_at = self._clock()
        self._recorder.record(self.definition, State.Idle)
        await self._recorder.acreate(self.definition.task, created_at=created_at, status="running")
        self._created = True
        self._listening = True

    @contextmanager
    def _driving(self) -> Iterator[None]:
        """One driver at a time: a second `arun()` while the first runs is refused."""
        if self._busy:
            raise EngineBusy(self.run_id)
        self._busy = True
        try:
            yield
        finally:
            self._busy = False
            self._recorder.release()  # no longer driven from here: another process may resume

    async def _drive(self, emit: Callable[[AgentOutput], None]) -> Ending:
        with self._driving():
            token = _text_sink.set(emit)
            self._start_clock()
            try:
                async with run_scope():  # what the drive opens (MCP sessions) ends with it
                    await self._start_driving()
                    while True:
                        ending = await self._tick(emit)
                        if ending is not None:
                            return ending
            finally:
                _text_sink.reset(token)

    def _start_clock(self) -> None:
        """Start this execution's run deadline (each run()/arun()/stream() has its own)."""
        limit = self.memory.config.run_deadline
        now = asyncio.get_running_loop().time()
        self._run_deadline = None if limit is None else now + limit

    async def _tick(self, emit: Callable[[AgentOutput], None]) -> Ending | None:
        state = self._state
        if state in TERMINAL_STATES and self._closed:
            return "done" if state == State.Done else "failed"
        if self._listening and state not in TERMINAL_STATES:
            self._listening = False
            if await self._listen(emit):
                return "stopped"
        handler = self.handlers.get(state)
        if handler is None:
            await self._abort(NoHandlerForState(state))
        ctx = RunContext(
            run_id=self.run_id,
            state=state,
            recorder=self._recorder,
            tools=self.tools,
            llm=self.llm,
            tool_runner=self._tool_runner or self.run_tool,
            approval=self.approval,
            emit=emit,
            patches=self._patches,
            run_deadline=self._run_deadline,
            values=self._values,
            asked_from=self._asked_from,
            hooks=self._hooks,
        )
        if state not in TERMINAL_STATES:
            cap = self.memory.config.effective_safety_cap()
            if self._transitions >= cap:  # before the handler's effects, not after them
                await self._abort(SafetyCapExceeded(self._transitions + 1, cap))
        try:
            event = await handler.handle(ctx)
        except StoreError:  # the store failed, or another driver has the run: not the run's
            raise  # fault, so nothing more is recorded; it stays where its last commit left it
        except EngineError as e:
            await self._abort(e)
        except AwaitingAnswer:  # a question to a person (`ctx.ask`) has no answer yet
            event = SUSPEND
        except Exception as e:
            await self._abort(HandlerCrashed(state, e), cause=e)
        except asyncio.CancelledError as e:
            task = asyncio.current_task()
            if task is None or not task.cancelling():
                await self._abort(HandlerCrashed(state, e), cause=e)
            self._stop()
            raise
        except (KeyboardInterrupt, SystemExit):
            self._stop()
            raise
        except BaseException:  # something above the run stops it (a replay that diverged)
            self._keep(None)  # what was recorded stays, as at any stop
            raise
        if isinstance(event, Suspend):
            await self._recorder.commit(status="waiting")
            emit(ApprovalNeeded(tuple(human_requests(self.run_id, self.memory, state))))
            return "waiting"
        if state in TERMINAL_STATES:
            ending: Ending = "done" if state == State.Done else "failed"
            await self._recorder.commit(status=ending)
            self._closed = True
            if ending == "done":
                emit(FinalAnswer(self.memory.final_answer or ""))
            else:
                emit(RunErrored(self.memory.error or "Unknown error"))
            return ending
        try:
            target = self.table.next_state(state, event)
        except EngineError as e:
            await self._abort(e)
        # committed with the next effect or stop: a crash before then redoes this transition
        self._recorder.record(f.Transitioned(from_state=state, event=event, to_state=target), state)
        self._state = target
        self._transitions += 1
        self._asked_from = len(self.memory.asked)
        self._listening = True
        emit(TransitionTaken(state, event, target, self.memory.step))
        return None

    async def _listen(self, emit: Callable[[AgentOutput], None]) -> bool:
        """Take what was sent to the run from outside, where the engine looks for it: right
        after a transition (and after a new run's definition), never at the first tick of a
        drive that continues a run, whose handler runs again first (so a replay, which runs
        it once, meets the messages at the same places). True: the run stops here."""
        heard = self._local.take()
        store_heard, upto = self._messages.due(self._recorder.last + len(heard))
        if not heard and not store_heard:
            return False
        return await self._hear([*heard, *store_heard], upto, emit)

    async def _hear(
        self, heard: list[Heard], upto: int, emit: Callable[[AgentOutput], None]
    ) -> bool:
        """Record what the run heard from outside, in order, and commit it: with the inbox's
        messages up to `upto` marked taken in the same transaction, and with status "stopped"
        when one asked the run to stop (True: it stops here)."""
        for fact in heard:
            self._recorder.record(fact, self._state)
        stop = next((x for x in heard if isinstance(x, f.StopRequested)), None)
        status = "stopped" if stop is not None else None
        if upto:
            self._recorder.claimed()  # only the run's driver takes its messages
            with self.store.batch():  # taken with the facts that record them, or not at all
                self._messages_taken(upto)
                self._recorder.flush(status=status)
        elif stop is not None:
            await self._recorder.commit(status="stopped")
        for fact in heard:
            if isinstance(fact, f.Steered):
                emit(SteerTaken(fact.text))
        if stop is None:
            return False
        self._stopped = stop.reason
        emit(StopTaken(stop.reason))
        return True

    def _messages_taken(self, upto: int) -> None:
        if isinstance(self.store, Inbox):
            self.store.take(self.run_id, upto)

    def _stop(self) -> None:
        """The run was stopped from outside (cancelled, Ctrl-C) or by a tool (`sys.exit`): keep
        what was recorded, with the calls that were running left in flight, and mark the run
        "stopped"; it is resumed like a run whose process died."""
        self._keep("stopped")

    def _keep(self, status: str | None) -> None:
        """Commit what was recorded (with `status`) as the run stops for a reason of its own; a
        store that cannot take it (failed, or the run was lost to another driver) leaves the
        log where its last commit left it, and the stop goes on."""
        try:
            self._recorder.flush(status=status)
        except StoreError:
            pass

    async def _abort(self, error: EngineError, cause: BaseException | None = None) -> NoReturn:
        """Keep what the handler recorded, add RunAborted, mark the run, raise."""
        self._recorder.record(
            f.RunAborted(error_type=type(error).__name__, message=clean_text(str(error))),
            self._state,
        )
        await self._recorder.commit(status="aborted")
        raise error from cause

    _stopped = ""  # the reason the run stopped for (`RunStopped`)

    def __repr__(self) -> str:
        return (
            f"AgentEngine(run_id={self.run_id!r}, state={self._state!r}, step={self.memory.step}, "
            f"store={self.store!r})"
        )
