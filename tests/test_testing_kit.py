"""agentsm.testing on our own engine: static checks, generated runs, stateful testing, and
planted mistakes that the kit must catch and report clearly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from agentsm import AgentBuilder, Event, MockLlmCaller, RunContext, State, build_transition_table
from agentsm import facts as f
from agentsm.memory import AgentMemory
from agentsm.reducing import reduce_fact
from agentsm.states import ObservingState
from agentsm.testing import (
    AgentMachine,
    AgentRun,
    ToolBehaviour,
    agent_runs,
    check_table,
    llm_scripts,
    load_profile,
    sample_agent,
)
from eventstore import SQLiteEventStore

from .scenarios import base

HUNT = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
    phases=[p for p in Phase if p is not Phase.explain],
)


# -- static checks ----------------------------------------------------------------------------


def test_default_table_passes() -> None:
    report = check_table(build_transition_table())
    assert report.ok and str(report) == "table ok: 29 rows, 9 states, no problems"


class VerifyingState:
    """A custom state between Observing and Planning: checks the last observation."""

    name = "Verifying"
    emits = frozenset({"Verified", "Doubtful"})

    async def handle(self, ctx: RunContext) -> str:
        last = ctx.memory.history[-1] if ctx.memory.history else None
        return "Verified" if last is None or last.success else "Doubtful"


def verifying_table() -> Any:
    return (
        build_transition_table()
        .without_rows(("Observing", "Continue"))
        .with_rows(
            {
                ("Observing", "Continue"): "Verifying",
                ("Verifying", "Verified"): "Planning",
                ("Verifying", "Doubtful"): "Planning",
            }
        )
    )


def verifying_agent(task: str) -> AgentBuilder:
    return sample_agent(task).transitions(verifying_table()).handler("Verifying", VerifyingState())


def test_custom_table_with_a_verifying_state_passes() -> None:
    report = check_table(verifying_table(), {"Verifying": VerifyingState()})
    assert report.ok, str(report)


def test_a_dead_end_state_is_reported() -> None:
    table = verifying_table().without_rows(("Verifying", "Verified"), ("Verifying", "Doubtful"))
    table = table.with_rows({("Verifying", "Verified"): "Verifying"})
    report = check_table(table, {"Verifying": VerifyingState()})
    assert not report.ok
    dead = [p for p in report.problems if p.kind == "dead-end"]
    assert [p.states for p in dead] == [("Verifying",)]
    assert "state Verifying can never reach Done or Error" in str(report)
    missing = [p for p in report.problems if p.kind == "missing-row"]
    assert [(p.states, p.events) for p in missing] == [(("Verifying",), ("Doubtful",))]


def test_a_missing_row_for_a_handler_event_is_reported() -> None:
    table = build_transition_table().without_rows(("Planning", "BudgetExceeded"))
    report = check_table(table)
    assert [str(p) for p in report.problems] == [
        "[missing-row] the handler of Planning can return BudgetExceeded, but the table has no "
        "row (Planning, BudgetExceeded); the run would stop with InvalidTransition"
    ]


def test_unreachable_states_handlers_and_terminal_rows_are_reported() -> None:
    rows = dict(build_transition_table())
    rows[("Done", "Start")] = "Planning"
    rows[("Auditing", "Audited")] = "Done"
    report = check_table(rows)
    kinds = {p.kind: p for p in report.problems}
    assert set(kinds) == {"leaves-terminal", "unreachable", "no-handler"}
    assert "Auditing cannot be reached from Idle" in str(kinds["unreachable"])
    assert "AgentBuilder.handler('Auditing', ...)" in str(kinds["no-handler"])


# -- generated runs ---------------------------------------------------------------------------


@given(agent_runs())
def test_generated_runs_of_the_sample_agent_keep_every_invariant(run: AgentRun) -> None:
    run.assert_invariants()


@given(agent_runs(builder=verifying_agent))
def test_generated_runs_of_a_custom_table_keep_every_invariant(run: AgentRun) -> None:
    run.assert_invariants()


@given(agent_runs(builder=lambda task: base(task, [])))
def test_generated_runs_of_a_user_agent_keep_every_invariant(run: AgentRun) -> None:
    run.assert_invariants()


RAN: list[str] = []


def recording_agent(task: str) -> AgentBuilder:
    def send(args: dict[str, Any]) -> str:
        RAN.append(str(args))  # a real effect: generated runs must never cause it
        return "sent"

    schema = {"type": "object", "properties": {"to": {"type": "string"}}}
    return AgentBuilder(task).tool("send", "Send a message", schema, send)


@given(agent_runs(builder=recording_agent))
def test_generated_runs_never_run_the_users_real_tools(run: AgentRun) -> None:
    run.assert_invariants()
    assert RAN == []


@given(llm_scripts(["lookup"]))
def test_scripts_use_the_tools_they_are_given(script: list[Any]) -> None:
    names = {c.name for r in script if hasattr(r, "calls") for c in r.calls}
    assert names <= {"lookup", "no_such_tool"}


TestDefaultAgentMachine = AgentMachine.for_builder(sample_agent).TestCase
TestDefaultAgentMachine.settings = settings(
    max_examples=10,
    stateful_step_count=12,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


# -- planted mistakes -------------------------------------------------------------------------


def test_a_handler_that_records_a_fact_it_does_not_own_is_caught() -> None:
    class SneakyObserving(ObservingState):
        async def handle(self, ctx: RunContext) -> str:
            ctx.record(f.FinalAnswerProduced(content="decided while observing"))
            return await super().handle(ctx)

    def sneaky(task: str) -> AgentBuilder:
        return sample_agent(task).handler(State.Observing, SneakyObserving())

    @settings(HUNT, phases=[Phase.explicit, Phase.generate])  # found at once: no need to shrink
    @given(agent_runs(builder=sneaky))
    def prop(run: AgentRun) -> None:
        run.assert_invariants()

    with pytest.raises(AssertionError) as info:
        prop()
    assert "Observing recorded FinalAnswerProduced, which only Planning may record" in str(
        info.value
    )


def test_a_reducer_that_drops_a_field_is_caught_and_shrunk() -> None:
    real = reduce_fact.dispatch(f.LlmResponded)

    def forgetful(fact: f.LlmResponded, memory: AgentMemory) -> AgentMemory:
        kept = memory.model_dump(exclude={"history"})  # the planted bug: history is dropped
        return real(fact, AgentMemory.model_validate(kept))

    quick = st.sampled_from([ToolBehaviour("success", "ok"), ToolBehaviour("exception", "x")])

    @HUNT
    @given(agent_runs(behaviours=quick, max_script=6))
    def prop(run: AgentRun) -> None:
        run.assert_invariants()

    reduce_fact.register(f.LlmResponded)(forgetful)
    try:
        with pytest.raises(AssertionError) as info:
            prop()
        message = str(info.value)
        source = message.split("reproduce with:\n", 1)[1]
        namespace: dict[str, Any] = {}
        with pytest.raises(AssertionError, match="history shrank"):
            exec(source, namespace)  # the printed Python reproduces the failure
    finally:
        reduce_fact.register(f.LlmResponded)(real)
    assert "history shrank or changed outside Reflecting" in message
    assert source.startswith("from agentsm import") and "run_inputs(" in source
    script = source.split("script=[", 1)[1].split("    ],", 1)[0]
    assert script.count("LlmResponse") <= 3  # shrunk: a tool call, then another LLM call
    exec(source.replace("run.assert_invariants()", "run.assert_invariants()\nok = True"), namespace)
    assert namespace["ok"]  # and passes once the bug is gone


def test_profiles_are_chosen_by_an_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    in_use = os.environ.get("AGENTSM_HYPOTHESIS_PROFILE", "agentsm-fast")
    monkeypatch.setenv("AGENTSM_HYPOTHESIS_PROFILE", "agentsm-thorough")
    assert load_profile() == "agentsm-thorough"
    assert settings.default.max_examples == 1000
    monkeypatch.setenv("AGENTSM_HYPOTHESIS_PROFILE", "agentsm-fast")
    assert load_profile() == "agentsm-fast" and settings.default.max_examples == 25
    load_profile(in_use)  # the rest of the suite keeps the profile it was started with


SETTINGS_SEEN = """
import sys
from pathlib import Path
from hypothesis import settings
if len(sys.argv) > 1:
    settings.register_profile("mine", max_examples=7)
    settings.load_profile("mine")
from agentsm import AgentBuilder
from agentsm.testing import AgentMachine

def make_agent(task):
    return AgentBuilder(task).tool("echo", "Echo", {"type": "object"}, lambda args: args)

case = AgentMachine.for_builder(make_agent).TestCase.settings
print(settings.default.max_examples, case.max_examples, case.stateful_step_count)
"""


def _settings_seen(env: dict[str, str], *args: str) -> list[int]:
    env = {k: v for k, v in os.environ.items() if k != "AGENTSM_HYPOTHESIS_PROFILE"} | env
    out = subprocess.run(
        [sys.executable, "-c", SETTINGS_SEEN, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return [int(x) for x in out.stdout.split()]


def test_the_fast_profile_applies_on_import_without_a_call() -> None:
    assert _settings_seen({}) == [25, 25, 10]  # the stateful test too: hypothesis says 100 x 50


def test_the_thorough_profile_is_one_environment_variable_away() -> None:
    thorough = {"AGENTSM_HYPOTHESIS_PROFILE": "agentsm-thorough"}
    assert _settings_seen(thorough) == [1000, 1000, 40]


def test_a_profile_of_your_own_stays_in_force() -> None:
    assert _settings_seen({}, "mine") == [7, 7, 50]


def test_replay_property_catches_nondeterminism() -> None:
    from agentsm.testing import run_inputs
    from agentsm.types import AgentConfig, LlmResponse

    calls = iter(range(100))

    class Flaky(ObservingState):
        async def handle(self, ctx: RunContext) -> str:
            return Event.NeedsReflection if next(calls) % 2 else Event.Continue

    run = run_inputs(
        [LlmResponse.tool_call("ping", {}), LlmResponse.final_answer("A complete answer here.")],
        AgentConfig(),
        {},
        [],
        None,
        builder=lambda t: sample_agent(t).handler("Observing", Flaky()),
    )
    assert any("does not replay identical" in p for p in run.violations())


# -- handlers' events are checked, not trusted --------------------------------------------------


def verify_quickly(ctx: RunContext) -> str:
    """A function handler (it declares no emits): it returns an event the table lacks."""
    failed = any(not e.success for e in ctx.memory.history)
    return "Skipped" if failed else "Verified"


def skipping_agent(task: str) -> AgentBuilder:
    return sample_agent(task).transitions(verifying_table()).handler("Verifying", verify_quickly)


class UnderDeclaredVerifying(VerifyingState):
    """Returns Doubtful, which has a row, but declares only Verified."""

    emits = frozenset({"Verified"})


def under_declared_agent(task: str) -> AgentBuilder:
    return (
        sample_agent(task)
        .transitions(verifying_table())
        .handler("Verifying", UnderDeclaredVerifying())
    )


FIND = settings(HUNT, max_examples=200, phases=[Phase.explicit, Phase.generate])
FAILING_TOOLS = st.sampled_from([ToolBehaviour("exception", "x"), ToolBehaviour("success", "ok")])


def test_check_table_names_the_handlers_it_could_not_check() -> None:
    report = check_table(verifying_table(), {"Verifying": verify_quickly})
    assert report.unchecked == ("Verifying",)
    assert "not checked statically: the handler of Verifying declares no emits" in str(report)
    built = (
        skipping_agent("t").llm(MockLlmCaller([])).build()
    )  # the builder's function handler declares none either
    assert check_table(built.table, built.handlers).unchecked == ("Verifying",)
    assert check_table(verifying_table(), {"Verifying": VerifyingState()}).unchecked == ()


def test_an_event_with_no_row_is_named_by_state_and_event() -> None:
    @FIND
    @given(agent_runs(builder=skipping_agent, behaviours=FAILING_TOOLS))
    def prop(run: AgentRun) -> None:
        run.assert_invariants()

    with pytest.raises(AssertionError) as info:
        prop()
    assert (
        "the handler of Verifying returned Skipped, but the table has no row "
        "(Verifying, Skipped)" in str(info.value)
    )


def test_an_event_missing_from_the_declared_emits_is_named() -> None:
    assert check_table(verifying_table(), {"Verifying": UnderDeclaredVerifying()}).ok

    @FIND
    @given(agent_runs(builder=under_declared_agent, behaviours=FAILING_TOOLS))
    def prop(run: AgentRun) -> None:
        run.assert_invariants()

    with pytest.raises(AssertionError) as info:
        prop()
    assert (
        "the handler of Verifying returned Doubtful, which its declared emits (Verified) "
        "does not list" in str(info.value)
    )


def test_the_stateful_machine_checks_returned_events_too() -> None:
    machine = AgentMachine.for_builder(skipping_agent)
    machine.TestCase.settings = settings(FIND, stateful_step_count=8)
    with pytest.raises(AssertionError, match="the handler of Verifying returned Skipped"):
        machine.TestCase().runTest()


# -- a shrunk failure reproduces as pasted, and its run can be saved --------------------------


def test_a_shrunk_failure_prints_the_users_builder_and_its_run_can_be_saved(
    tmp_path: Path,
) -> None:
    @settings(HUNT, max_examples=200)
    @given(agent_runs(builder=skipping_agent, behaviours=FAILING_TOOLS, max_script=6))
    def prop(run: AgentRun) -> None:
        run.assert_invariants()

    with pytest.raises(AssertionError) as info:
        prop()
    source = str(info.value).split("reproduce with:\n", 1)[1]
    assert "from tests.test_testing_kit import skipping_agent\n" in source
    assert "builder=skipping_agent,  # --builder tests.test_testing_kit:skipping_agent" in source
    namespace: dict[str, Any] = {}
    with pytest.raises(AssertionError, match="the handler of Verifying returned Skipped"):
        exec(source, namespace)  # pasted as printed, it fails the same way
    run: AgentRun = namespace["run"]

    db = tmp_path / "failing-run.db"
    run_id = run.save(db)
    saved = SQLiteEventStore(db, create=False)
    assert [e.payload for e in saved.read(run_id)] == [
        e.payload for e in run.engine.store.read(run_id)
    ]
    assert saved.run(run_id).status == run.engine.store.run(run_id).status
    saved.close()
    shown = subprocess.run(
        [sys.executable, "-m", "replay", "show", run_id, "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    assert "Skipped" in shown.stdout


def test_a_factory_that_cannot_be_imported_is_said_so() -> None:
    from agentsm.testing.reproduce import python_of
    from agentsm.types import AgentConfig

    def local_agent(task: str) -> AgentBuilder:
        return sample_agent(task)

    local = python_of([], AgentConfig(), {}, [], None, local_agent)
    assert "builder=local_agent,  # defined where it cannot be imported" in local
    unnamed = python_of([], AgentConfig(), {}, [], None, lambda t: sample_agent(t))
    assert "builder=YOUR_FACTORY,  # a <lambda>" in unnamed
    assert "define it as a module-level function" in unnamed


def test_a_recorded_sub_agent_run_runs_again_as_the_child_agent(tmp_path: Path) -> None:
    from agentsm.testing import run_recorded

    from .subagent_agent import CHILD_PROMPT, make_agent

    db = tmp_path / "family.db"
    make_agent("Find it").store(str(db)).run_id("p1").build().run()
    run = run_recorded(str(db), "p1-1-0", [], builder=make_agent)  # the parent's builder
    assert run.engine.memory.system_prompt.startswith(CHILD_PROMPT)  # not the parent's agent
    assert run.engine.memory.history[0].observation == "SUCCESS: noted Find it (part 1)"
    run.assert_invariants()
