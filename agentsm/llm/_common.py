"""What both provider callers share: JSON arguments, ids, usage, and a key-free repr."""

from __future__ import annotations

import json
import os
from typing import Any

from ..errors import BuildError
from ..types import ToolCall
from .errors import AuthenticationFailed, MalformedResponse

__all__ = ["env_key", "parse_arguments", "tool_call"]


def parse_arguments(raw: Any, name: str) -> dict[str, Any]:
    """Tool arguments as sent by a server: a JSON string, an object, null or "" (= {})."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw)
    except (TypeError, ValueError) as e:
        raise MalformedResponse(
            f"the model sent arguments for '{name}' that are not JSON: {str(raw)[:200]!r}"
        ) from e
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise MalformedResponse(f"the model sent arguments for '{name}' that are not an object")
    return value


def tool_call(name: str, args: dict[str, Any], call_id: str | None, seen: set[str]) -> ToolCall:
    """A ToolCall; a missing or repeated id (some compatible servers) gets a fresh one."""
    if call_id and call_id not in seen:
        seen.add(call_id)
        return ToolCall(name=name, args=args, id=call_id)
    call = ToolCall(name=name, args=args)
    seen.add(call.id)
    return call


def env_key(explicit: str | None, env: str, *, required: bool) -> str | None:
    """The API key given, or the one in the environment; a clear error when it is needed."""
    key = explicit if explicit is not None else os.environ.get(env)
    if required and not key:
        raise AuthenticationFailed(
            f"{env} is not set: export {env}=... or pass api_key= to the caller."
        )
    return key


def require_key_now(explicit: str | None, env: str) -> str:
    """For `from_env()`: the key, or a BuildError right away."""
    key = explicit if explicit is not None else os.environ.get(env)
    if not key:
        raise BuildError(f"{env} is not set: export {env}=... before building the caller.")
    return key
