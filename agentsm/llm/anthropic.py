"""AnthropicCaller: the Anthropic Messages API through the official `anthropic` SDK, with
native `tool_use` / `tool_result` blocks, parallel tool calls, streaming, extended thinking
(its blocks recorded and sent back unchanged) and prompt caching."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from ..errors import BuildError
from ..frozen import thaw
from ..types import LlmResponse, ReasoningPart, TokenUsage, ToolCall
from ._common import parse_arguments, tool_call
from ._images import image_base64, images_of
from .base import emit_reasoning, emit_text
from .provider import ProviderCaller, Thinking

if TYPE_CHECKING:
    from ..memory import AgentMemory
    from ..tools import ToolRegistry

__all__ = ["CACHE_PARTS", "DEFAULT_ANTHROPIC_MODEL", "THINKING_BUDGETS", "AnthropicCaller"]

DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-6"
"""Used when the agent's model string is empty and $ANTHROPIC_MODEL is not set."""

REASONING = "anthropic"
"""The `provider` of the reasoning parts this API returns and takes back (its blocks)."""

THINKING_BUDGETS = {"low": 1024, "medium": 4096, "high": 16384}
"""The `budget_tokens` of each thinking level (the API's least budget is 1024)."""

ANSWER_ROOM = 4096
"""Tokens left for the answer above the thinking budget when `max_tokens` is not given."""

CACHE_PARTS = ("system", "tools", "conversation")
"""What `cache=` may mark with a breakpoint, in the order of the request."""

_THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})


def anthropic_messages(memory: AgentMemory) -> tuple[str | None, list[dict[str, Any]]]:
    """The system prompt and `memory.build_messages()` as Messages API turns: tool calls as
    `tool_use` blocks after the turn's thinking blocks (sent back as they came), a turn's
    results as `tool_result` blocks in one user message, and consecutive user content merged
    so that roles alternate. Images are `image` blocks (a URL or base64 source), in a
    `tool_result`'s content for a tool's."""
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
            blocks: list[dict[str, Any]] = [  # first, unchanged, as the API requires
                thaw(part["native"])
                for part in m.get("reasoning") or ()
                if part.get("provider") == REASONING
            ]
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
            if images_of(m):  # the result's content as blocks: its text, then its images
                result["content"] = [{"type": "text", "text": m["content"]}, *_image_blocks(m)]
            if m.get("is_error"):
                result["is_error"] = True
            add("user", [result])
        else:
            add("user", [{"type": "text", "text": m["content"]}, *_image_blocks(m)])
    return system, turns


def _image_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A message's images as `image` blocks: a URL source, or base64 with the media type."""
    blocks = []
    for part in images_of(message):
        source: dict[str, Any]
        if part.get("url"):
            source = {"type": "url", "url": part["url"]}
        else:
            data = image_base64(part, "The Messages API")
            source = {"type": "base64", "media_type": part["media_type"], "data": data}
        blocks.append({"type": "image", "source": source})
    return blocks


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
    it arrives (and thinking, as `ReasoningDelta`s). Request settings: `max_tokens` (the API
    requires it: 4096, or the thinking budget plus 4096), `temperature`, `top_p`, `top_k`,
    `tool_choice` ("auto", "none", "required" or a tool name), `parallel_tool_calls` (False
    sends `disable_parallel_tool_use`), and `extra_body` for any other field. Retries follow
    `retry` (or `max_retries`); `timeout` bounds each HTTP request, in seconds.

    `thinking` turns on extended thinking: "low", "medium" or "high" (budgets of 1024, 4096 and
    16384 tokens), a budget of at least 1024 tokens, or the API's own `thinking` object (sent
    as it is). The thinking blocks of a response are recorded with it and sent back unchanged,
    first in their assistant turn, as the API requires.

    `cache` marks prompt-cache breakpoints (`cache_control` of type "ephemeral", with
    `cache_ttl` "5m" or "1h" if given): "auto" lets the API place one on the last cacheable
    block, or name what to mark among "system" (the system prompt), "tools" (the last tool)
    and "conversation" (the last block of the last message); "off" (the default) marks none.
    Cache reads and writes are counted in the usage apart from the input tokens.
    """

    provider = "Anthropic"
    key_env = "ANTHROPIC_API_KEY"
    model_env = "ANTHROPIC_MODEL"
    base_url_env = "ANTHROPIC_BASE_URL"
    default_base_url = "https://api.anthropic.com"
    fallback_model = DEFAULT_ANTHROPIC_MODEL
    supports_thinking = True

    def __init__(
        self,
        *,
        max_tokens: int | None = None,
        top_k: int | None = None,
        cache: str | Iterable[str] | None = None,
        cache_ttl: Literal["5m", "1h"] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        budget = self._budget()
        if max_tokens is None:
            max_tokens = 4096 if budget is None else budget + ANSWER_ROOM
        elif budget is not None and max_tokens <= budget:
            raise BuildError(
                f"max_tokens={max_tokens} leaves no room for the answer after a thinking budget "
                f"of {budget} tokens; give max_tokens above it (e.g. {budget + ANSWER_ROOM}), "
                "or leave it out."
            )
        self.max_tokens = max_tokens
        self.top_k = top_k
        self.cache = _cache(cache)
        if cache_ttl not in (None, "5m", "1h"):
            raise BuildError(f"cache_ttl={cache_ttl!r} is neither '5m' nor '1h'.")
        self.cache_ttl = cache_ttl

    def _settings(self) -> dict[str, Any]:
        return {
            **super()._settings(),
            "top_k": self.top_k,
            "max_tokens": self.max_tokens,
            "cache": self.cache if isinstance(self.cache, str) else list(self.cache) or None,
            "cache_ttl": self.cache_ttl,
        }

    def _checked_thinking(self, thinking: Thinking | None) -> str | int | dict[str, Any] | None:
        refuse_small_budget(thinking, "the API")
        return super()._checked_thinking(thinking)

    def _budget(self) -> int | None:
        """The thinking budget in tokens, None without one."""
        return claude_budget(self.thinking)

    def _thinking(self) -> dict[str, Any] | None:
        """The request's `thinking` object, None when thinking is off."""
        if isinstance(self.thinking, dict):
            return dict(self.thinking)
        budget = self._budget()
        return None if budget is None else {"type": "enabled", "budget_tokens": budget}

    def _marker(self) -> dict[str, str]:
        marker = {"type": "ephemeral"}
        if self.cache_ttl is not None:
            marker["ttl"] = self.cache_ttl
        return marker

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
        thinking = self._thinking()
        if thinking is not None:
            request["thinking"] = thinking
        if len(tools):
            request["tools"] = anthropic_tools(tools)
            choice = _anthropic_tool_choice(self.tool_choice, self.parallel_tool_calls)
            if choice is not None:
                request["tool_choice"] = choice
        self._mark_cache(request)
        return request

    def _mark_cache(self, request: dict[str, Any]) -> None:
        """Put the cache breakpoints `cache` asks for on the request."""
        if self.cache == "auto":
            request["cache_control"] = self._marker()
            return
        if "system" in self.cache and request.get("system"):
            text = request["system"]
            request["system"] = [{"type": "text", "text": text, "cache_control": self._marker()}]
        if "tools" in self.cache and request.get("tools"):
            request["tools"][-1]["cache_control"] = self._marker()
        if "conversation" in self.cache and request["messages"]:
            blocks = request["messages"][-1]["content"]
            marked = [b for b in blocks if b.get("type") not in _THINKING_BLOCKS]
            if marked:  # thinking blocks take no breakpoint
                marked[-1]["cache_control"] = self._marker()

    async def _plain(self, client: Any, request: dict[str, Any]) -> LlmResponse:
        message = await self._create(client.messages.create, request)
        text: list[str] = []
        calls: list[ToolCall] = []
        reasoning: list[ReasoningPart] = []
        seen: set[str] = set()
        for block in getattr(message, "content", None) or []:
            kind = getattr(block, "type", None)
            if kind == "text":
                text.append(block.text)
            elif kind == "tool_use":
                args = parse_arguments(getattr(block, "input", None), block.name)
                calls.append(tool_call(block.name, args, getattr(block, "id", None), seen))
            elif kind == "thinking":
                reasoning.append(_thought(block.thinking, block.signature))
            elif kind == "redacted_thinking":
                reasoning.append(_redacted(block.data))
        usage: dict[str, int] = {}
        _usage(getattr(message, "usage", None), usage)
        stop = getattr(message, "stop_reason", None)
        return self._response(calls, "".join(text), stop, usage, _served(message), reasoning)

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
                    "thinking": getattr(block, "thinking", "") or "",
                    "signature": getattr(block, "signature", "") or "",
                    "data": getattr(block, "data", "") or "",
                }
            elif kind == "content_block_delta":
                part = blocks.setdefault(event.index, {"type": "text", "text": "", "json": ""})
                delta = event.delta
                shape = getattr(delta, "type", None)
                if shape == "text_delta":
                    part["text"] += delta.text
                    emit_text(delta.text)
                elif shape == "input_json_delta":
                    part["json"] += delta.partial_json or ""
                elif shape == "thinking_delta":
                    part["thinking"] = part.get("thinking", "") + delta.thinking
                    emit_reasoning(delta.thinking)
                elif shape == "signature_delta":
                    part["signature"] = delta.signature
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
        reasoning = [
            _thought(b["thinking"], b["signature"])
            if b["type"] == "thinking"
            else _redacted(b["data"])
            for _, b in sorted(blocks.items())
            if b["type"] in _THINKING_BLOCKS
        ]
        return self._response(calls, text, stop, usage, served, reasoning)

    @staticmethod
    def _response(
        calls: list[ToolCall],
        text: str,
        stop: str | None,
        usage: dict[str, int],
        served: dict[str, str],
        reasoning: list[ReasoningPart],
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
                reasoning=tuple(reasoning),
                response_id=served.get("id"),
            )
        return LlmResponse(
            content=text,
            usage=tokens,
            stop_reason=stop,
            model=served.get("model"),
            system_fingerprint=served.get("system_fingerprint"),
            reasoning=tuple(reasoning),
            response_id=served.get("id"),
        )


def _thought(thinking: str, signature: str) -> ReasoningPart:
    """A `thinking` block as recorded: its text shown, the block sent back as it came."""
    native = {"type": "thinking", "thinking": thinking, "signature": signature}
    return ReasoningPart(kind="thinking", text=thinking, provider=REASONING, native=native)


def _redacted(data: str) -> ReasoningPart:
    """A `redacted_thinking` block as recorded: nothing to show, its data sent back."""
    native = {"type": "redacted_thinking", "data": data}
    return ReasoningPart(kind="redacted", provider=REASONING, native=native)


def _cache(cache: str | Iterable[str] | None) -> str | tuple[str, ...]:
    """`cache` as the caller keeps it: "auto", or the parts to mark in request order (none:
    off)."""
    if cache is None or cache == "off":
        return ()
    if cache == "auto":
        return "auto"
    names = (cache,) if isinstance(cache, str) else tuple(cache)
    unknown = [n for n in names if n not in CACHE_PARTS]
    if unknown or not all(isinstance(n, str) for n in names):
        raise BuildError(
            f"cache={cache!r} is not 'auto', 'off' or some of {', '.join(CACHE_PARTS)}: "
            f"mark the system prompt, the tools or the conversation, e.g. "
            "cache=('system', 'tools')."
        )
    return tuple(n for n in CACHE_PARTS if n in names)


def refuse_small_budget(thinking: object, where: str) -> None:
    """A Claude thinking budget under the least one (1024 tokens) is refused when it is set."""
    if isinstance(thinking, int) and not isinstance(thinking, bool) and 0 < thinking < 1024:
        raise BuildError(
            f"thinking={thinking} is under the least thinking budget of {where} (1024 tokens); "
            "give 1024 or more, or a level ('low', 'medium', 'high')."
        )


def claude_budget(thinking: str | int | dict[str, Any] | None) -> int | None:
    """The thinking budget in tokens that a Claude `thinking=` setting asks for (a level, a
    number, or the API's own object with `budget_tokens`), None without one."""
    if isinstance(thinking, str):
        return THINKING_BUDGETS[thinking]
    if isinstance(thinking, dict):
        budget = thinking.get("budget_tokens")
        return budget if isinstance(budget, int) and not isinstance(budget, bool) else None
    return thinking


def _served(message: Any) -> dict[str, str]:
    """The message id and the model the server says answered, where it says them."""
    return {
        name: value
        for name in ("id", "model")
        if isinstance(value := getattr(message, name, None), str) and value
    }


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
