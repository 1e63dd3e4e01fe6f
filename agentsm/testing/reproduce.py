"""Generated inputs as Python a user can paste into a test to run the same case again."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..types import AgentConfig, LlmResponse, TokenUsage

__all__ = ["python_of"]


def _usage(usage: TokenUsage | None) -> str:
    if usage is None:
        return ""
    tokens = f"input_tokens={usage.input_tokens}, output_tokens={usage.output_tokens}"
    return f", usage=TokenUsage({tokens})"


def _item(item: Any) -> str:
    if isinstance(item, LlmResponse):
        if item.is_final:
            return f"LlmResponse.final_answer({item.content!r}{_usage(item.usage)})"
        calls = ", ".join(
            f"ToolCall(name={c.name!r}, args={c.args!r}, id={c.id!r})" for c in item.calls
        )
        return f"LlmResponse(calls=({calls},), confidence={item.confidence!r}{_usage(item.usage)})"
    return repr(item)


def _config(config: AgentConfig) -> str:
    default = AgentConfig()
    changed = {
        k: v for k, v in config.model_dump().items() if getattr(default, k) != getattr(config, k)
    }
    return "AgentConfig(" + ", ".join(f"{k}={v!r}" for k, v in changed.items()) + ")"


def python_of(
    script: Sequence[Any],
    config: AgentConfig,
    behaviours: Mapping[str, Any],
    decisions: Sequence[Any],
    budget: int | None,
) -> str:
    """The `run_inputs(...)` call that reproduces a generated run."""
    lines = [
        "from agentsm import AgentConfig, LlmResponse, TokenUsage, ToolCall",
        "from agentsm.testing import ToolBehaviour, run_inputs",
        "",
        "run = run_inputs(",
        "    script=[",
        *(f"        {_item(i)}," for i in script),
        "    ],",
        f"    config={_config(config)},",
        f"    tools={dict(behaviours)!r},",
        f"    decisions={list(decisions)!r},",
        f"    budget={budget!r},",
        "    builder=None,  # or your make_agent",
        ")",
        "run.assert_invariants()",
    ]
    return "\n".join(lines)
