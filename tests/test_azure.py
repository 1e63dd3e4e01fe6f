"""AzureOpenAiCaller and AzureOpenAiResponsesCaller through the official openai SDK's Azure
client, on recorded real Azure OpenAI traffic served on 127.0.0.1: deployments and
api-version, content-filter results, Azure's stream quirks, and the v1 Responses API."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agentsm import (
    AgentBuilder,
    AgentConfig,
    AgentEngine,
    AgentMemory,
    BuildError,
    LlmResponse,
    TextDelta,
    ToolRegistry,
)
from agentsm.llm import (
    AuthenticationFailed,
    AzureOpenAiCaller,
    AzureOpenAiResponsesCaller,
    ProviderCaller,
    RetryPolicy,
)
from agentsm.llm.azure import DEFAULT_AZURE_API_VERSION
from replay import replay_run

from .loopback import LoopbackProvider

KEY = "azure-key-0123456789abcdef"
HERE = "azure_openai"

CHAT: dict[str, dict[str, Any]] = {
    "01_chat_text_nonstream": {
        "azure_deployment": "test-openai",
        "api_version": "2023-07-01-preview",
        "max_tokens": 20,
        "temperature": 0,
    },
    "02_chat_text_stream": {
        "azure_deployment": "test-openai",
        "api_version": "2023-07-01-preview",
        "stream": True,
        "max_tokens": 300,
        "temperature": 0,
    },
    "03_chat_text_nonstream_2024_12_01_preview": {
        "azure_deployment": "gpt-4.1-mini",
        "api_version": "2024-12-01-preview",
        "temperature": 0.7,
    },
    "04_chat_text_stream_include_usage": {"api_version": "2024-12-01-preview", "stream": True},
}


def make(
    cls: type[AzureOpenAiCaller | AzureOpenAiResponsesCaller],
    server: LoopbackProvider,
    **kwargs: Any,
) -> Any:
    policy = RetryPolicy(max_retries=kwargs.pop("max_retries", 0))
    return cls(azure_endpoint=server.url, api_key=KEY, retry=policy, **kwargs)


def call(c: ProviderCaller, task: str, model: str) -> LlmResponse:
    return asyncio.run(c.call(AgentMemory(task=task), ToolRegistry(), model))


def streamed(engine: AgentEngine) -> list[Any]:
    async def collect() -> list[Any]:
        return [o async for o in engine.stream()]

    return asyncio.run(collect())


@pytest.mark.parametrize("name", sorted(CHAT))
def test_chat_on_a_deployment_sends_what_was_recorded(name: str) -> None:
    with LoopbackProvider() as server:
        recorded = server.serve_fixture(f"{HERE}/{name}")
        request = recorded["request"]["json"]
        c = make(AzureOpenAiCaller, server, **CHAT[name])
        response = call(c, request["messages"][0]["content"], request["model"])
    sent = server.requests[0]
    assert sent["path"] == "/" + recorded["request"]["path"].lstrip("/")  # 2023's SDK wrote "//"
    assert sent["headers"]["api-key"] == KEY and "authorization" not in sent["headers"]
    assert sent["json"]["messages"] == [
        {"role": "user", "content": request["messages"][0]["content"]}
    ]
    for field in ("model", "max_tokens", "temperature", "stream", "stream_options"):
        if request.get(field):  # a false `stream` is the SDK's default, not sent
            assert sent["json"][field] == request[field]
    assert response.is_final and response.content
    counted = '"prompt_tokens"' in recorded["response"]["body"]  # not in the 2023 stream
    assert (response.usage is not None and response.usage.output_tokens > 0) == counted
    assert KEY not in repr(c) and "api_key=set" in repr(c)


def test_stream_quirks_an_empty_first_chunk_a_choice_without_delta_and_usage_last() -> None:
    with LoopbackProvider() as server:
        recorded = server.serve_fixture(f"{HERE}/04_chat_text_stream_include_usage")
        engine = (
            AgentBuilder("Hey, what is up?")
            .llm(make(AzureOpenAiCaller, server, **CHAT["04_chat_text_stream_include_usage"]))
            .model("gpt-5.2_2025-12-11")
            .config(AgentConfig(min_answer_length=1))
            .build()
        )
        outputs = streamed(engine)
    body = recorded["response"]["body"]
    assert '"choices":[],"created":0,"id":""' in body and '"obfuscation"' in body
    assert '"latency_checkpoint"' in body
    deltas = "".join(o.text for o in outputs if isinstance(o, TextDelta))
    assert deltas == engine.memory.final_answer and deltas.startswith("Not much")
    assert (engine.memory.total_usage.input_tokens, engine.memory.total_usage.output_tokens) == (
        12,
        24,
    )


def test_without_a_deployment_the_model_names_it_and_settings_are_recorded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_VERSION", "2024-12-01-preview")
    with LoopbackProvider() as server:
        monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", server.url)
        server.serve_fixture(f"{HERE}/03_chat_text_nonstream_2024_12_01_preview")
        engine = AgentBuilder("Descartes?").llm(AzureOpenAiCaller()).model("gpt-4.1-mini").build()
        engine.run()
    assert server.requests[0]["path"] == (
        "/openai/deployments/gpt-4.1-mini/chat/completions?api-version=2024-12-01-preview"
    )
    assert engine.definition.llm == {
        "provider": "Azure OpenAI",
        "api_version": "2024-12-01-preview",
    }
    deployed = AzureOpenAiCaller(azure_endpoint="https://r.openai.azure.com", azure_deployment="d")
    assert deployed.default_model == "d" and deployed.settings["azure_deployment"] == "d"
    assert deployed.base_url == "https://r.openai.azure.com/openai/deployments/d"


def test_a_run_through_each_azure_caller_replays_identical_offline(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with LoopbackProvider() as server:
        server.serve_fixture(f"{HERE}/03_chat_text_nonstream_2024_12_01_preview")
        server.serve_fixture(f"{HERE}/05_responses_v1_reasoning")
        chat = make(AzureOpenAiCaller, server, **CHAT["03_chat_text_nonstream_2024_12_01_preview"])
        responses = make(AzureOpenAiResponsesCaller, server, thinking={"context": "all_turns"})
        runs = []
        for c, model in ((chat, "gpt-3.5-turbo"), (responses, "gpt-5.5")):
            builder = AgentBuilder("A question.").llm(c).model(model).store(db)
            engine = builder.config(AgentConfig(min_answer_length=1)).build()
            engine.run()
            runs.append(engine)
    assert [(r.memory.final_answer or "")[:9] for r in runs] == ["Certainly", "Paris"]
    for engine in runs:
        assert replay_run(db, engine.run_id).identical


def test_responses_on_the_v1_api_with_reasoning_kept() -> None:
    with LoopbackProvider() as server:
        recorded = server.serve_fixture(f"{HERE}/05_responses_v1_reasoning")
        request = recorded["request"]["json"]
        c = make(AzureOpenAiResponsesCaller, server, thinking=request["reasoning"])
        response = call(c, request["input"][0]["content"], request["model"])
    sent = server.requests[0]
    assert sent["path"] == recorded["request"]["path"] == "/openai/v1/responses"  # no api-version
    assert sent["headers"]["api-key"] == KEY
    assert {k: v for k, v in sent["json"].items() if k != "store"} == {
        k: v for k, v in request.items() if k != "stream"
    }
    assert response.content == "Paris" and response.model == "gpt-5.5"
    (part,) = response.reasoning
    assert part.kind == "redacted" and str(part.native["id"]).startswith("rs_")
    assert str(part.native["encrypted_content"]).startswith("gAAAAAB")
    assert response.usage is not None and response.usage.reasoning_tokens == 9
    assert c.where == f"Azure OpenAI Responses at {server.url}/openai/v1"


def test_endpoint_and_key_are_required_and_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_API_KEY", "OPENAI_API_VERSION"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(BuildError, match="export AZURE_OPENAI_ENDPOINT"):
        AzureOpenAiCaller()
    with pytest.raises(BuildError, match="not both"):
        AzureOpenAiResponsesCaller(azure_endpoint="https://r.openai.azure.com", base_url="x")
    assert AzureOpenAiCaller(azure_endpoint="https://r").api_version == DEFAULT_AZURE_API_VERSION
    with LoopbackProvider() as server:
        c = AzureOpenAiCaller(azure_endpoint=server.url, retry=RetryPolicy(max_retries=0))
        with pytest.raises(AuthenticationFailed, match="AZURE_OPENAI_API_KEY is not set"):
            call(c, "t", "m")
        server.serve_fixture("openai/13_error_401_invalid_api_key")  # as Azure refuses a key
        with pytest.raises(AuthenticationFailed) as caught:
            call(make(AzureOpenAiCaller, server, max_retries=2), "t", "m")
    assert f"Azure OpenAI at {server.url}/openai" in str(caught.value)
    assert "Check AZURE_OPENAI_API_KEY" in str(caught.value) and KEY not in str(caught.value)
    assert len(server.requests) == 1  # not retried
