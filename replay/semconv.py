"""What the OpenTelemetry GenAI semantic conventions call the things a run records: the
provider's well-known name, the request settings and token usage as attributes, and
messages in the conventions' JSON shape (roles and parts)."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

from agentsm.frozen import thaw
from agentsm.types import LlmResponse, TokenUsage

__all__ = [
    "DEFAULT_PROVIDER",
    "WELL_KNOWN_PROVIDERS",
    "finish_reason",
    "input_messages",
    "output_message",
    "provider_attributes",
    "provider_name",
    "request_attributes",
    "server_attributes",
    "usage_attributes",
]

WELL_KNOWN_PROVIDERS = frozenset(
    {
        "anthropic",
        "aws.bedrock",
        "azure.ai.inference",
        "azure.ai.openai",
        "cohere",
        "deepseek",
        "gcp.gemini",
        "gcp.gen_ai",
        "gcp.vertex_ai",
        "groq",
        "ibm.watsonx.ai",
        "mistral_ai",
        "moonshot_ai",
        "openai",
        "perplexity",
        "x_ai",
    }
)
"""The conventions' well-known values of `gen_ai.provider.name`, the only ones checkers accept."""

DEFAULT_PROVIDER = "openai"
"""The provider of a run whose caller names none (a scripted mock, a caller of one's own
without `settings["provider"]`) and whose model is no known provider's: agentsm hands every
caller its messages in the shape of OpenAI's Chat Completions (roles, tool calls and their
results), so such a caller is reported as speaking it, and its spans say that the name was
not given (`agentsm.llm.provider_source`: "default")."""

_PROVIDERS = {
    "openai responses": "openai",
    "azure openai": "azure.ai.openai",
    "azure openai responses": "azure.ai.openai",
    "gemini": "gcp.gemini",
    "bedrock": "aws.bedrock",
    "aws": "aws.bedrock",
    "azure": "azure.ai.inference",
    "google": "gcp.gen_ai",
    "vertex": "gcp.vertex_ai",
    "vertex ai": "gcp.vertex_ai",
    "vertexai": "gcp.vertex_ai",
    "mistral": "mistral_ai",
    "mistralai": "mistral_ai",
    "xai": "x_ai",
    "x.ai": "x_ai",
    "watsonx": "ibm.watsonx.ai",
    "moonshot": "moonshot_ai",
}
"""Names callers record (`settings["provider"]`, lower-cased: the provider callers' own, and
other common spellings) that are not themselves a well-known `gen_ai.provider.name`."""

_MODEL_FAMILIES = {
    "gpt-": "openai",
    "chatgpt": "openai",
    "text-embedding": "openai",
    "claude": "anthropic",
    "gemini": "gcp.gemini",
    "mistral": "mistral_ai",
    "mixtral": "mistral_ai",
    "codestral": "mistral_ai",
    "magistral": "mistral_ai",
    "ministral": "mistral_ai",
    "pixtral": "mistral_ai",
    "devstral": "mistral_ai",
    "command": "cohere",
    "grok": "x_ai",
    "deepseek": "deepseek",
    "sonar": "perplexity",
    "kimi": "moonshot_ai",
    "moonshot": "moonshot_ai",
}
"""How model names begin and the provider whose models they name (and OpenAI's o1, o3, ...)."""
_O_SERIES = re.compile(r"o[1-9]\b")

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


def provider_name(settings: Mapping[str, Any], model: str = "") -> str:
    """`gen_ai.provider.name` of a run's LLM caller (see `provider_attributes`)."""
    return str(provider_attributes(settings, model)["gen_ai.provider.name"])


def provider_attributes(settings: Mapping[str, Any], model: str = "") -> dict[str, str]:
    """`gen_ai.provider.name` of a run's LLM caller, always one of the conventions' well-known
    names, and where it comes from (`agentsm.llm.provider_source`): "declared", the name
    the caller records in its settings (each provider caller's; Gemini on Vertex AI is
    `gcp.vertex_ai`; a caller of one's own says `{"provider": "mistral_ai"}`, or "Mistral");
    "model", the provider whose models the run asks for (`claude-...` is `anthropic`, a
    `vendor/model` name its vendor's) when the caller names none, or one no checker knows;
    else "default", `DEFAULT_PROVIDER`. A declared name that is not a well-known one is kept
    as `agentsm.llm.provider`."""
    recorded = settings.get("provider")
    declared = recorded.strip() if isinstance(recorded, str) else ""
    key = declared.lower()
    if key == "gemini" and settings.get("vertexai"):
        key = "gcp.vertex_ai"
    known = _well_known(key)
    source = "declared"
    if known is None:
        known, source = _of_model(model), "model"
    if known is None:
        known, source = DEFAULT_PROVIDER, "default"
    attributes = {"gen_ai.provider.name": known, "agentsm.llm.provider_source": source}
    if declared and source != "declared":
        attributes["agentsm.llm.provider"] = declared
    return attributes


def _well_known(name: str) -> str | None:
    name = _PROVIDERS.get(name, name)
    return name if name in WELL_KNOWN_PROVIDERS else None


def _of_model(model: str) -> str | None:
    """The provider whose models are named so: by its family (`gpt-4o`, `claude-...`), or by
    the vendor a `vendor/model` name starts with (`mistralai/...`)."""
    vendor, _, name = model.strip().lower().rpartition("/")
    if _O_SERIES.match(name):
        return "openai"
    for start, provider in _MODEL_FAMILIES.items():
        if name.startswith(start):
            return provider
    return _well_known(vendor.rsplit("/", 1)[-1]) if vendor else None


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
