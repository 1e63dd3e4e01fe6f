"""AnthropicCaller: the Anthropic Messages API through the official `anthropic` SDK, with
native `tool_use` / `tool_result` blocks, parallel tool calls and streaming."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..types import LlmResponse, TokenUsage, ToolCall
from ._common import parse_arguments, tool_call
from .base import emit_text
from .provider import ProviderCaller

if TYPE_CHECKING:
    from ..memory import AgentMemory
    from ..tools import ToolRegistry

__all__ = ["DEFAULT_ANTHROPIC_MODEL", "AnthropicCaller"]

DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-6"
"""Used when the agent's model string is empty and $ANTHROPIC_MODEL is not set."""


def anthropic_messages(memory: AgentMemory) -> tuple[str | None, list[dict[str, Any]]]:
    """The system prompt and `memory.build_messages()` as Messages API turns: tool calls as
    `tool_use` blocks, a turn's results as `tool_result` blocks in one user message, and
    consecutive user content merged so that roles alternate."""
    system: str | None = None
    turns: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})

    for m in memory.build_messages():
        if m["role"] == "system":
            system = m["content"]
        elif m["role"] == "assistant":
            blocks: list[dict[str, Any]] = []
            if m.get("content"):
                blocks.append({"type": "text", "text": m["content"]})
            blocks.extend(
                {"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["arguments"]}
                for c in m.get("tool_calls") or []
            )
            add("assistant", blocks)
        elif m["role"] == "tool":
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": m["tool_call_id"],
                "content": m["content"],
            }
            if m.get("is_error"):
                result["is_error"] = True
            add("user", [result])
        else:
            add("user", [{"type": "text", "text": m["content"]}])
    return system, turns


def anthropic_tools(tools: ToolRegistry) -> list[dict[str, Any]]:
    """The registry's schemas as Messages API tools."""
    return [
        {"name": s.name, "description": s.description, "input_schema": s.input_schema}
        for s in tools.schemas()
    ]


def _usage(raw: Any, into: dict[str, int]) -> None:
    if raw is None:
        return
    for field, name in (
        ("input_tokens", "input_tokens"),
        ("output_tokens", "output_tokens"),
        ("cache_read_input_tokens", "cache_read_tokens"),
        ("cache_creation_input_tokens", "cache_write_tokens"),
    ):
        value = getattr(raw, field, None)
        if value:
            into[name] = int(value)


class AnthropicCaller(ProviderCaller):
    """An `LlmCaller` for the Anthropic Messages API (or a proxy/test server at `base_url`).

    `api_key` defaults to $ANTHROPIC_API_KEY. `stream=True` passes text to `engine.stream()` as
    it arrives. Request settings: `max_tokens` (the API requires it), `temperature`, `top_p`,
    `top_k`, `tool_choice` ("auto", "none", "required" or a tool name), `parallel_tool_calls`
    (False sends `disable_parallel_tool_use`), and `extra_body` for any other field. Retries
    follow `retry` (or `max_retries`); `timeout` bounds each HTTP request, in seconds.
    """

    provider = "Anthropic"
    key_env = "ANTHROPIC_API_KEY"
    model_env = "ANTHROPIC_MODEL"
    base_url_env = "ANTHROPIC_BASE_URL"
    default_base_url = "https://api.anthropic.com"
    fallback_model = DEFAULT_ANTHROPIC_MODEL

    def __init__(self, *, max_tokens: int = 4096, top_k: int | None = None, **options: Any) -> None:
        super().__init__(**options)
        self.max_tokens = max_tokens
        self.top_k = top_k

    def _settings(self) -> dict[str, Any]:
        return {**super()._settings(), "top_k": self.top_k, "max_tokens": self.max_tokens}

    def _make_client(self) -> Any:
        import anthropic

        return anthropic.AsyncAnthropic(
            api_key=self._key(), base_url=self.base_url, max_retries=0, timeout=self.timeout
        )

    def _request(self, memory: AgentMemory, tools: ToolRegistry, model: str) -> dict[str, Any]:
        system, messages = anthropic_messages(memory)
        request: dict[str, Any] = {
            "model": model,
            "max_tokens": self.max_tokens,
            "messages": messages,
        }
        if system:
            request["system"] = system
        for name in ("temperature", "top_p", "top_k"):
            if getattr(self, name) is not None:
                request[name] = getattr(self, name)
        if len(tools):
            request["tools"] = anthropic_tools(tools)
            choice = _anthropic_tool_choice(self.tool_choice, self.parallel_tool_calls)
            if choice is not None:
                request["tool_choice"] = choice
        return request

    async def _plain(self, client: Any, request: dict[str, Any]) -> LlmResponse:
        message = await self._create(client.messages.create, request)
        text: list[str] = []
        calls: list[ToolCall] = []
        seen: set[str] = set()
        for block in getattr(message, "content", None) or []:
            kind = getattr(block, "type", None)
            if kind == "text":
                text.append(block.text)
            elif kind == "tool_use":
                args = parse_arguments(getattr(block, "input", None), block.name)
                calls.append(tool_call(block.name, args, getattr(block, "id", None), seen))
        usage: dict[str, int] = {}
        _usage(getattr(message, "usage", None), usage)
        stop = getattr(message, "stop_reason", None)
        return self._response(calls, "".join(text), stop, usage, _served(message))

    async def _streamed(self, client: Any, request: dict[str, Any]) -> LlmResponse:
        stream = await self._create(client.messages.create, request, stream=True)
        blocks: dict[int, dict[str, Any]] = {}
        usage: dict[str, int] = {}
        stop: str | None = None
        served: dict[str, str] = {}
        async for event in stream:
            kind = getattr(event, "type", None)
            if kind == "message_start":
                served = _served(event.message)
                _usage(getattr(event.message, "usage", None), usage)
            elif kind == "content_block_start":
                block = event.content_block
                blocks[event.index] = {
                    "type": getattr(block, "type", None),
                    "text": getattr(block, "text", "") or "",
                    "id": getattr(block, "id", None),
                    "name": getattr(block, "name", None),
                    "json": "",
                }
            elif kind == "content_block_delta":
                part = blocks.setdefault(event.index, {"type": "text", "text": "", "json": ""})
                delta = event.delta
                if getattr(delta, "type", None) == "text_delta":
                    part["text"] += delta.text
                    emit_text(delta.text)
                elif getattr(delta, "type", None) == "input_json_delta":
                    part["json"] += delta.partial_json or ""
            elif kind == "message_delta":
                stop = getattr(event.delta, "stop_reason", None) or stop
                _usage(getattr(event, "usage", None), usage)
        text = "".join(b["text"] for _, b in sorted(blocks.items()) if b["type"] == "text")
        seen: set[str] = set()
        calls = [
            tool_call(b["name"], parse_arguments(b["json"], b["name"]), b["id"], seen)
            for _, b in sorted(blocks.items())
            if b["type"] == "tool_use"
        ]
        return self._response(calls, text, stop, usage, served)

    @staticmethod
    def _response(
        calls: list[ToolCall],
        text: str,
        stop: str | None,
        usage: dict[str, int],
        served: dict[str, str],
    ) -> LlmResponse:
        tokens = TokenUsage(**usage) if usage else None
        if calls:
            return LlmResponse(
                calls=tuple(calls),
                content=text.strip() or None,
                usage=tokens,
                stop_reason=stop,
                model=served.get("model"),
                system_fingerprint=served.get("system_fingerprint"),
            )
        return LlmResponse(
            content=text,
            usage=tokens,
            stop_reason=stop,
            model=served.get("model"),
            system_fingerprint=served.get("system_fingerprint"),
        )


def _served(message: Any) -> dict[str, str]:
    """The model the server says answered."""
    model = getattr(message, "model", None)
    return {"model": model} if isinstance(model, str) and model else {}


def _anthropic_tool_choice(
    choice: str | Mapping[str, Any] | None, parallel: bool | None
) -> dict[str, Any] | None:
    """The caller's tool choice in the Messages API's shape; `parallel=False` adds
    `disable_parallel_tool_use` (to an "auto" choice when none was given)."""
    if choice is None and parallel is None:
        return None
    if choice is None or isinstance(choice, str):
        shapes = {"auto": "auto", "none": "none", "required": "any", "any": "any"}
        name = choice or "auto"
        shaped: dict[str, Any] = (
            {"type": shapes[name]} if name in shapes else {"type": "tool", "name": name}
        )
    else:
        shaped = dict(choice)
    if parallel is not None and shaped.get("type") != "none":
        shaped["disable_parallel_tool_use"] = not parallel
    return shaped
