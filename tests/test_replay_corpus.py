"""A regenerated corpus of varied runs: single and parallel calls, approvals given one call at a
time (durably, in the LLM's order or the last call first, and by a callback that stops
halfway), processes dying in tools and LLM calls, resumes, branches of branches, and call ids
as providers really give them (unique, `call_0` in every response, one id twice in a
response). Every unchanged run must replay identical, with the tools served and with the tools
run again."""

from __future__ import annotations

import random
import warnings
from pathlib import Path
from typing import Any

import pytest

from agentsm import (
    AgentBuilder,
    AgentConfig,
    AgentFailed,
    HumanInputRequired,
    LlmResponse,
    ToolCall,
    tool,
)
from agentsm.trace import Trace
from eventstore import SQLiteEventStore
from replay import replay_run
from replay.branching import branch_run
from replay.resuming import decide, pending_requests, resume_run

RUNS = 36
ANSWER = "All done: every step of the task was carried out."


class ProcessDied(BaseException):
    """Stands for the process being killed inside an effect."""


class Plan:
    """One generated run: what the LLM asks at each step, how ids are given, where the process
    dies, and how humans answer."""

    def __init__(self, rng: random.Random, n: int) -> None:
        self.ids = ("unique", "call_0", "duplicate")[n % 3]
        self.parallel = rng.random() < 0.6
        self.steps = [
            [
                (rng.choice(["lookup", "lookup", "pay", "ping", "transfer"]), rng.randrange(4))
                for _ in range(rng.choice([1, 1, 2, 3]))
            ]
            for _ in range(rng.randrange(1, 4))
        ]
        self.tool_crash = rng.choice([None, None, 1, 2, 3])
        self.llm_crash = rng.choice([None, None, None, 2, 3])
        self.callback = rng.random() < 0.4
        self.verdicts = [
            rng.choice(["approved", "approved", "rejected", "modified"]) for _ in range(20)
        ]
        self.last_first = n // 3 % 2 == 1  # humans decide the last waiting call first
        self.armed = True
        self.tool_runs = 0
        self.llm_calls = 0

    def calls(self, step: int) -> list[ToolCall]:
        made = []
        for i, (name, arg) in enumerate(self.steps[step]):
            args: dict[str, Any] = {"key": f"k{arg}"} if name == "lookup" else {}
            if name in ("pay", "transfer"):
                args = {"amount": arg + 1}
            if self.ids == "unique":
                call_id = f"s{step}c{i}"
            elif self.ids == "call_0":
                call_id = f"call_{i}"
            else:
                call_id = "dup"
            made.append(ToolCall(name=name, args=args, id=call_id))
        return made

    def dies(self, what: str) -> None:
        if what == "tool":
            self.tool_runs += 1
            if self.armed and self.tool_runs == self.tool_crash:
                self.armed = False
                raise ProcessDied()
        else:
            self.llm_calls += 1
            if self.armed and self.llm_calls == self.llm_crash:
                self.armed = False
                raise ProcessDied()


def make_agent(plan: Plan) -> Any:
    def make(task: str) -> AgentBuilder:
        @tool
        def lookup(key: str) -> str:
            """Look a key up."""
            return f"value of {key}"

        @tool
        async def pay(amount: int) -> str:
            """Pay (not idempotent)."""
            plan.dies("tool")
            return f"paid {amount}"

        @tool(idempotent=True)
        async def ping() -> str:
            """Ping (idempotent)."""
            plan.dies("tool")
            return "pong"

        @tool
        async def transfer(amount: int) -> str:
            """Move money (needs approval)."""
            plan.dies("tool")
            return f"sent {amount}"

        class Llm:
            async def call(self, memory: Any, tools: Any, model: str) -> LlmResponse:
                plan.dies("llm")
                step = len({e.step for e in memory.history})
                if step >= len(plan.steps):
                    return LlmResponse.final_answer(ANSWER)
                return LlmResponse.tool_calls(plan.calls(step))

        builder = (
            AgentBuilder(task)
            .llm(Llm())
            .config(AgentConfig(parallel_tools=plan.parallel, reflect_every_n_steps=0))
            .tool(lookup)
            .tool(pay)
            .tool(ping)
            .tool(transfer)
            .require_approval("transfer")
        )
        if plan.callback:  # approves the first waiting call, leaves the others to a human
            builder.on_approval(lambda request: True if request.index == 0 else None)
        return builder

    return make


def drive(db: Path, run_id: str, plan: Plan) -> None:
    """Run, and whenever it stops (a dead process, a question for a human) answer one waiting
    call at a time (the first or the last, as planned) and resume, until it ends."""
    make = make_agent(plan)
    verdicts = iter(plan.verdicts)
    started = False
    for _ in range(40):
        try:
            if not started:
                started = True
                make("corpus").store(db).run_id(run_id).build().run()
            else:
                resume_run(db, run_id, make)
            return
        except ProcessDied:
            continue
        except AgentFailed:
            return
        except HumanInputRequired:
            for _ in pending_requests(db, run_id):
                waiting = pending_requests(db, run_id)
                number = len(waiting) if plan.last_first else 1
                verdict = next(verdicts, "approved")
                args = {"amount": 99} if verdict == "modified" else None
                if verdict == "modified" and waiting[number - 1].call.name != "transfer":
                    verdict, args = "approved", None
                decide(db, run_id, verdict, call_id=f"#{number}", args=args)  # type: ignore[arg-type]
    raise AssertionError(f"run {run_id} did not end")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Plan]]:
    db = tmp_path_factory.mktemp("corpus") / "runs.db"
    rng = random.Random(20261122)
    plans: dict[str, Plan] = {}
    for n in range(RUNS):
        plan = Plan(rng, n)
        run_id = f"run{n:02d}"
        drive(db, run_id, plan)
        plan.armed = False
        plans[run_id] = plan
    store = SQLiteEventStore(db)
    for n, run_id in enumerate(list(plans)[::3]):  # branches, and branches of branches
        parent = run_id
        for depth in range(2):
            last = store.run(parent).last_seq
            at = rng.randrange(2, last + 1)
            change: dict[str, Any] = [
                {"llm_response": LlmResponse.final_answer("A different answer, from a branch.")},
                {"tool_result": "a result set by the branch"},
                {"config": AgentConfig(max_steps=9, reflect_every_n_steps=0)},
                {},
            ][(n + depth) % 4]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # an unused change is reported, not an error
                child = branch_run(
                    db,
                    parent,
                    at,
                    builder=make_agent(plans[run_id]),
                    new_run_id=f"{parent}-b",
                    **change,
                ).run_id
            plans[child] = plans[run_id]
            parent = child
    return db, plans


def test_the_corpus_has_the_variety_it_claims(corpus: tuple[Path, dict[str, Plan]]) -> None:
    db, plans = corpus
    store = SQLiteEventStore(db)
    kinds: dict[str, int] = {}
    resumed = waited = reused = out_of_order = 0
    for run_id in plans:
        trace = Trace.load(store, run_id)
        for e in trace:
            kinds[e.event] = kinds.get(e.event, 0) + 1
        requested = [e for e in trace if e.event == "LlmRequested"]
        answered = [e for e in trace if e.event in ("LlmResponded", "LlmFailed")]
        resumed += len(requested) > len(answered)
        waited += sum(1 for e in trace if e.event == "HumanDecided") > 1
        ids = [c.id for e in trace if e.event == "ToolCallsPlanned" for c in e.fact.calls]
        reused += len(ids) > len(set(ids))
        decided: list[int | None] = []  # positions decided in this step, in the order decided
        for e in trace:
            if e.event == "ToolCallsPlanned":
                decided = []
            for d in getattr(e.fact, "decisions", ()):
                out_of_order += bool(decided) and (decided[-1] or 0) > (d.index or 0)
                decided.append(d.index)
    assert kinds.get("RunBranched", 0) >= 20
    assert kinds.get("ToolCallStarted", 0) > kinds.get("ToolExecuted", 0)  # deaths in tools
    assert resumed >= 3 and waited >= 5 and reused >= 12 and out_of_order >= 3
    verdicts = {
        d.verdict
        for run_id in plans
        for e in Trace.load(store, run_id)
        for d in getattr(e.fact, "decisions", ())
    }
    assert verdicts == {"approved", "rejected", "modified"}


@pytest.mark.parametrize("execute_tools", [False, True])
def test_every_unchanged_run_of_the_corpus_replays_identical(
    corpus: tuple[Path, dict[str, Plan]], execute_tools: bool
) -> None:
    db, plans = corpus
    different = []
    for run_id, plan in plans.items():
        report = replay_run(db, run_id, make_agent(plan), execute_tools=execute_tools)
        if not report.identical:
            different.append(str(report))
    assert not different, f"{len(different)} of {len(plans)} runs differ:\n" + "\n".join(
        different[:3]
    )
