"""Generated inputs as Python a user can paste into a test to run the same case again."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..types import AgentConfig, LlmResponse, TokenUsage

__all__ = ["builder_spec", "python_of"]


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


def builder_spec(builder: Callable[..., Any]) -> str | None:
    """`module:factory` when the factory can be imported back by that name, else None."""
    module, name = getattr(builder, "__module__", None), getattr(builder, "__qualname__", "")
    if not module or not name or "<" in name or "." in name:
        return None
    try:
        found = getattr(importlib.import_module(module), name, None)
    except Exception:  # a module that cannot be imported again cannot be named
        return None
    return f"{module}:{name}" if found is builder else None


def _builder_lines(builder: Callable[..., Any] | None) -> tuple[list[str], str]:
    """The import that brings the user's factory in, and the `builder=` argument."""
    if builder is None:
        return [], "    builder=None,  # the built-in sample agent"
    spec = builder_spec(builder)
    name = getattr(builder, "__name__", "")
    if spec is not None and not spec.startswith("__main__:"):
        module, _, factory = spec.partition(":")
        return [f"from {module} import {factory}"], f"    builder={factory},  # --builder {spec}"
    if spec is not None:
        return [], f"    builder={name},  # defined in this script or notebook"
    where = ""
    try:
        where = f" ({inspect.getsourcefile(builder)}:{inspect.getsourcelines(builder)[1]})"
    except (OSError, TypeError):
        pass
    if name.isidentifier():
        return [], f"    builder={name},  # defined where it cannot be imported{where}"
    return [], (
        f"    builder=YOUR_FACTORY,  # a {name or 'callable'}{where} has no name to import: "
        "define it as a module-level function"
    )


def python_of(
    script: Sequence[Any],
    config: AgentConfig,
    behaviours: Mapping[str, Any],
    decisions: Sequence[Any],
    budget: int | None,
    builder: Callable[..., Any] | None = None,
) -> str:
    """The `run_inputs(...)` call that reproduces a generated run, with the user's builder
    imported by name when it can be."""
    imports, builder_line = _builder_lines(builder)
    lines = [
        "from agentsm import AgentConfig, LlmResponse, TokenUsage, ToolCall",
        "from agentsm.testing import ToolBehaviour, run_inputs",
        *imports,
        "",
        "run = run_inputs(",
        "    script=[",
        *(f"        {_item(i)}," for i in script),
        "    ],",
        f"    config={_config(config)},",
        f"    tools={dict(behaviours)!r},",
        f"    decisions={list(decisions)!r},",
        f"    budget={budget!r},",
        builder_line,
        ")",
        "# run.save('failing-run.db')  # then: agentsm show --db failing-run.db",
        "run.assert_invariants()",
    ]
    return "\n".join(lines)
