"""What the OpenTelemetry GenAI semantic conventions call the things a run records: the
provider's well-known name, the request settings and token usage as attributes, and
messages in the conventions' JSON shape (roles and parts)."""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

from agentsm.frozen import thaw
from agentsm.types import LlmResponse, TokenUsage

__all__ = [
    "OTHER",
    "finish_reason",
    "input_messages",
    "output_message",
    "provider_name",
    "request_attributes",
    "server_attributes",
    "usage_attributes",
]

OTHER = "_OTHER"
"""The provider of a run whose LLM caller did not say which it is (a scripted mock, a
caller of one's own without a `settings["provider"]`)."""

_PROVIDERS = {
    "openai": "openai",
    "openai responses": "openai",
    "azure openai": "azure.ai.openai",
    "azure openai responses": "azure.ai.openai",
    "anthropic": "anthropic",
    "gemini": "gcp.gemini",
    "bedrock": "aws.bedrock",
}
"""The provider callers' recorded names (`settings["provider"]`, lower-cased) and their
well-known `gen_ai.provider.name`."""

_CACHE_APART = frozenset({"anthropic", "aws.bedrock", "gcp.gemini", "gcp.vertex_ai"})
"""Providers whose callers record the input tokens without the cached ones (read and
written); OpenAI's count includes them."""

_REQUEST: dict[str, tuple[str, type]] = {
    "temperature": ("gen_ai.request.temperature", float),
    "top_p": ("gen_ai.request.top_p", float),
    "top_k": ("gen_ai.request.top_k", int),
    "seed": ("gen_ai.request.seed", int),
    "max_tokens": ("gen_ai.request.max_tokens", int),
    "frequency_penalty": ("gen_ai.request.frequency_penalty", float),
    "presence_penalty": ("gen_ai.request.presence_penalty", float),
}


def provider_name(settings: Mapping[str, Any]) -> str:
    """`gen_ai.provider.name` of a run's LLM caller, from its recorded settings: the
    well-known name of each provider caller (Gemini on Vertex AI is `gcp.vertex_ai`), a
    caller's own name as it records it (lower-cased), else `_OTHER`."""
    recorded = settings.get("provider")
    if not isinstance(recorded, str) or not recorded.strip():
        return OTHER
    key = recorded.strip().lower()
    if key == "gemini" and settings.get("vertexai"):
        return "gcp.vertex_ai"
    return _PROVIDERS.get(key, key)


def request_attributes(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The `gen_ai.request.*` attributes of the recorded settings (temperature, seed, maximum
    tokens, ...), each of the type the conventions give it; a value of another type is left
    out."""
    attributes: dict[str, Any] = {}
    for name, (key, kind) in _REQUEST.items():
        value = settings.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if kind is int and not isinstance(value, int):
            continue
        attributes[key] = float(value) if kind is float else value
    stops = settings.get("stop_sequences", settings.get("stop"))
    if isinstance(stops, str):
        stops = [stops]
    if isinstance(stops, Sequence) and stops and all(isinstance(s, str) for s in stops):
        attributes["gen_ai.request.stop_sequences"] = list(stops)
    return attributes


def usage_attributes(usage: TokenUsage, provider: str) -> dict[str, int]:
    """The `gen_ai.usage.*` attributes of one call's usage. The input count includes the
    cached tokens, as the conventions ask, for providers that count them apart."""
    cached = usage.cache_read_tokens + usage.cache_write_tokens
    attributes = {
        "gen_ai.usage.input_tokens": usage.input_tokens
        + (cached if provider in _CACHE_APART else 0),
        "gen_ai.usage.output_tokens": usage.output_tokens,
    }
    if usage.cache_read_tokens:
        attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cache_read_tokens
    if usage.cache_write_tokens:
        attributes["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write_tokens
    if usage.reasoning_tokens:
        attributes["gen_ai.usage.reasoning.output_tokens"] = usage.reasoning_tokens
    return attributes


def server_attributes(response: LlmResponse) -> dict[str, Any]:
    """`server.address` and `server.port` of the server that answered, where recorded."""
    if not response.server:
        return {}
    try:
        parts = urllib.parse.urlsplit(response.server)
        port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
    except ValueError:
        return {}
    if not parts.hostname:
        return {}
    return {"server.address": parts.hostname} | ({"server.port": port} if port else {})


def finish_reason(response: LlmResponse) -> str:
    """Why the response ended, in the conventions' words: tool_call, length, content_filter
    or stop."""
    said = (response.stop_reason or "").lower()
    if said in ("max_tokens", "length", "max_output_tokens", "incomplete"):
        return "length"
    if said in ("content_filter", "safety", "refusal", "blocklist", "prohibited_content"):
        return "content_filter"
    return "tool_call" if response.calls else "stop"


def _reasoning(parts: Any) -> list[dict[str, Any]]:
    return [
        {"type": "reasoning", "content": str(p["text"])}
        for p in parts or ()
        if isinstance(p, Mapping) and p.get("text")
    ]


def input_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """`AgentMemory.build_messages()` as `gen_ai.input.messages`: each message with its role
    and parts (text, reasoning, tool calls, tool call responses). The system prompt is left
    out: it goes into `gen_ai.system_instructions`."""
    shaped: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "system":
            continue
        if role == "tool":
            part = {
                "type": "tool_call_response",
                "id": message.get("tool_call_id"),
                "response": message.get("content"),
            }
            shaped.append({"role": "tool", "parts": [part]})
            continue
        parts = _reasoning(message.get("reasoning"))
        if message.get("content"):
            parts.append({"type": "text", "content": message["content"]})
        parts += [
            {
                "type": "tool_call",
                "id": c.get("id"),
                "name": c.get("name"),
                "arguments": thaw(c.get("arguments") or {}),
            }
            for c in message.get("tool_calls") or ()
        ]
        shaped.append({"role": role, "parts": parts})
    return shaped


def output_message(response: LlmResponse) -> dict[str, Any]:
    """An LLM response as the one message of `gen_ai.output.messages`."""
    parts = _reasoning([p.model_dump(mode="json") for p in response.reasoning])
    if response.content:
        parts.append({"type": "text", "content": response.content})
    parts += [
        {"type": "tool_call", "id": c.id, "name": c.name, "arguments": thaw(c.args)}
        for c in response.calls
    ]
    return {"role": "assistant", "parts": parts, "finish_reason": finish_reason(response)}
