"""The exported names are exactly the intended ones, and public types have helpful reprs."""

from __future__ import annotations

import agentsm
import eventstore
import replay
from agentsm import (
    AgentBuilder,
    AgentConfig,
    Event,
    LlmResponse,
    MockLlmCaller,
    State,
    TokenBudget,
    TokenUsage,
    ToolCall,
    build_transition_table,
)

CONTRACT = {
    "AgentBuilder",
    "AgentEngine",
    "AgentMemory",
    "AgentConfig",
    "State",
    "Event",
    "ToolCall",
    "HistoryEntry",
    "LlmResponse",
    "ToolRegistry",
    "tool",
    "LlmCaller",
    "MockLlmCaller",
    "Trace",
    "TraceEntry",
    "build_transition_table",
    "TransitionTable",
    "AgentError",
    "BuildError",
    "InvalidTransition",
    "NoHandlerForState",
    "SafetyCapExceeded",
    "AgentFailed",
    "TokenUsage",
    "TokenBudget",
    "ParentCall",
    "SubAgentTool",
}


def _isort_style(name: str) -> tuple[int, str]:
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


def test_contract_names_are_exported_and_all_is_sorted() -> None:
    assert CONTRACT <= set(agentsm.__all__)
    assert {"Skill", "SkillSet", "ContextEstimate", "estimate_request"} <= set(agentsm.__all__)
    assert {"McpServer", "McpServerSpec", "McpServerUnavailable"} <= set(agentsm.__all__)
    assert {"replay_run", "branch_run", "resume_run", "memory_at", "assert_replays"} <= set(
        replay.__all__
    )
    assert {"best_of", "Variant", "LlmJudge", "BestOf", "judgements", "ChoiceRefused"} <= set(
        replay.__all__
    )
    for module in (agentsm, eventstore, replay):
        assert module.__all__ == sorted(module.__all__, key=_isort_style)
        for name in module.__all__:
            assert hasattr(module, name), name
    assert "SQLiteEventStore" in eventstore.__all__


def test_state_and_event_values_are_the_specification_names() -> None:
    assert [s.value for s in State] == [
        "Idle",
        "Planning",
        "Acting",
        "ParallelActing",
        "WaitingForHuman",
        "Observing",
        "Reflecting",
        "Done",
        "Error",
    ]
    assert State("Planning") is State.Planning and State.Planning == "Planning"
    assert Event("LlmToolCall") is Event.LlmToolCall and Event("BudgetExceeded")
    assert State.Done.is_terminal() and not State.Planning.is_terminal()


def test_default_table_is_exactly_the_designed_rows() -> None:
    table = build_transition_table()
    assert len(table) == 29
    assert table[(State.Planning, Event.ContextFull)] == State.Reflecting
    assert table[(State.WaitingForHuman, Event.HumanApprovedBatch)] == State.ParallelActing
    assert all(src not in ("Done", "Error") for src, _ in table)
    mermaid = table.to_mermaid()
    assert mermaid.startswith("stateDiagram-v2") and "Planning --> Acting: LlmToolCall" in mermaid


def test_value_types() -> None:
    call = ToolCall(name="search", args={"q": "x"})
    assert call.id.startswith("call_") and ToolCall(name="a").id != ToolCall(name="a").id
    r = LlmResponse.tool_call("search", {"q": "x"}, 0.5, usage=TokenUsage(input_tokens=3))
    assert (r.calls[0].name, r.confidence, r.is_final) == ("search", 0.5, False)
    assert LlmResponse.tool_calls([call, call]).calls == (call, call)
    assert LlmResponse.final_answer("done").content == "done"
    assert (
        TokenUsage(input_tokens=1, output_tokens=2) + TokenUsage(input_tokens=3)
    ).total_tokens == 6
    assert TokenBudget(max_total_tokens=5).max_total_tokens == 5
    config = AgentConfig()
    assert (config.max_steps, config.max_retries, config.confidence_threshold) == (15, 3, 0.4)
    assert (config.reflect_every_n_steps, config.min_answer_length) == (5, 20)
    assert config.parallel_tools is True and config.models == {}


def test_reprs_say_what_the_object_is() -> None:
    engine = AgentBuilder("Find things").llm(MockLlmCaller([])).build()
    assert repr(engine).startswith("AgentEngine(run_id=")
    assert "step=0" in repr(engine.memory)
    assert repr(State.Planning) == "State.Planning" and repr(Event.Start) == "Event.Start"
    assert repr(LlmResponse.final_answer("hi")) == "LlmResponse.final_answer('hi')"
    assert "29 rows" in repr(build_transition_table())
    assert repr(MockLlmCaller([])) == "MockLlmCaller(served=0, remaining=0)"
    assert "Find things" in repr(AgentBuilder("Find things"))


def test_bedrock_caller_is_exported_and_loads_boto3_only_when_used() -> None:
    import subprocess
    import sys

    import agentsm.llm

    assert "BedrockCaller" in agentsm.llm.__all__ and "BedrockCaller" in agentsm.__all__
    assert agentsm.BedrockCaller is agentsm.llm.BedrockCaller
    script = (
        "import sys, agentsm, agentsm.llm\n"
        "assert 'boto3' not in sys.modules and 'botocore' not in sys.modules\n"
        "agentsm.llm.BedrockCaller\n"
        "assert 'boto3' not in sys.modules  # built callers load it on first call\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)


def test_openai_and_azure_callers_are_exported_from_both_packages() -> None:
    import agentsm.llm

    for name in (
        "OpenAiCaller",
        "OpenAiResponsesCaller",
        "AzureOpenAiCaller",
        "AzureOpenAiResponsesCaller",
    ):
        assert name in agentsm.llm.__all__ and name in agentsm.__all__
        assert getattr(agentsm, name) is getattr(agentsm.llm, name)
    assert issubclass(agentsm.AzureOpenAiCaller, agentsm.OpenAiCaller)
    assert issubclass(agentsm.AzureOpenAiResponsesCaller, agentsm.OpenAiResponsesCaller)


def test_gemini_caller_is_exported_and_loads_google_genai_only_when_used() -> None:
    import subprocess
    import sys

    import agentsm.llm

    assert "GeminiCaller" in agentsm.llm.__all__ and "GeminiCaller" in agentsm.__all__
    assert agentsm.GeminiCaller is agentsm.llm.GeminiCaller
    script = (
        "import sys, agentsm, agentsm.llm\n"
        "agentsm.llm.GeminiCaller\n"
        "assert 'google.genai' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)
