"""What both provider callers share, through the official SDKs against a keep-alive loopback
server: long-lived callers, cut streams and mid-stream errors, retry-after, request settings."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from agentsm import (
    AgentBuilder,
    AgentConfig,
    AgentFailed,
    AgentOutput,
    BuildError,
    LlmDeadlineExceeded,
    LlmResponse,
    MockLlmCaller,
    TextDelta,
    TextRetracted,
)
from agentsm.llm import (
    AnthropicCaller,
    NetworkError,
    OpenAiCaller,
    Overloaded,
    ProviderCaller,
    RetryPolicy,
)
from agentsm.llm.errors import _retry_after

from .loopback import LoopbackProvider, fixture

PROVIDERS = ["openai", "anthropic"]
TEXT = {
    "openai": "openai/01_text_nonstream",
    "anthropic": "anthropic/04_tool_use_single_nonstream_turn2_final_text",
}
STREAM = {"openai": "openai/02_text_stream", "anthropic": "anthropic/02_text_stream"}
SSE = {"content-type": "text/event-stream; charset=utf-8"}


def make(provider: str, server: LoopbackProvider, **kwargs: Any) -> ProviderCaller:
    """A caller on the loopback server whose retry sleeps are recorded, not slept."""
    sleeps: list[float] = []

    async def no_wait(seconds: float) -> None:
        sleeps.append(seconds)

    policy = RetryPolicy(
        max_retries=kwargs.pop("max_retries", 2),
        max_delay=kwargs.pop("max_delay", 30.0),
        sleep=no_wait,
    )
    c: ProviderCaller
    if provider == "openai":
        c = OpenAiCaller(base_url=server.url + "/v1", api_key="sk-test", retry=policy, **kwargs)
    else:
        c = AnthropicCaller(base_url=server.url, api_key="sk-ant-test", retry=policy, **kwargs)
    c.sleeps = sleeps  # type: ignore[attr-defined]
    return c


def agent(c: ProviderCaller, task: str = "Say this is a test") -> AgentBuilder:
    return AgentBuilder(task).llm(c).config(AgentConfig(min_answer_length=1))


def shown_text(outputs: list[AgentOutput]) -> str:
    """What a consumer of engine.stream() shows: deltas appended, retracted text taken back."""
    shown = ""
    for output in outputs:
        if isinstance(output, TextDelta):
            shown += output.text
        elif isinstance(output, TextRetracted):
            assert shown.endswith(output.text)
            shown = shown[: len(shown) - len(output.text)]
    return shown


def stream_outputs(builder: AgentBuilder) -> list[AgentOutput]:
    engine = builder.build()

    async def collect() -> list[AgentOutput]:
        return [o async for o in engine.stream()]

    return asyncio.run(collect())


# -- one caller, many runs, many loops ----------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_one_caller_serves_many_sync_runs_each_on_its_own_loop(provider: str) -> None:
    with LoopbackProvider() as server:
        c = make(provider, server)
        answers = []
        for _ in range(3):
            server.serve_fixture(TEXT[provider])
            answers.append(agent(c).build().run())
        expected = agent(c).build()
        server.serve_fixture(TEXT[provider])
        asyncio.run(expected.arun())
    assert len(set(answers)) == 1 and answers[0] == expected.memory.final_answer
    assert len(server.requests) == 4


@pytest.mark.parametrize("provider", PROVIDERS)
def test_runs_on_one_loop_share_a_kept_alive_connection(provider: str) -> None:
    with LoopbackProvider() as server:
        c = make(provider, server)

        async def two_runs() -> None:
            for _ in range(2):
                server.serve_fixture(TEXT[provider])
                await agent(c).build().arun()
            await c.aclose()

        asyncio.run(two_runs())
        server.serve_fixture(TEXT[provider])
        agent(c).build().run()  # a later loop gets a client of its own
    ports = [r["port"] for r in server.requests]
    assert ports[0] == ports[1]  # the connection was kept alive and reused
    assert ports[2] != ports[1]  # ... and belonged to the loop that closed


@pytest.mark.parametrize("provider", PROVIDERS)
def test_one_caller_serves_runs_on_several_threads_at_once(provider: str) -> None:
    with LoopbackProvider() as server:
        c = make(provider, server)
        for _ in range(4):
            server.serve_fixture(TEXT[provider])
        answers: list[str] = []
        errors: list[BaseException] = []

        def run() -> None:
            try:
                answers.append(agent(c).build().run())
            except BaseException as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=run) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == [] and len(answers) == 4


# -- streams cut mid-answer, errors mid-stream ----------------------------------------------


def _cut_point(body: str, events: int) -> int:
    """The offset just before the `events`-th SSE event of a recorded stream."""
    at = -1
    for _ in range(events):
        at = body.index("\n\n", at + 1)
    return at + 2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_stream_cut_mid_answer_is_a_network_error_and_retried(provider: str) -> None:
    recorded = fixture(STREAM[provider])["response"]["body"]
    with LoopbackProvider() as server:
        server.serve_fixture(STREAM[provider], cut_after=_cut_point(recorded, 4))
        server.serve_fixture(STREAM[provider])
        c = make(provider, server, stream=True)
        outputs = stream_outputs(agent(c))
    engine_answer = "".join(o.text for o in outputs if isinstance(o, TextDelta))
    retracted = [o for o in outputs if isinstance(o, TextRetracted)]
    assert len(server.requests) == 2 and len(c.sleeps) == 1  # type: ignore[attr-defined]
    assert len(retracted) == 1 and "could not be reached" in retracted[0].reason
    assert engine_answer == retracted[0].text + shown_text(outputs)  # shown twice, retracted once
    final = [o for o in outputs if type(o).__name__ == "FinalAnswer"][0]
    assert shown_text(outputs) == final.content  # type: ignore[union-attr]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_plain_answer_cut_mid_body_is_retried(provider: str) -> None:
    with LoopbackProvider() as server:
        server.serve_fixture(TEXT[provider], cut_after=100)
        server.serve_fixture(TEXT[provider])
        c = make(provider, server)
        answer = agent(c).build().run()
    assert answer and len(server.requests) == 2 and len(c.sleeps) == 1  # type: ignore[attr-defined]


def test_an_overload_sent_mid_stream_after_200_is_retried() -> None:
    recorded = fixture("anthropic/02_text_stream")["response"]["body"]
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    broken = (
        recorded[: _cut_point(recorded, 4)] + f"event: error\ndata: {json.dumps(overloaded)}\n\n"
    )
    with LoopbackProvider() as server:
        server.serve(200, broken, SSE)
        server.serve_fixture("anthropic/02_text_stream")
        c = make("anthropic", server, stream=True)
        outputs = stream_outputs(agent(c))
        assert len(server.requests) == 2
        retracted = [o for o in outputs if isinstance(o, TextRetracted)]
        assert [r.text for r in retracted] == ["Hello"]
        assert "overloaded" in retracted[0].reason
        assert shown_text(outputs) == "Hello"
        server.serve(200, broken, SSE)
        with pytest.raises(Overloaded, match="overloaded"):
            asyncio.run(
                make("anthropic", server, stream=True, max_retries=0).call(
                    agent(c).build().memory, agent(c).tools, "m"
                )
            )


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_stream_cut_every_time_ends_as_a_network_error(provider: str) -> None:
    recorded = fixture(STREAM[provider])["response"]["body"]
    with LoopbackProvider() as server:
        for _ in range(2):
            server.serve_fixture(STREAM[provider], cut_after=_cut_point(recorded, 4))
        engine = agent(make(provider, server, stream=True, max_retries=1)).build()
        with pytest.raises(AgentFailed, match="NetworkError: .*could not be reached"):
            engine.run()
    failed = [e.fact for e in engine.trace() if e.event == "LlmFailed"][0]
    assert failed.error_type == "NetworkError"  # type: ignore[union-attr]
    assert isinstance(NetworkError("x"), Exception)


# -- retry-after ----------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_retry_after_longer_than_max_delay_ends_the_run_at_once(provider: str) -> None:
    limited = {"error": {"type": "rate_limit_error", "message": "Rate limit reached"}}
    with LoopbackProvider() as server:
        server.serve(429, limited, {"content-type": "application/json", "retry-after": "86400"})
        c = make(provider, server)
        engine = agent(c).build()
        with pytest.raises(AgentFailed, match="asked to wait 86400 s") as info:
            engine.run()
    assert len(server.requests) == 1 and c.sleeps == []  # type: ignore[attr-defined]
    assert "RateLimited" in info.value.error and "max_delay=30 s" in info.value.error


@pytest.mark.parametrize("provider", PROVIDERS)
def test_retry_after_ms_within_max_delay_is_waited_for(provider: str) -> None:
    limited = {"error": {"type": "rate_limit_error", "message": "Rate limit reached"}}
    with LoopbackProvider() as server:
        server.serve(429, limited, {"content-type": "application/json", "retry-after-ms": "1500"})
        server.serve(429, limited, {"content-type": "application/json", "retry-after": "2"})
        server.serve_fixture(TEXT[provider])
        c = make(provider, server)
        agent(c).build().run()
    assert c.sleeps == [1.5, 2.0]  # type: ignore[attr-defined]


def test_retry_after_as_an_http_date() -> None:
    assert _retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert _retry_after({"retry-after": "Fri, 01 Jan 2100 00:00:00 GMT"}) > 86400  # type: ignore[operator]
    assert _retry_after({"retry-after": "soon"}) is None


def test_real_sleeps_are_short_when_the_server_asks_for_little() -> None:
    with LoopbackProvider() as server:
        server.serve(
            503,
            {"error": {"message": "busy"}},
            {"content-type": "application/json", "retry-after-ms": "5"},
        )
        server.serve_fixture(TEXT["openai"])
        c = OpenAiCaller(
            base_url=server.url + "/v1", api_key="k", retry=RetryPolicy(max_delay=0.01)
        )
        assert agent(c).build().run() == "This is a test."


# -- request settings, served model, error wording ----------------------------------------


def test_openai_settings_reach_the_server_and_the_run_definition() -> None:
    with LoopbackProvider() as server:
        server.serve_fixture("openai/01_text_nonstream")
        c = OpenAiCaller(
            base_url=server.url + "/v1",
            api_key="k",
            temperature=0.2,
            seed=7,
            top_p=0.9,
            tool_choice="lookup",
            parallel_tool_calls=False,
            extra_body={"repetition_penalty": 1.1, "top_k": 20},
        )
        engine = agent(c).tool("lookup", "Look up.", {"type": "object"}, lambda a: "x").build()
        engine.run()
    sent = server.requests[0]["json"]
    assert (sent["temperature"], sent["seed"], sent["top_p"]) == (0.2, 7, 0.9)
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "lookup"}}
    assert sent["parallel_tool_calls"] is False
    assert (sent["repetition_penalty"], sent["top_k"]) == (1.1, 20)
    started = engine.trace()[0].fact
    assert started.llm == {  # type: ignore[union-attr]
        "provider": "OpenAI",
        "temperature": 0.2,
        "seed": 7,
        "top_p": 0.9,
        "tool_choice": "lookup",
        "parallel_tool_calls": False,
        "extra_body": {"repetition_penalty": 1.1, "top_k": 20},
    }
    response = [e.fact for e in engine.trace() if e.event == "LlmResponded"][0].response
    assert response.model == "gpt-4o-mini-2024-07-18"  # type: ignore[union-attr]
    assert response.system_fingerprint == "fp_0ba0d124f1"  # type: ignore[union-attr]


def test_anthropic_settings_reach_the_server_and_the_run_definition() -> None:
    with LoopbackProvider() as server:
        server.serve_fixture(TEXT["anthropic"])
        c = AnthropicCaller(
            base_url=server.url,
            api_key="k",
            max_tokens=100,
            temperature=0.3,
            top_k=5,
            tool_choice="required",
            parallel_tool_calls=False,
            extra_body={"metadata": {"user_id": "u1"}},
        )
        engine = agent(c).tool("lookup", "Look up.", {"type": "object"}, lambda a: "x").build()
        engine.run()
    sent = server.requests[0]["json"]
    assert (sent["temperature"], sent["top_k"], sent["max_tokens"]) == (0.3, 5, 100)
    assert sent["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert sent["metadata"] == {"user_id": "u1"}
    started = engine.trace()[0].fact
    assert started.llm["temperature"] == 0.3 and started.llm["provider"] == "Anthropic"  # type: ignore[union-attr]
    response = [e.fact for e in engine.trace() if e.event == "LlmResponded"][0].response
    assert response.model == "claude-haiku-4-5-20251001"  # type: ignore[union-attr]


def test_streamed_responses_record_the_served_model() -> None:
    with LoopbackProvider() as server:
        server.serve_fixture("openai/02_text_stream")
        server.serve_fixture("anthropic/02_text_stream")
        first = agent(make("openai", server, stream=True)).build()
        first.run()
        second = agent(make("anthropic", server, stream=True)).build()
        second.run()
    models = [
        [e.fact for e in engine.trace() if e.event == "LlmResponded"][0].response.model  # type: ignore[union-attr]
        for engine in (first, second)
    ]
    assert models == ["gpt-4-0613", "claude-haiku-4-5-20251001"]


def test_settings_without_tools_are_not_sent_and_bad_settings_are_refused() -> None:
    with LoopbackProvider() as server:
        server.serve_fixture("openai/01_text_nonstream")
        agent(make("openai", server, tool_choice="auto", parallel_tool_calls=True)).build().run()
    assert "tool_choice" not in server.requests[0]["json"]
    assert "parallel_tool_calls" not in server.requests[0]["json"]
    with pytest.raises(BuildError, match="extra_body must be a JSON object"):
        OpenAiCaller(extra_body={"x": float("nan")})
    with pytest.raises(BuildError, match="tool_choice=3"):
        OpenAiCaller(tool_choice=3)  # type: ignore[arg-type]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_errors_name_the_server_that_failed(provider: str) -> None:
    with LoopbackProvider() as server:
        server.serve(400, {"error": {"type": "invalid_request_error", "message": "bad field"}})
        c = make(provider, server)
        with pytest.raises(AgentFailed) as info:
            agent(c).build().run()
    assert f"the {c.provider}-compatible server at {server.url}" in info.value.error
    assert "API" not in info.value.error.split("server at")[0]
    assert OpenAiCaller(api_key="k").where == "OpenAI API (https://api.openai.com/v1)"


def test_replay_serves_the_recorded_settings_and_reports_a_changed_one() -> None:
    from eventstore import SQLiteEventStore
    from replay import replay_run

    store = SQLiteEventStore(":memory:")
    with LoopbackProvider() as server:
        server.serve_fixture("openai/01_text_nonstream")
        c = OpenAiCaller(base_url=server.url + "/v1", api_key="k", temperature=0.2, seed=7)
        engine = agent(c).store(store).build()
        engine.run()
    assert replay_run(store, engine.run_id).identical

    def changed(task: str) -> AgentBuilder:
        return agent(OpenAiCaller(base_url="http://127.0.0.1:9/v1", temperature=0.9, seed=7), task)

    report = replay_run(store, engine.run_id, changed)
    assert not report.identical and report.definition_change is not None
    assert report.definition_change.seq == 1 and "temperature" in report.definition_change.diff


# -- deadlines ------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("stream", [False, True])
def test_an_llm_that_never_answers_stops_the_run_resumable(provider: str, stream: bool) -> None:
    from eventstore import SQLiteEventStore
    from replay import replay_run, resume_run

    store = SQLiteEventStore(":memory:")
    with LoopbackProvider() as server:
        server.hang()
        c = make(provider, server, stream=stream)
        quick = AgentConfig(min_answer_length=1, llm_deadline=0.05)
        engine = agent(c).config(quick).store(store).build()
        with pytest.raises(LlmDeadlineExceeded, match="no answer within llm_deadline=0.05 s"):
            engine.run()
        assert store.run(engine.run_id).status == "aborted"
        kinds = [e.event for e in engine.trace()]
        assert kinds[-3:] == ["LlmRequested", "LlmFailed", "RunAborted"]
        failed = [e.fact for e in engine.trace() if e.event == "LlmFailed"][0]
        assert failed.error_type == "LlmDeadlineExceeded"  # type: ignore[union-attr]

    later = MockLlmCaller([LlmResponse.final_answer("answered after the resume")])
    answer = resume_run(store, engine.run_id, lambda task: agent(c, task).llm(later))
    assert answer == "answered after the resume" and store.run(engine.run_id).status == "done"
    assert replay_run(store, engine.run_id).identical  # the stop and the resume replay exactly


def test_the_deadline_holds_for_any_llm_and_per_run() -> None:
    async def never(memory: Any, tools: Any, model: str) -> LlmResponse:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    engine = (
        AgentBuilder("hang")
        .llm(MockLlmCaller([never]))
        .config(AgentConfig(llm_deadline=None, run_deadline=0.05))
        .build()
    )
    with pytest.raises(LlmDeadlineExceeded, match=r"the run's deadline \(run_deadline=0.05 s\)"):
        engine.run()
    assert engine.trace()[-1].event == "RunAborted"


def test_no_deadline_at_all_is_allowed() -> None:
    script = MockLlmCaller([LlmResponse.final_answer("an answer long enough to keep")])
    config = AgentConfig(llm_deadline=None, run_deadline=None)
    assert AgentBuilder("go").llm(script).config(config).build().run().startswith("an answer")
