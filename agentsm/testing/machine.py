"""AgentMachine: hypothesis stateful testing that feeds a live engine one LLM answer at a time
and checks the invariants after every step."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from .._sync import run_sync
from ..builder import AgentBuilder
from ..errors import EngineError
from ..llm.mock import MockLlmCaller
from ..types import AgentConfig, State
from .runs import AgentRun, Observation
from .strategies import llm_responses, sample_agent
from .watch import watch_handlers

__all__ = ["AgentMachine"]

_ASKS_LLM = (State.Planning, State.Reflecting)


class AgentMachine(RuleBasedStateMachine):
    """Each rule gives the running agent its next LLM answer; the engine then runs until it
    needs another (or ends), and every invariant is checked. Use
    `AgentMachine.for_builder(make_agent).TestCase` in a test module."""

    make: ClassVar[Callable[[str], AgentBuilder]] = staticmethod(sample_agent)
    config: ClassVar[AgentConfig] = AgentConfig(
        max_steps=10, reflect_every_n_steps=3, min_answer_length=5, tool_timeout=0.5
    )

    def __init__(self) -> None:
        super().__init__()
        self.llm = MockLlmCaller([])
        agent = type(self).make("a stateful task").config(type(self).config).llm(self.llm)
        agent.on_approval(lambda request: True)
        self.engine = agent.build()
        self.returned = watch_handlers(self.engine)
        self.observed: list[Observation] = []
        self.engine.observe(
            lambda seq, state, fact, memory: self.observed.append(
                Observation(seq, state, fact, memory)
            )
        )
        self.escaped: BaseException | None = None
        self._advance()

    @classmethod
    def for_builder(cls, make: Callable[[str], AgentBuilder]) -> type[AgentMachine]:
        """A machine for your agent: its tools, table, handlers and prompts."""
        names = make("a stateful task").tools.names()

        class Machine(cls):  # type: ignore[misc,valid-type]
            @rule(response=llm_responses(names))
            def respond(self, response: Any) -> None:
                self.llm.push(response)
                self._advance()

        Machine.make = staticmethod(make)
        Machine.__name__ = Machine.__qualname__ = f"{cls.__name__}For_{make.__name__}"
        return Machine

    def _finished(self) -> bool:
        return self.engine.finished

    def _advance(self) -> None:
        while not self._finished() and self.escaped is None:
            state = self.engine.current_state()
            if state in _ASKS_LLM and self.llm.remaining() == 0:
                return
            before = self.engine.seq
            try:
                run_sync(self.engine.run_until(before + 1))
            except EngineError:
                return
            except Exception as e:
                self.escaped = e
                return
            if self.engine.seq == before:  # waiting for a human: nothing more happens
                return

    def _run(self) -> AgentRun:
        outcome = "done" if self._finished() else "waiting"
        kind = type(self)
        return AgentRun(
            self.engine,
            list(self.observed),
            outcome,
            self.escaped,
            replay_builder=lambda task: kind.make(task).config(kind.config),  # its own states
            returned=list(self.returned),
        )

    @invariant()
    def keeps_the_invariants(self) -> None:
        problems = [
            p
            for p in self._run().violations(replay=False)  # replayed once, at the end
            if not p.startswith(("the run ended in", "the run says it waits", "the run does not"))
        ]
        assert not problems, "\n".join(problems)

    def teardown(self) -> None:
        if self._finished() and self.escaped is None:
            self._run().assert_invariants()
