"""OpenAiResponsesCaller: OpenAI's Responses API (`POST /v1/responses`) through the official
`openai` SDK: function calls and their outputs, parallel calls, reasoning items kept with their
turn and sent back (encrypted, so that `store=False` works), and streamed events."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from ..frozen import thaw
from ..types import LlmResponse, ReasoningPart, TokenUsage, ToolCall
from ._common import parse_arguments, tool_call
from ._images import image_data_url, images_of
from .base import emit_reasoning, emit_text
from .errors import BadRequest, NetworkError, ProviderError, RateLimited, ServerError, redact
from .openai import OpenAiPlatform, detail

if TYPE_CHECKING:
    from ..memory import AgentMemory
    from ..tools import ToolRegistry

__all__ = [
    "DEFAULT_RESPONSES_MODEL",
    "FOLLOWED_BY",
    "REASONING",
    "OpenAiResponsesCaller",
    "responses_input",
    "responses_tools",
]

DEFAULT_RESPONSES_MODEL = "gpt-5-mini"
"""Used when the agent's model string is empty and $OPENAI_MODEL is not set."""

REASONING = "openai-responses"
"""The `provider` of the reasoning parts this API returns and takes back (reasoning items)."""

FOLLOWED_BY = "_followed_by"
"""Where a reasoning part keeps, beside the reasoning item, the items of its turn that came
after it up to the next reasoning item (a message, function calls), as they were returned. The
API pairs a reasoning item with the item that followed it, by that item's id, so they go back
together and in order; the key itself is taken off before the item is sent."""

ENCRYPTED_REASONING = "reasoning.encrypted_content"


def responses_input(memory: AgentMemory) -> tuple[str | None, list[dict[str, Any]]]:
    """The system prompt (as `instructions`) and `memory.build_messages()` as Responses input
    items: a turn's output items as they came (reasoning, message, function calls, in order),
    then one `function_call_output` item per result (its images in its output, as
    `input_image` content after its text); a user message's images as `input_image` content."""
    instructions: str | None = None
    items: list[dict[str, Any]] = []
    for m in memory.build_messages():
        role = m["role"]
        if role == "system":
            instructions = m["content"]
        elif role == "assistant" and (m.get("tool_calls") or m.get("reasoning")):
            items.extend(_turn(m))
        elif role == "tool":
            output: str | list[dict[str, Any]] = m["content"]
            if images_of(m):  # the output as content: its text, then its images
                output = [{"type": "input_text", "text": m["content"]}, *_image_inputs(m)]
            items.append(
                {"type": "function_call_output", "call_id": m["tool_call_id"], "output": output}
            )
        elif images_of(m):
            content = [{"type": "input_text", "text": m["content"]}, *_image_inputs(m)]
            items.append({"role": role, "content": content})
        else:
            items.append({"role": role, "content": m["content"]})
    return instructions, items


def _image_inputs(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A message's images as `input_image` content (bytes as data: URLs)."""
    return [
        {"type": "input_image", "image_url": image_data_url(part, "Responses"), "detail": "auto"}
        for part in images_of(message)
    ]


def _turn(said: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One assistant turn's items: each reasoning item of ours followed by the items that came
    after it (a function call as the turn's call is now, with its item id); text and calls
    that no reasoning item went with, before and after them."""
    calls = {c["id"]: c for c in said.get("tool_calls") or []}
    kept: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    for part in said.get("reasoning") or ():
        if part.get("provider") == REASONING:
            item = thaw(part["native"])
            kept.append((item, item.pop(FOLLOWED_BY, None) or []))
    items: list[dict[str, Any]] = []
    told = any(after.get("type") == "message" for _, followers in kept for after in followers)
    if said.get("content") and not told:
        items.append({"role": "assistant", "content": said["content"]})
    for item, followers in kept:
        items.append(item)
        for after in followers:
            if after.get("type") != "function_call":
                items.append(after)
            elif (call := calls.pop(after.get("call_id"), None)) is not None:
                items.append(_function_call(call, after))
    items.extend(_function_call(call) for call in calls.values())
    return items


def _function_call(
    call: Mapping[str, Any], item: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A `function_call` input item for a call of the history (`id`, `call_id` ...), with the
    id and the very arguments text of the item it came in, if that is known and still holds."""
    arguments = json.dumps(call["arguments"], separators=(",", ":"), ensure_ascii=False)
    if item is not None and isinstance(item.get("arguments"), str):
        try:
            if json.loads(item["arguments"]) == call["arguments"]:
                arguments = item["arguments"]
        except ValueError:
            pass
    sent = {"type": "function_call", "call_id": call["id"], "name": call["name"]}
    if item is not None and item.get("id"):
        sent["id"] = item["id"]
    return {**sent, "arguments": arguments}


def responses_tools(tools: ToolRegistry) -> list[dict[str, Any]]:
    """The registry's schemas as Responses function tools (not strict: any JSON schema)."""
    return [
        {
            "type": "function",
            "name": s.name,
            "description": s.description,
            "parameters": s.input_schema,
            "strict": False,
        }
        for s in tools.schemas()
    ]


def _tool_choice(choice: str | Mapping[str, Any]) -> Any:
    if isinstance(choice, str) and choice not in ("auto", "none", "required"):
        return {"type": "function", "name": choice}
    return choice


def _outcome(items: Iterable[Mapping[str, Any]]) -> tuple[list[ToolCall], str, list[ReasoningPart]]:
    """The calls, text and reasoning of a response's output items, in their order."""
    calls: list[ToolCall] = []
    text: list[str] = []
    thoughts: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    seen: set[str] = set()
    for item in items:
        kind = item.get("type")
        if kind == "reasoning":
            thoughts.append((dict(item), []))
            continue
        if thoughts:
            thoughts[-1][1].append(dict(item))
        if kind == "message":
            for content in item.get("content") or ():
                if content.get("type") == "output_text":
                    text.append(content.get("text") or "")
                elif content.get("type") == "refusal":
                    text.append(content.get("refusal") or "")
        elif kind == "function_call":
            name = item.get("name") or ""
            args = parse_arguments(item.get("arguments"), name)
            calls.append(tool_call(name, args, item.get("call_id"), seen))
    return calls, "".join(text), [_thought(item, after) for item, after in thoughts]


def _thought(item: dict[str, Any], followers: list[dict[str, Any]]) -> ReasoningPart:
    """A reasoning item as recorded: its summary (or reasoning text) shown, the item kept whole
    with the items that followed it."""
    summary = "\n\n".join(s.get("text") or "" for s in item.get("summary") or ())
    thought = "\n\n".join(c.get("text") or "" for c in item.get("content") or ())
    kind: Literal["thinking", "summary", "redacted"] = (
        "thinking" if thought else "summary" if summary else "redacted"
    )
    native = {**item, FOLLOWED_BY: followers} if followers else item
    return ReasoningPart(kind=kind, text=thought or summary, provider=REASONING, native=native)


def _usage(raw: Any) -> TokenUsage | None:
    if raw is None:
        return None
    return TokenUsage(
        input_tokens=getattr(raw, "input_tokens", 0) or 0,
        output_tokens=getattr(raw, "output_tokens", 0) or 0,
        cache_read_tokens=detail(raw, "input_tokens_details", "cached_tokens"),
        cache_write_tokens=detail(raw, "input_tokens_details", "cache_write_tokens"),
        reasoning_tokens=detail(raw, "output_tokens_details", "reasoning_tokens"),
    )


def _stop(response: Any) -> str | None:
    """The response's status; "max_tokens" for one cut off at `max_output_tokens`."""
    status = getattr(response, "status", None)
    if status == "incomplete":
        reason = getattr(getattr(response, "incomplete_details", None), "reason", None)
        return "max_tokens" if reason == "max_output_tokens" else reason or status
    return status if isinstance(status, str) else None


def _as_dict(item: Any) -> dict[str, Any]:
    """An SDK output item as the JSON the server sent (unknown newer fields included)."""
    if isinstance(item, Mapping):
        return dict(item)
    return item.to_dict()  # type: ignore[no-any-return]


class OpenAiResponsesCaller(OpenAiPlatform):
    """An `LlmCaller` for OpenAI's Responses API (or a server at `base_url` that serves it).

    `api_key` defaults to $OPENAI_API_KEY. `stream=True` passes text to `engine.stream()` as it
    arrives, and reasoning summaries as `ReasoningDelta`s. Request settings: `temperature`,
    `top_p`, `max_tokens` (sent as `max_output_tokens`), `tool_choice` ("auto", "none",
    "required" or a tool name), `parallel_tool_calls`, and `extra_body` for any other field.

    `thinking` sets the reasoning effort ("low", "medium", "high", or any effort the server
    takes, such as "minimal"), with summaries on ("auto"); a dict is the API's own `reasoning`
    object. Reasoning items come back recorded with the response and go back unchanged, in
    their place, with the items that followed them. `store` (False by default: OpenAI keeps
    nothing) asks for the reasoning encrypted (`include`, which may also be given), so that it
    can be sent back without the server having stored it.
    """

    provider = "OpenAI Responses"
    api = "the Responses API"
    fallback_model = DEFAULT_RESPONSES_MODEL

    def __init__(
        self,
        *,
        max_tokens: int | None = None,
        store: bool = False,
        include: Iterable[str] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.max_tokens = max_tokens
        self.store = store
        self.include = None if include is None else list(include)

    def _settings(self) -> dict[str, Any]:
        return {
            **super()._settings(),
            "max_tokens": self.max_tokens,
            "store": self.store,
            "include": self.include,
        }

    def _request(self, memory: AgentMemory, tools: ToolRegistry, model: str) -> dict[str, Any]:
        instructions, items = responses_input(memory)
        request: dict[str, Any] = {"model": model, "input": items}
        if instructions:
            request["instructions"] = instructions
        for name, field in (
            ("temperature", "temperature"),
            ("top_p", "top_p"),
            ("max_tokens", "max_output_tokens"),
        ):
            if getattr(self, name) is not None:
                request[field] = getattr(self, name)
        if len(tools):
            request["tools"] = responses_tools(tools)
            if self.tool_choice is not None:
                request["tool_choice"] = _tool_choice(self.tool_choice)
            if self.parallel_tool_calls is not None:
                request["parallel_tool_calls"] = self.parallel_tool_calls
        if isinstance(self.thinking, str):
            request["reasoning"] = {"effort": self.thinking, "summary": "auto"}
        elif isinstance(self.thinking, dict):
            request["reasoning"] = dict(self.thinking)
        request["store"] = self.store
        include = self.include
        if include is None:
            include = [] if self.store else [ENCRYPTED_REASONING]
        if include:
            request["include"] = include
        return request

    async def _plain(self, client: Any, request: dict[str, Any]) -> LlmResponse:
        response = await self._create(client.responses.create, request)
        self._check(response)
        items = [_as_dict(item) for item in getattr(response, "output", None) or ()]
        return self._response(items, response)

    async def _streamed(self, client: Any, request: dict[str, Any]) -> LlmResponse:
        stream = await self._create(client.responses.create, request, stream=True)
        added: dict[int, dict[str, Any]] = {}
        done: dict[int, dict[str, Any]] = {}
        arguments: dict[int, str] = {}
        final: Any = None
        async for event in stream:
            kind = getattr(event, "type", None)
            if kind == "response.output_text.delta":
                emit_text(event.delta)
            elif kind == "response.reasoning_summary_text.delta":
                emit_reasoning(event.delta, "summary")
            elif kind == "response.reasoning_summary_part.added" and event.summary_index:
                emit_reasoning("\n\n", "summary")  # as the recorded summary joins its parts
            elif kind == "response.reasoning_text.delta":
                emit_reasoning(event.delta)
            elif kind == "response.function_call_arguments.delta":
                index = event.output_index
                arguments[index] = arguments.get(index, "") + event.delta
            elif kind == "response.output_item.added":
                added[event.output_index] = _as_dict(event.item)
            elif kind == "response.output_item.done":  # the whole item: encrypted reasoning too
                done[event.output_index] = _as_dict(event.item)
            elif kind == "error":
                raise self._failure(getattr(event, "code", None), getattr(event, "message", ""))
            elif kind in ("response.completed", "response.incomplete", "response.failed"):
                final = event.response
                self._check(final)
        if final is None:
            raise NetworkError(f"{self.where} ended the stream before the response was complete")
        given = dict(enumerate(_as_dict(i) for i in getattr(final, "output", None) or ()))
        for index, text in arguments.items():
            if index in added and not added[index].get("arguments"):
                added[index]["arguments"] = text
        items = {**added, **given, **done}
        return self._response([items[i] for i in sorted(items)], final)

    def _response(self, items: list[dict[str, Any]], response: Any) -> LlmResponse:
        calls, text, reasoning = _outcome(items)
        model = getattr(response, "model", None)
        given = getattr(response, "id", None)
        common: dict[str, Any] = {
            "usage": _usage(getattr(response, "usage", None)),
            "stop_reason": _stop(response),
            "model": model if isinstance(model, str) and model else None,
            "reasoning": tuple(reasoning),
            "response_id": given if isinstance(given, str) and given else None,
        }
        if calls:
            return LlmResponse(calls=tuple(calls), content=text or None, **common)
        return LlmResponse(content=text, **common)

    def _check(self, response: Any) -> None:
        """Raise the error of a response the server says failed."""
        if getattr(response, "status", None) == "failed":
            error = getattr(response, "error", None)
            raise self._failure(getattr(error, "code", None), getattr(error, "message", ""))

    def _failure(self, code: str | None, message: str | None) -> ProviderError:
        """A failure the server reported in a response or mid-stream, classified by its code."""
        shown = redact(str(message or "no message"), self._api_key, os.environ.get(self.key_env))
        text = f"{self.where} failed the response ({code or 'no code'}): {shown}"
        if code == "rate_limit_exceeded":
            return RateLimited(text)
        if code is None or code == "server_error" or "timeout" in code:
            return ServerError(text)
        return BadRequest(text)
