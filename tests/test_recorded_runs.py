"""agentsm.testing.from_recorded: runs recorded here by the real engine, mutated the way real
traffic nearly goes, run again and checked against the invariants."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from agentsm import (
    AgentBuilder,
    LlmResponse,
    MockLlmCaller,
    RunContext,
    TokenUsage,
    ToolCall,
    build_transition_table,
    tool,
)
from agentsm.errors import BuildError
from agentsm.testing import (
    MUTATIONS,
    AgentRun,
    Mutation,
    Recorded,
    from_recorded,
    recorded_runs,
    run_recorded,
)

QUICK = settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
)


@tool
def weather(city: str) -> str:
    """Today's weather in a city."""
    return {"Paris": "18 C, cloudy", "Oslo": "4 C, snow"}.get(city, "unknown city")


@tool
def convert(celsius: float) -> str:
    """Celsius to Fahrenheit."""
    return f"{celsius * 9 / 5 + 32:.0f} F"


def weather_agent(task: str) -> AgentBuilder:
    return AgentBuilder(task).tool(weather).tool(convert).require_approval("convert")


def checked_on_success(ctx: RunContext) -> str:
    """A Verifying step whose author forgot the tool that fails: it returns Recheck, which
    the table lacks, but only after a failed call, which the recorded traffic never had."""
    return "Recheck" if any(not e.success for e in ctx.memory.history) else "Verified"


def verifying_agent(task: str) -> AgentBuilder:
    table = (
        build_transition_table()
        .without_rows(("Observing", "Continue"))
        .with_rows({("Observing", "Continue"): "Verifying", ("Verifying", "Verified"): "Planning"})
    )
    return weather_agent(task).transitions(table).handler("Verifying", checked_on_success)


USAGE = TokenUsage(input_tokens=120, output_tokens=30)
SCRIPTS: list[tuple[list[Any], Any]] = [
    (
        [
            LlmResponse.tool_call("weather", {"city": "Paris"}, usage=USAGE),
            LlmResponse.final_answer("Paris: 18 C and cloudy today.", usage=USAGE),
        ],
        True,
    ),
    (
        [
            LlmResponse.tool_calls(
                [
                    ToolCall(name="weather", args={"city": "Paris"}),
                    ToolCall(name="weather", args={"city": "Oslo"}),
                ],
                usage=USAGE,
            ),
            LlmResponse.tool_call("convert", {"celsius": 4}, usage=USAGE),
            LlmResponse.final_answer("Oslo is colder: 39 F against 18 C in Paris.", usage=USAGE),
        ],
        {"celsius": 4.0},  # the human corrects the arguments
    ),
    (
        [
            LlmResponse.tool_call("convert", {"celsius": 18}, usage=USAGE),
            LlmResponse.final_answer("Rejected; 18 C it stays.", usage=USAGE),
        ],
        False,
    ),
]


def record(db: Path, make: Any, scripts: list[tuple[list[Any], Any]] = SCRIPTS) -> list[str]:
    """Runs of `make` recorded into `db`, as production would record them."""
    ids = []
    for i, (script, decision) in enumerate(scripts):
        agent = make(f"weather question {i}").llm(MockLlmCaller(script)).store(str(db))
        engine = agent.on_approval(lambda request, d=decision: d).build()
        engine.run()
        ids.append(engine.run_id)
    return ids


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("corpus") / "production.db"
    record(db, weather_agent)
    return db


@pytest.fixture(scope="module")
def verifying_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("corpus") / "verifying.db"
    record(db, verifying_agent, SCRIPTS[:2])  # no rejected call: no failure was ever seen
    return db


def test_a_recorded_run_gives_back_its_inputs(corpus: Path) -> None:
    runs: list[Recorded] = recorded_runs(corpus)
    assert [len(r.script) for r in runs] == [2, 3, 2]
    assert [[x.call.name for x in r.results] for r in runs] == [
        ["weather"],
        ["weather", "weather", "convert"],
        [],
    ]
    assert [r.decisions for r in runs] == [(), ({"celsius": 4.0},), (False,)]


def test_a_recorded_run_without_mutations_runs_the_same(corpus: Path) -> None:
    for recorded in recorded_runs(corpus):
        run = run_recorded(corpus, recorded.run_id, builder=weather_agent)
        run.assert_invariants()
        again = [x for x in run.trace.facts() if x.kind == "ToolExecuted"]
        assert again == list(recorded.results)
        assert run.engine.memory.final_answer == recorded.script[-1].content


def test_each_mutation_changes_what_it_says(corpus: Path) -> None:
    two_calls = recorded_runs(corpus)[1]
    dropped = two_calls.mutated([Mutation("drop_call", at=0, index=0)])
    assert [c.args for c in dropped.script[0].calls] == [{"city": "Oslo"}]
    doubled = two_calls.mutated([Mutation("duplicate_call", at=0, index=1)])
    assert [c.args["city"] for c in doubled.script[0].calls] == ["Paris", "Oslo", "Oslo"]
    corrupt = two_calls.mutated([Mutation("corrupt_args", at=1, index=0, value={"celsius": "x"})])
    assert corrupt.script[1].calls[0].args == {"celsius": "x"}
    cut = two_calls.mutated([Mutation("truncate_answer", at=2, value=4)])
    assert cut.script[2].content == "Oslo"
    assert two_calls.mutated([Mutation("empty_answer", at=2)]).script[2].content == ""
    failed = two_calls.mutated([Mutation("tool_error", at=1, value="quota exceeded")])
    assert failed.results[1].observation == "ERROR: RuntimeError: quota exceeded"
    assert not failed.results[1].success and failed.results[0].success
    usage = two_calls.mutated([Mutation("change_usage", at=0, value=None)])
    assert usage.script[0].usage is None and usage.script[1].usage == USAGE
    unfit = two_calls.mutated([Mutation("drop_call", at=2), Mutation("empty_answer", at=0)])
    assert unfit.script == two_calls.script  # a mutation that does not fit changes nothing
    with pytest.raises(ValueError, match="Unknown mutation 'shuffle'; use one of: drop_call"):
        Mutation("shuffle")
    assert set(MUTATIONS) == {
        "drop_call",
        "duplicate_call",
        "corrupt_args",
        "truncate_answer",
        "empty_answer",
        "tool_error",
        "change_usage",
    }


def test_mutated_runs_of_a_sound_agent_keep_every_invariant(corpus: Path) -> None:
    seen: set[str] = set()

    @QUICK
    @given(from_recorded(corpus, builder=weather_agent))
    def prop(run: AgentRun) -> None:
        seen.add(run.outcome)
        run.assert_invariants()

    prop()
    assert "done" in seen


def test_without_a_builder_the_recorded_tools_are_used(corpus: Path) -> None:
    @QUICK
    @given(from_recorded(corpus))
    def prop(run: AgentRun) -> None:
        run.assert_invariants()

    prop()


def test_a_bug_only_mutations_reach_is_caught_and_printed_to_paste(
    verifying_corpus: Path,
) -> None:
    for recorded in recorded_runs(verifying_corpus):  # the recorded traffic never hits it
        run_recorded(verifying_corpus, recorded.run_id, builder=verifying_agent).assert_invariants()

    @QUICK
    @given(from_recorded(verifying_corpus, builder=verifying_agent))
    def prop(run: AgentRun) -> None:
        run.assert_invariants()

    with pytest.raises(AssertionError) as info:
        prop()
    message = str(info.value)
    assert (
        "the handler of Verifying returned Recheck, but the table has no row "
        "(Verifying, Recheck)" in message
    )
    source = message.split("reproduce with:\n", 1)[1]
    assert "from tests.test_recorded_runs import verifying_agent" in source
    assert "[Mutation('" in source  # e.g. a tool error, or arguments the tool refuses
    with pytest.raises(AssertionError, match="returned Recheck"):
        exec(source, {})


def test_an_empty_log_is_refused_in_one_line(tmp_path: Path) -> None:
    from eventstore import SQLiteEventStore

    SQLiteEventStore(tmp_path / "empty.db").close()
    with pytest.raises(BuildError, match="No recorded runs in .* to start from"):
        from_recorded(tmp_path / "empty.db")
