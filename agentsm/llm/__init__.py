"""LLM callers: the `LlmCaller` protocol, the scripted `MockLlmCaller`, and the provider
callers `OpenAiCaller`, `OpenAiResponsesCaller`, `AnthropicCaller`, `AzureOpenAiCaller` and
`AzureOpenAiResponsesCaller` (imported on first use: their SDKs load then)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import LlmCaller, emit_reasoning, emit_text
from .errors import (
    AuthenticationFailed,
    BadRequest,
    ContextOverflow,
    MalformedResponse,
    NetworkError,
    Overloaded,
    ProviderError,
    RateLimited,
    ServerError,
)
from .mock import LlmScriptExhausted, MockCall, MockLlmCaller
from .provider import ProviderCaller
from .retry import RetryPolicy

if TYPE_CHECKING:
    from .anthropic import AnthropicCaller
    from .azure import AzureOpenAiCaller, AzureOpenAiResponsesCaller
    from .bedrock import BedrockCaller
    from .gemini import GeminiCaller
    from .openai import OpenAiCaller
    from .openai_responses import OpenAiResponsesCaller

__all__ = [
    "AnthropicCaller",
    "AuthenticationFailed",
    "AzureOpenAiCaller",
    "AzureOpenAiResponsesCaller",
    "BadRequest",
    "BedrockCaller",
    "ContextOverflow",
    "GeminiCaller",
    "LlmCaller",
    "LlmScriptExhausted",
    "MalformedResponse",
    "MockCall",
    "MockLlmCaller",
    "NetworkError",
    "OpenAiCaller",
    "OpenAiResponsesCaller",
    "Overloaded",
    "ProviderCaller",
    "ProviderError",
    "RateLimited",
    "RetryPolicy",
    "ServerError",
    "emit_reasoning",
    "emit_text",
]


def __getattr__(name: str) -> Any:
    if name == "OpenAiCaller":
        from .openai import OpenAiCaller

        return OpenAiCaller
    if name == "AnthropicCaller":
        from .anthropic import AnthropicCaller

        return AnthropicCaller
    if name == "OpenAiResponsesCaller":
        from .openai_responses import OpenAiResponsesCaller

        return OpenAiResponsesCaller
    if name in ("AzureOpenAiCaller", "AzureOpenAiResponsesCaller"):
        from . import azure

        return getattr(azure, name)
    if name == "GeminiCaller":
        from .gemini import GeminiCaller

        return GeminiCaller
    if name == "BedrockCaller":
        from .bedrock import BedrockCaller

        return BedrockCaller
    raise AttributeError(f"module 'agentsm.llm' has no attribute {name!r}")
