"""BedrockCaller's settings, credentials, model ids and errors: what is recorded, what boto3
is told, and how Bedrock's refusals are classified (on recorded 400s served on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from agentsm import AgentBuilder, AgentMemory, BuildError, History, HistoryEntry, ToolCall
from agentsm import facts as f
from agentsm.llm import (
    AuthenticationFailed,
    BadRequest,
    ContextOverflow,
    Overloaded,
    ProviderError,
    RateLimited,
    RetryPolicy,
    ServerError,
)
from agentsm.llm._converse import model_family
from agentsm.llm.bedrock import BedrockCaller
from agentsm.tools import ToolRegistry

from .aws import ACCESS_KEY, SECRET_KEY, aws_env, caller, sent
from .loopback import LoopbackProvider

__all__ = ["aws_env"]
pytestmark = pytest.mark.usefixtures("aws_env")

NOVA = "us.amazon.nova-micro-v1:0"
CLAUDE = "anthropic.claude-3-5-haiku-20241022-v1:0"
TEXT = "bedrock/01_text_nonstream"


def call(c: BedrockCaller, memory: AgentMemory | None = None, model: str = NOVA) -> Any:
    return asyncio.run(c.call(memory or AgentMemory(task="Hello!"), ToolRegistry(), model))


def tools(*names: str) -> ToolRegistry:
    registry = ToolRegistry()
    for name in names:
        registry.register(name, f"The {name} tool.", {"type": "object"}, lambda a: "ok")
    return registry


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("us.amazon.nova-micro-v1:0", "amazon"),
        ("amazon.titan-text-express-v1", "amazon"),
        ("anthropic.claude-3-5-haiku-20241022-v1:0", "anthropic"),
        ("eu.anthropic.claude-sonnet-4-20250514-v1:0", "anthropic"),
        ("global.anthropic.claude-sonnet-4-5-20250929-v1:0", "anthropic"),
        ("apac.amazon.nova-pro-v1:0", "amazon"),
        ("meta.llama3-1-70b-instruct-v1:0", "meta"),
        ("us.meta.llama4-maverick-17b-instruct-v1:0", "meta"),
        ("mistral.mistral-large-2407-v1:0", "mistral"),
        ("cohere.command-r-plus-v1:0", "cohere"),
        ("ai21.jamba-1-5-large-v1:0", "ai21"),
        ("us.deepseek.r1-v1:0", "deepseek"),
        ("openai.gpt-oss-120b-1:0", "openai"),
        ("qwen.qwen3-32b-v1:0", "qwen"),
        ("us.writer.palmyra-x5-v1:0", "writer"),
        (
            "arn:aws:bedrock:us-east-1:000000000000:inference-profile/"
            "us.anthropic.claude-3-7-sonnet-20250219-v1:0",
            "anthropic",
        ),
        ("arn:aws:bedrock:us-east-1:000000000000:application-inference-profile/a1b2c3", ""),
    ],
)
def test_model_ids_of_every_family_are_told_apart(model: str, family: str) -> None:
    assert model_family(model) == family


def test_any_model_id_goes_url_encoded_in_the_path_and_tool_result_status_by_family() -> None:
    arn = "arn:aws:bedrock:us-east-1:000000000000:inference-profile/us.meta.llama3-2-3b-v1:0"
    entry = HistoryEntry(step=1, tool=ToolCall(name="x", id="t1"), observation="no", success=False)
    memory = AgentMemory(task="Hello!", history=History((entry,)))
    with LoopbackProvider() as server:
        for _ in range(3):
            server.serve_fixture(TEXT)
        c = caller(server)
        for model in (arn, CLAUDE, "mistral.mistral-large-2407-v1:0"):
            asyncio.run(c.call(memory, tools("x"), model))
    assert server.requests[0]["path"] == (
        "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A000000000000%3Ainference-profile"
        "%2Fus.meta.llama3-2-3b-v1%3A0/converse"
    )
    results = [sent(server, i)["messages"][2]["content"][0]["toolResult"] for i in range(3)]
    assert [r.get("status") for r in results] == [None, "error", None]  # only Claude and Nova


def test_settings_are_recorded_in_the_run_definition_and_sent(tmp_path: Path) -> None:
    with LoopbackProvider() as server:
        server.serve_fixture(TEXT)
        c = caller(
            server,
            temperature=0.2,
            top_p=0.9,
            max_tokens=2048,
            stop_sequences=["END"],
            tool_choice="lookup",
            additional_fields={"top_k": 50},
            extra_body={"performanceConfig": {"latency": "standard"}},
        )
        engine = (
            AgentBuilder("Hello!")
            .llm(c)
            .model(CLAUDE)
            .tool("lookup", "Look it up.", {"type": "object"}, lambda a: "ok")
            .build()
        )
        engine.run()
    started = engine.trace()[0].fact
    assert isinstance(started, f.RunStarted)
    assert started.llm == {
        "provider": "Bedrock",
        "temperature": 0.2,
        "top_p": 0.9,
        "tool_choice": "lookup",
        "max_tokens": 2048,
        "stop_sequences": ["END"],
        "additional_fields": {"top_k": 50},
        "extra_body": {"performanceConfig": {"latency": "standard"}},
    }
    request = sent(server, 0)
    assert request["inferenceConfig"] == {
        "maxTokens": 2048,
        "temperature": 0.2,
        "topP": 0.9,
        "stopSequences": ["END"],
    }
    assert request["toolConfig"]["toolChoice"] == {"tool": {"name": "lookup"}}
    assert request["additionalModelRequestFields"] == {"top_k": 50}
    assert request["performanceConfig"] == {"latency": "standard"}
    for key in (ACCESS_KEY, SECRET_KEY):
        assert key not in json.dumps(started.llm) and SECRET_KEY not in repr(c)


def test_thinking_levels_budgets_and_own_objects() -> None:
    def fields(**options: Any) -> Any:
        request = BedrockCaller(**options)._request(AgentMemory(task="t"), ToolRegistry(), CLAUDE)
        return request.get("additionalModelRequestFields")

    assert fields(thinking="high") == {"thinking": {"type": "enabled", "budget_tokens": 16384}}
    assert fields(thinking=2000) == {"thinking": {"type": "enabled", "budget_tokens": 2000}}
    own = {"type": "adaptive"}
    assert fields(thinking=own, additional_fields={"top_k": 5}) == {"top_k": 5, "thinking": own}
    nova = {"reasoningConfig": {"type": "enabled", "maxReasoningEffort": "low"}}
    assert fields(thinking=nova) == nova
    assert fields() is None
    assert BedrockCaller(thinking="medium").settings == {
        "provider": "Bedrock",
        "thinking": "medium",
    }
    refused: list[tuple[dict[str, Any], str]] = [
        ({"thinking": 500}, "least thinking budget"),
        ({"thinking": "extreme"}, "is not a level"),
        ({"thinking": 2048, "max_tokens": 2048}, "no room for the answer"),
        ({"api_key": "x"}, "takes AWS credentials"),
        ({"base_url": "http://x"}, "endpoint_url="),
        ({"parallel_tool_calls": False}, "no such setting"),
        ({"tool_choice": "none"}, "no tool_choice 'none'"),
        ({"aws_access_key_id": ACCESS_KEY}, "together"),
        ({"cache": "everything"}, "is not 'auto', 'off'"),
        ({"cache": "auto", "cache_ttl": "1d"}, "neither '5m' nor '1h'"),
        ({"additional_fields": {"x": float("nan")}}, "must be a JSON object"),
    ]
    for bad, match in refused:
        with pytest.raises(BuildError, match=match):
            BedrockCaller(**bad)


def test_cache_points_where_asked_and_auto_by_model_family() -> None:
    entry = HistoryEntry(step=1, tool=ToolCall(name="a", id="t1"), observation="ok", success=True)
    memory = AgentMemory(task="Hi.", system_prompt="Be brief.", history=History((entry,)))
    point = {"cachePoint": {"type": "default", "ttl": "1h"}}

    def marked(model: str, **options: Any) -> list[str]:
        request = BedrockCaller(**options)._request(memory, tools("a", "b"), model)
        found = []
        if request["system"][-1] == point or request["system"][-1].get("cachePoint"):
            found.append("system")
        if "cachePoint" in request["toolConfig"]["tools"][-1]:
            found.append("tools")
        if "cachePoint" in request["messages"][-1]["content"][-1]:
            found.append("conversation")
        return found

    every = ["system", "tools", "conversation"]
    assert marked(CLAUDE, cache=("conversation", "system", "tools"), cache_ttl="1h") == every
    request = BedrockCaller(cache="system", cache_ttl="1h")._request(memory, tools("a"), CLAUDE)
    assert request["system"] == [{"text": "Be brief."}, point]
    assert marked(CLAUDE, cache="auto") == every
    assert marked(NOVA, cache="auto") == ["system", "conversation"]
    assert marked("meta.llama3-1-70b-instruct-v1:0", cache="auto") == []
    assert marked(CLAUDE) == [] and marked(CLAUDE, cache="off") == []
    assert BedrockCaller(cache=["tools", "system"]).settings["cache"] == ["system", "tools"]
    assert BedrockCaller(cache="auto", cache_ttl="5m").settings == {
        "provider": "Bedrock",
        "cache": "auto",
        "cache_ttl": "5m",
    }


def test_cache_reads_and_writes_are_counted_apart() -> None:
    body = {
        "output": {"message": {"role": "assistant", "content": [{"text": "Cached answer."}]}},
        "stopReason": "end_turn",
        "usage": {
            "inputTokens": 12,
            "outputTokens": 5,
            "totalTokens": 1517,
            "cacheReadInputTokens": 1200,
            "cacheWriteInputTokens": 300,
        },
    }
    with LoopbackProvider() as server:
        server.serve(200, body)
        usage = call(caller(server, cache="auto"), model=CLAUDE).usage
    assert (usage.input_tokens, usage.output_tokens) == (12, 5)
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (1200, 300)
    assert sent(server, 0)["messages"][0]["content"][-1] == {"cachePoint": {"type": "default"}}


# -- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["11_error_400_validation_exception", "12_error_400_on_stream_request"]
)
def test_a_validation_exception_is_a_bad_request_not_retried(name: str) -> None:
    with LoopbackProvider() as server:
        recorded = server.serve_fixture(f"bedrock/{name}")
        c = caller(server, stream="stream" in name, retry=RetryPolicy(max_retries=3))
        with pytest.raises(BadRequest) as caught:
            call(c, AgentMemory(task="Say this is a test"), "does-not-exist")
    assert len(server.requests) == 1
    assert server.requests[0]["path"] == recorded["request"]["path"]
    assert sent(server, 0) == recorded["request"]["json"]
    message = str(caught.value)
    assert "ValidationException" in message and "model identifier is invalid" in message
    assert "Check the model id" in message and caught.value.status == 400


def aws_error(code: str, message: str) -> dict[str, Any]:
    return {"x-amzn-errortype": f"{code}:http://internal.amazon.com/coral/com.amazon.bedrock/"}


@pytest.mark.parametrize(
    ("status", "code", "message", "kind"),
    [
        (429, "ThrottlingException", "Too many requests, please wait.", RateLimited),
        (429, "ServiceQuotaExceededException", "Quota exceeded.", RateLimited),
        (429, "ModelNotReadyException", "The model is not ready.", Overloaded),
        (503, "ServiceUnavailableException", "Service unavailable.", Overloaded),
        (500, "InternalServerException", "Internal error.", ServerError),
        (408, "ModelTimeoutException", "Model timed out.", ServerError),
        (400, "ValidationException", "Input is too long for requested model.", ContextOverflow),
        (403, "AccessDeniedException", "You don't have access to the model.", AuthenticationFailed),
        (
            403,
            "UnrecognizedClientException",
            "The security token is invalid.",
            AuthenticationFailed,
        ),
        (404, "ResourceNotFoundException", "Model not found.", BadRequest),
    ],
)
def test_bedrock_errors_are_classified_and_retried_by_the_policy(
    status: int, code: str, message: str, kind: type[ProviderError]
) -> None:
    async def no_wait(seconds: float) -> None:
        pass

    with LoopbackProvider() as server:
        server.serve(status, {"message": message}, aws_error(code, message))
        server.serve_fixture(TEXT)
        c = caller(server, retry=RetryPolicy(max_retries=1, sleep=no_wait))
        if kind.retryable:
            assert call(c).content.startswith("Hello!")
        else:
            with pytest.raises(kind) as caught:
                call(c)
            assert message in str(caught.value)
            assert SECRET_KEY not in str(caught.value) and ACCESS_KEY not in str(caught.value)
    assert len(server.requests) == (2 if kind.retryable else 1)
    assert {r["headers"]["amz-sdk-request"] for r in server.requests} == {"attempt=1; max=1"}


def test_credentials_come_from_the_environment_and_a_profile(
    aws_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with LoopbackProvider() as server:
        for _ in range(2):
            server.serve_fixture(TEXT)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAENVIRONMENTEXAMPLE")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "environment-secret-example")
        monkeypatch.setenv("AWS_REGION", "eu-west-1")
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", server.url)
        from_env = BedrockCaller.from_env()
        assert call(from_env).content
        assert from_env.where == f"the Bedrock endpoint at {server.url}"
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"):
            monkeypatch.delenv(name)
        (aws_env / "aws-credentials").write_text(
            "[work]\naws_access_key_id = AKIAPROFILEEXAMPLE\n"
            "aws_secret_access_key = profile-secret-example\n"
        )
        (aws_env / "aws-config").write_text("[profile work]\nregion = ap-south-1\n")
        assert call(BedrockCaller(profile="work")).content
    signed = [r["headers"]["authorization"] for r in server.requests]
    assert "Credential=AKIAENVIRONMENTEXAMPLE/" in signed[0] and "/eu-west-1/bedrock/" in signed[0]
    assert "Credential=AKIAPROFILEEXAMPLE/" in signed[1] and "/ap-south-1/bedrock/" in signed[1]
    assert "profile-secret-example" not in repr(BedrockCaller(profile="work"))


def test_missing_credentials_region_or_boto3_say_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(AuthenticationFailed, match="pass aws_access_key_id="):
        call(BedrockCaller(region="us-east-1", endpoint_url="http://127.0.0.1:9"))
    with pytest.raises(BadRequest, match="no AWS region is set"):
        call(BedrockCaller(aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY))
    with pytest.raises(AuthenticationFailed, match="missing"):
        call(BedrockCaller(profile="missing", region="us-east-1"))
    with pytest.raises(BuildError, match="finds no AWS credentials"):
        BedrockCaller.from_env(region="us-east-1")
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "boto3" else real(name, *a)
    )
    with pytest.raises(BuildError, match=r"pip install 'agentsm\[bedrock\]'"):
        BedrockCaller()


def test_repr_says_where_and_what_without_secrets() -> None:
    c = BedrockCaller(
        region="eu-central-1",
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        aws_session_token="session-token-example",
        thinking="low",
        default_model=CLAUDE,
    )
    shown = repr(c)
    assert shown == (
        f"BedrockCaller(default_model={CLAUDE!r}, region='eu-central-1', stream=False, "
        "thinking='low', credentials='given')"
    )
    assert c.where == "Bedrock (https://bedrock-runtime.eu-central-1.amazonaws.com)"
    assert "from the AWS environment" in repr(BedrockCaller(profile="p"))
