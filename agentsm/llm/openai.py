"""OpenAiCaller: OpenAI Chat Completions and any OpenAI-compatible server (vLLM, Ollama, Groq,
Together, ...), through the official `openai` SDK, with native and parallel tool calling."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import BuildError
from ..types import LlmResponse, TokenUsage, ToolCall
from ._common import parse_arguments, tool_call
from ._images import image_data_url, images_of, tool_images_note
from .base import emit_text
from .errors import MalformedResponse
from .provider import ProviderCaller, Thinking

if TYPE_CHECKING:
    from ..memory import AgentMemory
    from ..tools import ToolRegistry

__all__ = ["DEFAULT_OPENAI_MODEL", "OpenAiCaller"]

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
"""Used when the agent's model string is empty and $OPENAI_MODEL is not set."""


def openai_messages(memory: AgentMemory) -> list[dict[str, Any]]:
    """`memory.build_messages()` as Chat Completions messages (tool_calls + tool messages).
    Images go as `image_url` parts of a user message (bytes as data: URLs); a tool message
    takes text only, so the images of a turn's results follow its tool messages, in one user
    message that names the call each came from."""
    out: list[dict[str, Any]] = []
    shown: list[dict[str, Any]] = []  # the images of the tool messages just added
    for m in memory.build_messages():
        if shown and m["role"] != "tool":
            out.append({"role": "user", "content": shown})
            shown = []
        if m["role"] == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": m.get("content")}
            if m.get("tool_calls"):
                msg["tool_calls"] = [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
                    }
                    for c in m["tool_calls"]
                ]
            out.append(msg)
        elif m["role"] == "tool":
            out.append({"role": "tool", "tool_call_id": m["tool_call_id"], "content": m["content"]})
            if images_of(m):
                shown += [{"type": "text", "text": tool_images_note(m)}, *_image_parts(m)]
        elif images_of(m):
            out.append(
                {
                    "role": m["role"],
                    "content": [{"type": "text", "text": m["content"]}, *_image_parts(m)],
                }
            )
        else:
            out.append({"role": m["role"], "content": m["content"]})
    if shown:
        out.append({"role": "user", "content": shown})
    return out


def _image_parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A message's images as Chat Completions `image_url` parts."""
    return [
        {"type": "image_url", "image_url": {"url": image_data_url(part, "Chat Completions")}}
        for part in images_of(message)
    ]


def openai_tools(tools: ToolRegistry) -> list[dict[str, Any]]:
    """The registry's schemas as Chat Completions function tools."""
    return [
        {
            "type": "function",
            "function": {
                "name": s.name,
                "description": s.description,
                "parameters": s.input_schema,
            },
        }
        for s in tools.schemas()
    ]


def _usage(raw: Any) -> TokenUsage | None:
    if raw is None:
        return None
    return TokenUsage(
        input_tokens=getattr(raw, "prompt_tokens", 0) or 0,
        output_tokens=getattr(raw, "completion_tokens", 0) or 0,
        cache_read_tokens=detail(raw, "prompt_tokens_details", "cached_tokens"),
        reasoning_tokens=detail(raw, "completion_tokens_details", "reasoning_tokens"),
    )


def detail(usage: Any, details: str, name: str) -> int:
    """A count in one of the usage's detail objects (0 when the server gives none)."""
    value = getattr(getattr(usage, details, None), name, None)
    return value if isinstance(value, int) else 0


def effort(thinking: Thinking | None, api: str) -> str | None:
    """`thinking` as an OpenAI reasoning effort: a level, or any effort the server takes
    ("minimal", "none", ...); None for what the base check decides (None, a dict)."""
    if isinstance(thinking, str) and thinking.strip():
        return thinking
    if isinstance(thinking, int) and not isinstance(thinking, bool):
        raise BuildError(
            f"thinking={thinking} is a token budget, and {api} takes an effort: "
            "thinking='low', 'medium' or 'high'."
        )
    return None


def _stop(finish_reason: str | None) -> str | None:
    return "max_tokens" if finish_reason == "length" else finish_reason


class OpenAiPlatform(ProviderCaller):
    """What the callers of OpenAI's APIs share: the key, endpoint and model variables, the SDK
    client, and `thinking` taken as a reasoning effort."""

    key_env = "OPENAI_API_KEY"
    model_env = "OPENAI_MODEL"
    base_url_env = "OPENAI_BASE_URL"
    default_base_url = "https://api.openai.com/v1"
    key_required_with_base_url = False  # a compatible server may take any key
    supports_thinking = True
    api: ClassVar[str]
    """The API's name, as a refused setting names it."""

    def _checked_thinking(self, thinking: Thinking | None) -> str | int | dict[str, Any] | None:
        return effort(thinking, self.api) or super()._checked_thinking(thinking)

    def _make_client(self) -> Any:
        return openai_client(self._key(), self.base_url, self.timeout)


class OpenAiCaller(OpenAiPlatform):
    """An `LlmCaller` for OpenAI and OpenAI-compatible servers (vLLM, Ollama, llama.cpp, ...).

    `api_key` defaults to $OPENAI_API_KEY (needed for api.openai.com; a `base_url` server may
    take any key). `stream=True` passes text to `engine.stream()` as it arrives. Request
    settings: `temperature`, `top_p`, `seed`, `max_tokens`, `tool_choice` ("auto", "none",
    "required" or a tool name), `parallel_tool_calls`, `thinking` (sent as `reasoning_effort`:
    "low", "medium", "high", or any effort the server takes, such as "minimal"; a dict is
    merged into the request as the server's own fields), and `extra_body` for any other field.
    Retries follow `retry` (or `max_retries`); `timeout` bounds each HTTP request, in seconds.
    """

    provider = "OpenAI"
    api = "Chat Completions"
    fallback_model = DEFAULT_OPENAI_MODEL

    def __init__(
        self, *, max_tokens: int | None = None, seed: int | None = None, **options: Any
    ) -> None:
        super().__init__(**options)
        self.max_tokens = max_tokens
        self.seed = seed

    def _settings(self) -> dict[str, Any]:
        return {**super()._settings(), "seed": self.seed, "max_tokens": self.max_tokens}

    def _request(self, memory: AgentMemory, tools: ToolRegistry, model: str) -> dict[str, Any]:
        request: dict[str, Any] = {"model": model, "messages": openai_messages(memory)}
        for name in ("temperature", "top_p", "seed", "max_tokens"):
            if getattr(self, name) is not None:
                request[name] = getattr(self, name)
        if len(tools):
            request["tools"] = openai_tools(tools)
            if self.tool_choice is not None:
                request["tool_choice"] = _openai_tool_choice(self.tool_choice)
            if self.parallel_tool_calls is not None:
                request["parallel_tool_calls"] = self.parallel_tool_calls
        if isinstance(self.thinking, str):
            request["reasoning_effort"] = self.thinking
        elif isinstance(self.thinking, dict):
            request.update(self.thinking)
        return request

    async def _plain(self, client: Any, request: dict[str, Any]) -> LlmResponse:
        completion = await self._create(client.chat.completions.create, request)
        choices = getattr(completion, "choices", None) or []
        if not choices:
            raise MalformedResponse(f"{self.where} answered without choices")
        message = choices[0].message
        seen: set[str] = set()
        calls = [
            tool_call(
                tc.function.name,
                parse_arguments(tc.function.arguments, tc.function.name),
                getattr(tc, "id", None),
                seen,
            )
            for tc in (getattr(message, "tool_calls", None) or [])
        ]
        return self._response(
            calls,
            message.content,
            choices[0].finish_reason,
            _usage(getattr(completion, "usage", None)),
            _served(completion),
        )

    async def _streamed(self, client: Any, request: dict[str, Any]) -> LlmResponse:
        stream = await self._create(
            client.chat.completions.create,
            request,
            stream=True,
            stream_options={"include_usage": True},
        )
        text: list[str] = []
        parts: dict[int, dict[str, Any]] = {}
        finish: str | None = None
        usage: TokenUsage | None = None
        served: dict[str, str] = {}
        async for chunk in stream:
            served.update(_served(chunk))
            if getattr(chunk, "usage", None) is not None:
                usage = _usage(chunk.usage)
            for choice in getattr(chunk, "choices", None) or []:
                delta = getattr(choice, "delta", None)  # Azure sends a choice without one
                content = getattr(delta, "content", None)
                if content:
                    text.append(content)
                    emit_text(content)
                for tc in getattr(delta, "tool_calls", None) or []:
                    index = tc.index if getattr(tc, "index", None) is not None else len(parts)
                    part = parts.setdefault(index, {"id": None, "name": "", "arguments": ""})
                    if getattr(tc, "id", None):
                        part["id"] = part["id"] or tc.id
                    function = getattr(tc, "function", None)
                    if function is not None:
                        if getattr(function, "name", None):
                            part["name"] = part["name"] or function.name
                        arguments = getattr(function, "arguments", None)
                        if isinstance(arguments, dict):
                            part["arguments"] = arguments
                        elif arguments:
                            part["arguments"] += arguments
                if getattr(choice, "finish_reason", None):
                    finish = choice.finish_reason
        seen: set[str] = set()
        calls = [
            tool_call(p["name"], parse_arguments(p["arguments"], p["name"]), p["id"], seen)
            for _, p in sorted(parts.items())
        ]
        return self._response(calls, "".join(text) or None, finish, usage, served)

    @staticmethod
    def _response(
        calls: list[ToolCall],
        content: str | None,
        finish: str | None,
        usage: TokenUsage | None,
        served: dict[str, str],
    ) -> LlmResponse:
        if calls:
            return LlmResponse(
                calls=tuple(calls),
                content=content or None,
                usage=usage,
                stop_reason=_stop(finish),
                model=served.get("model"),
                system_fingerprint=served.get("system_fingerprint"),
                response_id=served.get("id"),
            )
        return LlmResponse(
            content=content or "",
            usage=usage,
            stop_reason=_stop(finish),
            model=served.get("model"),
            system_fingerprint=served.get("system_fingerprint"),
            response_id=served.get("id"),
        )


def openai_client(key: str | None, base_url: str | None, timeout: float, **options: Any) -> Any:
    """The SDK's async client, its own retries off (one `RetryPolicy` applies)."""
    import openai

    return openai.AsyncOpenAI(
        api_key=key or "not-needed", base_url=base_url, max_retries=0, timeout=timeout, **options
    )


def _served(raw: Any) -> dict[str, str]:
    """The response id, model and system fingerprint the server says answered, where it says
    them."""
    return {
        name: value
        for name in ("id", "model", "system_fingerprint")
        if isinstance(value := getattr(raw, name, None), str) and value
    }


def _openai_tool_choice(choice: str | Mapping[str, Any]) -> Any:
    if isinstance(choice, str) and choice not in ("auto", "none", "required"):
        return {"type": "function", "function": {"name": choice}}
    return choice
