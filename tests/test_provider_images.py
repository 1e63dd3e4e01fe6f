"""Images through every provider's official SDK, on recorded traffic served on 127.0.0.1: what
the SDK sent (each API's native image parts: a task's, and a tool's on the next turn) and what
came back, and each run replayed identical offline with the image file gone."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from agentsm import AgentBuilder, AgentConfig, ToolOutcome
from agentsm.images import Image
from agentsm.llm import (
    AnthropicCaller,
    GeminiCaller,
    OpenAiCaller,
    OpenAiResponsesCaller,
    RetryPolicy,
)
from replay import replay_run

from .aws import aws_env, meaningful
from .aws import caller as bedrock_caller
from .loopback import LoopbackProvider, fixture

__all__ = ["aws_env"]

KEY = "sk-test-0123456789abcdef"
NO_RETRY = RetryPolicy(max_retries=0)
RED = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d4944415478da63f8cfc0f01f00050001ff56c72f0d0000000049454e44ae426082"
)
"""A 1x1 red PNG: the task's image in the runs below."""
SHOT = Image.from_bytes(b"\x89PNG\r\n\x1a\n" + b"screenshot")
"""What the tools below return: an image of some bytes (providers are not decoding them here)."""


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def png_file(tmp_path: Path) -> Path:
    path = tmp_path / "task.png"
    path.write_bytes(RED)
    return path


def replayed_without(path: Path, db: Path, run_id: str, make: Any) -> bool:
    """Whether the run replays identical offline once the image file is gone."""
    path.unlink()
    return replay_run(db, run_id).identical and replay_run(db, run_id, make).identical


# -- OpenAI Chat Completions ------------------------------------------------------------------


def openai(server: LoopbackProvider) -> OpenAiCaller:
    return OpenAiCaller(base_url=server.url + "/v1", api_key=KEY, retry=NO_RETRY)


def test_openai_a_task_image_of_bytes_goes_as_a_data_url_part(tmp_path: Path) -> None:
    recorded = fixture("openai_images/01_image_base64_data_url")
    sent_content = recorded["request"]["json"]["messages"][0]["content"]
    url = sent_content[1]["image_url"]["url"]
    photo = tmp_path / "potato.jpg"
    photo.write_bytes(base64.b64decode(url.split(",", 1)[1]))  # the very bytes it sent
    db = tmp_path / "runs.db"

    def make(task: str) -> AgentBuilder:
        return (
            AgentBuilder(task, images=[photo])
            .llm(openai(server))
            .model("gpt-4.1-nano")
            .config(AgentConfig(min_answer_length=1))
            .store(db)
        )

    with LoopbackProvider() as server:
        server.serve_fixture("openai_images/01_image_base64_data_url")
        engine = make(sent_content[0]["text"]).build()
        assert engine.run() == "This vegetable is a potato."
        assert replayed_without(photo, db, engine.run_id, make)
    (sent,) = server.requests
    assert sent["json"]["messages"] == recorded["request"]["json"]["messages"]
    assert engine.definition.images == (Image.from_url(url),)  # the same bytes: one digest


def test_openai_a_task_image_url_goes_as_is() -> None:
    recorded = fixture("openai_images/05_image_url_https")
    asked = recorded["request"]["json"]
    text, part = asked["messages"][0]["content"]
    with LoopbackProvider() as server:
        server.serve_fixture("openai_images/05_image_url_https")
        c = OpenAiCaller(
            base_url=server.url + "/v1",
            api_key=KEY,
            retry=NO_RETRY,
            max_tokens=256,
            temperature=0.0,
        )
        agent = AgentBuilder(text["text"], images=[part["image_url"]["url"]]).llm(c)
        answer = agent.model("gpt-4o").build().run()
    assert answer.startswith("The image shows a scenic landscape")
    sent = server.requests[0]["json"]
    assert sent["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": text["text"]}, part]}
    ]
    assert {k: sent[k] for k in ("model", "max_tokens", "temperature")} == {
        "model": "gpt-4o",
        "max_tokens": 256,
        "temperature": 0.0,
    }


def test_openai_a_tools_image_follows_the_tool_message_in_a_user_message(tmp_path: Path) -> None:
    turn1 = fixture("openai_images/02_tool_returns_image_turn1")["request"]["json"]
    recorded = fixture("openai_images/03_tool_returns_image_turn2_image_in_user_message")
    told, shown = recorded["request"]["json"]["messages"][3]["content"]
    db = tmp_path / "runs.db"

    def get_image(args: dict[str, Any]) -> ToolOutcome:
        return ToolOutcome(
            "See file bd38f5", True, images=(Image.from_url(shown["image_url"]["url"]),)
        )

    def make(task: str) -> AgentBuilder:
        tool = turn1["tools"][0]["function"]
        return (
            AgentBuilder(task)
            .llm(openai(server))
            .model("gpt-4o")
            .tool(tool["name"], tool["description"], tool["parameters"], get_image)
            .config(AgentConfig(min_answer_length=1))
            .store(db)
        )

    with LoopbackProvider() as server:
        server.serve_fixture("openai_images/02_tool_returns_image_turn1")
        server.serve_fixture("openai_images/03_tool_returns_image_turn2_image_in_user_message")
        engine = make(turn1["messages"][0]["content"][0]["text"]).build()
        assert engine.run() == "The image shows a potato."
        assert replay_run(db, engine.run_id, make).identical
    first, second = (r["json"]["messages"] for r in server.requests)
    assert first == [{"role": "user", "content": turn1["messages"][0]["content"][0]["text"]}]
    expected = recorded["request"]["json"]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "tool", "user"]
    assert second[1]["tool_calls"] == expected[1]["tool_calls"]
    assert second[2] == expected[2]  # the tool message: its text only
    note, image = second[3]["content"]
    assert image == shown  # the image in the user message after it, as recorded
    assert note["type"] == "text" and "get_image" in note["text"]
    assert "call_4hrT4QP9jfojtK69vGiFCFjG" in note["text"]


# -- Anthropic Messages -----------------------------------------------------------------------


def anthropic(server: LoopbackProvider, **kwargs: Any) -> AnthropicCaller:
    return AnthropicCaller(base_url=server.url, api_key=KEY, retry=NO_RETRY, **kwargs)


def test_anthropic_a_task_image_url_is_an_image_block() -> None:
    recorded = fixture("anthropic_thinking/12_image_url_input")
    asked = recorded["request"]["json"]
    text, block = asked["messages"][0]["content"]
    with LoopbackProvider() as server:
        server.serve_fixture("anthropic_thinking/12_image_url_input")
        agent = AgentBuilder(text["text"], images=[block["source"]["url"]])
        answer = agent.llm(anthropic(server)).model(asked["model"]).build().run()
    assert answer.startswith("This is a potato.")
    sent = server.requests[0]["json"]
    assert sent["messages"] == asked["messages"]
    assert sent["max_tokens"] == asked["max_tokens"] and sent["model"] == asked["model"]


def weather_agent(server: LoopbackProvider, db: Path, image: Path) -> AgentBuilder:
    asked = fixture("anthropic/03_tool_use_single_nonstream_turn1")["request"]["json"]
    tool = asked["tools"][0]
    return (
        AgentBuilder(asked["messages"][0]["content"], images=[image])
        .llm(anthropic(server, max_tokens=1024))
        .model(asked["model"])
        .tool(tool["name"], tool["description"], tool["input_schema"], lambda a: ["Sunny", SHOT])
        .config(AgentConfig(min_answer_length=1))
        .store(db)
    )


def test_anthropic_images_in_the_task_and_in_a_tool_result(tmp_path: Path) -> None:
    db, image = tmp_path / "runs.db", png_file(tmp_path)
    with LoopbackProvider() as server:
        server.serve_fixture("anthropic/03_tool_use_single_nonstream_turn1")
        turn2 = server.serve_fixture("anthropic/04_tool_use_single_nonstream_turn2_final_text")
        engine = weather_agent(server, db, image).build()
        answer = engine.run()
        make = lambda task: weather_agent(server, db, image)  # noqa: E731
        assert replayed_without(image, db, engine.run_id, make)
    assert answer == json.loads(turn2["response"]["body"])["content"][0]["text"]
    task = {"type": "base64", "media_type": "image/png", "data": b64(RED)}
    first, second = (r["json"]["messages"] for r in server.requests)
    assert first == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is the weather in SF?"},
                {"type": "image", "source": task},
            ],
        }
    ]
    assert second[0] == first[0] and len(second) == 3
    (result,) = second[2]["content"]
    assert result["type"] == "tool_result"
    assert result["tool_use_id"] == "toolu_011bpynHqFZ9P4u5rSaXsTJQ"
    assert result["content"] == [  # the tool's image in its result, natively
        {"type": "text", "text": "SUCCESS: Sunny\n[image image/png]"},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": b64(SHOT.data or b"")},
        },
    ]


# -- OpenAI Responses -------------------------------------------------------------------------


def capital_agent(server: LoopbackProvider, db: Path, image: Path) -> AgentBuilder:
    asked = fixture("openai_responses/02_function_call_turn1")["request"]["json"]
    tool = asked["tools"][0]
    c = OpenAiResponsesCaller(base_url=server.url + "/v1", api_key=KEY, retry=NO_RETRY)
    return (
        AgentBuilder(asked["input"][0]["content"], images=[image])
        .llm(c)
        .model(asked["model"])
        .tool(tool["name"], "", tool["parameters"], lambda a: ["Potato City", SHOT])
        .config(AgentConfig(min_answer_length=1))
        .store(db)
    )


def test_responses_images_as_input_image_content(tmp_path: Path) -> None:
    db, image = tmp_path / "runs.db", png_file(tmp_path)
    with LoopbackProvider() as server:
        server.serve_fixture("openai_responses/02_function_call_turn1")
        turn2 = server.serve_fixture("openai_responses/03_function_call_turn2_final_text")
        engine = capital_agent(server, db, image).build()
        assert engine.run() == "The capital of PotatoLand is Potato City."
        make = lambda task: capital_agent(server, db, image)  # noqa: E731
        assert replayed_without(image, db, engine.run_id, make)
    first, second = (r["json"]["input"] for r in server.requests)
    url = f"data:image/png;base64,{b64(RED)}"
    assert first == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "What is the capital of PotatoLand?"},
                {"type": "input_image", "image_url": url, "detail": "auto"},
            ],
        }
    ]
    recorded = turn2["request"]["json"]["input"]
    assert [i.get("type", "message") for i in second] == [
        i.get("type", "message") for i in recorded
    ]
    output = second[2]
    assert output["type"] == "function_call_output"
    assert output["call_id"] == recorded[2]["call_id"]
    assert output["output"] == [  # the function's output as content: its text, its image
        {"type": "input_text", "text": "SUCCESS: Potato City\n[image image/png]"},
        {
            "type": "input_image",
            "image_url": f"data:image/png;base64,{b64(SHOT.data or b'')}",
            "detail": "auto",
        },
    ]


# -- Gemini -----------------------------------------------------------------------------------


@pytest.fixture
def no_google_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI"):
        monkeypatch.delenv(name, raising=False)


def country_agent(server: LoopbackProvider, db: Path, image: Path) -> AgentBuilder:
    asked = fixture("google/02_function_call_thought_signature_turn1")["request"]["json"]
    schema = {"type": "object", "additionalProperties": False, "properties": {}}
    c = GeminiCaller(
        base_url=server.url,
        api_key="AIza-test-0123456789abcdef",
        api_version="v1beta",
        retry=NO_RETRY,
        default_model="gemini-2.5-pro",
    )
    return (
        AgentBuilder(asked["contents"][0]["parts"][0]["text"], images=[image])
        .llm(c)
        .tool("get_user_country", "", schema, lambda args: ["Mexico", SHOT])
        .store(db)
    )


def unbase64(text: str) -> bytes:
    """The SDK's base64 (URL-safe) as bytes."""
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@pytest.mark.usefixtures("no_google_environment")
def test_gemini_images_as_inline_data_parts(tmp_path: Path) -> None:
    db, image = tmp_path / "runs.db", png_file(tmp_path)
    with LoopbackProvider() as server:
        server.serve_fixture("google/02_function_call_thought_signature_turn1")
        server.serve_fixture("google/03_function_response_turn2_final_text")
        engine = country_agent(server, db, image).build()
        assert engine.run() == "The largest city in Mexico is Mexico City."
        make = lambda task: country_agent(server, db, image)  # noqa: E731
        assert replayed_without(image, db, engine.run_id, make)
    first, second = (r["json"]["contents"] for r in server.requests)
    recorded = fixture("google/02_function_call_thought_signature_turn1")["request"]["json"]
    text, inline = first[0]["parts"]
    assert text == recorded["contents"][0]["parts"][0]
    assert inline["inlineData"]["mime_type"] == "image/png"  # as the SDK writes the Blob
    assert unbase64(inline["inlineData"]["data"]) == RED
    assert [c["role"] for c in second] == ["user", "model", "user"]
    answer, note, shot = second[2]["parts"]  # the function's response, then its image
    assert answer["functionResponse"]["name"] == "get_user_country"
    assert answer["functionResponse"]["response"] == {
        "output": "SUCCESS: Mexico\n[image image/png]"
    }
    assert "get_user_country" in note["text"]
    assert unbase64(shot["inlineData"]["data"]) == SHOT.data


# -- Bedrock Converse -------------------------------------------------------------------------


def bedrock_agent(server: LoopbackProvider, db: Path, image: Path) -> AgentBuilder:
    first = fixture("bedrock/02_tool_use_turn1")["request"]
    asked = first["json"]
    spec = asked["toolConfig"]["tools"][0]["toolSpec"]
    return (
        AgentBuilder(asked["messages"][0]["content"][0]["text"], images=[image])
        .llm(bedrock_caller(server, temperature=0.0, tool_choice="auto"))
        .model(first["path"].split("/")[2].replace("%3A", ":"))
        .system_prompt(asked["system"][0]["text"])
        .tool(spec["name"], spec["description"], spec["inputSchema"]["json"], lambda a: SHOT)
        .store(db)
    )


@pytest.mark.usefixtures("aws_env")
def test_bedrock_images_as_image_blocks_of_bytes(tmp_path: Path) -> None:
    db, image = tmp_path / "runs.db", png_file(tmp_path)
    with LoopbackProvider() as server:
        server.serve_fixture("bedrock/02_tool_use_turn1")
        turn2 = server.serve_fixture("bedrock/03_tool_result_error_turn2_final_text")
        engine = bedrock_agent(server, db, image).build()
        engine.run()
        make = lambda task: bedrock_agent(server, db, image)  # noqa: E731
        assert replayed_without(image, db, engine.run_id, make)
    body = json.loads(turn2["response"]["body"])
    assert engine.memory.final_answer == body["output"]["message"]["content"][0]["text"]
    first, second = (r["json"] for r in server.requests)
    recorded = meaningful(fixture("bedrock/02_tool_use_turn1")["request"]["json"])
    assert {k: v for k, v in first.items() if k != "messages"} == {
        k: v for k, v in recorded.items() if k != "messages"
    }
    assert first["messages"] == [
        {
            "role": "user",
            "content": [
                {"text": "What is the capital of France?"},
                {"image": {"format": "png", "source": {"bytes": b64(RED)}}},
            ],
        }
    ]
    (block,) = second["messages"][2]["content"]
    assert block["toolResult"]["status"] == "success"
    assert block["toolResult"]["content"] == [  # the tool's image in its result, as bytes
        {"text": "SUCCESS: [image image/png]"},
        {"image": {"format": "png", "source": {"bytes": b64(SHOT.data or b"")}}},
    ]


@pytest.mark.usefixtures("aws_env")
def test_bedrock_refuses_an_image_url_as_data() -> None:
    with LoopbackProvider() as server:
        agent = AgentBuilder("What is this?", images=["https://example.com/a.png"])
        engine = agent.llm(bedrock_caller(server)).model("us.amazon.nova-micro-v1:0").build()
        with pytest.raises(Exception, match="takes images as bytes"):
            engine.run()
    assert server.requests == []  # nothing was sent
    assert "BadRequest" in (engine.memory.error or "")
