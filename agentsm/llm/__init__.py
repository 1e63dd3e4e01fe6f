"""LLM callers: the `LlmCaller` protocol and the scripted `MockLlmCaller`."""

from .base import LlmCaller, emit_text
from .mock import LlmScriptExhausted, MockCall, MockLlmCaller

__all__ = ["LlmCaller", "LlmScriptExhausted", "MockCall", "MockLlmCaller", "emit_text"]
