"""Redaction: hooks that rewrite the text of a fact before it is recorded, so that secrets and
personal data never reach the log, its exports or its traces.

The hooks see the free text of every fact (the task and prompt, LLM text, tool arguments,
observations, answers, error messages, notes), never ids, names or codes. What a run records is
the redacted text: memory, the LLM's view of the run, approvals, exports and replays all hold it.
Only a tool receives the real arguments, kept in the process's memory for the run's own calls
(a run resumed in another process gives its tools the redacted values). Hooks must be idempotent:
redacting redacted text changes nothing, which is what keeps replay exact.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from .types import ToolCall

__all__ = ["REDACTED", "Hook", "Redactor"]

REDACTED = "[REDACTED]"
"""What a pattern's matches are replaced with."""

Hook = str | re.Pattern[str] | Callable[[str], str]
"""A regular expression (its matches become `[REDACTED]`) or a function `text -> text`."""

_TEXT = frozenset(
    {"task", "system_prompt", "content", "text", "observation", "message", "error", "note"}
    | {"final_answer"}
)  # the free-text fields of the facts; any string inside a call's `args` too
_FREE_REASON = frozenset({"AnswerRejected", "ReflectionSkipped"})  # elsewhere `reason` is a code
_F = TypeVar("_F", bound=BaseModel)


def _pattern(pattern: re.Pattern[str]) -> Callable[[str], str]:
    def redact(text: str) -> str:
        return pattern.sub(REDACTED, text)

    return redact


def _key(call_id: object, args: object) -> str:
    return json.dumps([call_id, args], sort_keys=True, ensure_ascii=False)


class Redactor:
    """An agent's redaction hooks, applied in order to the free text of each fact.

    `fact()` returns the fact as it is to be recorded and remembers the real arguments of any
    call it redacted, which `reveal()` gives back to the tool that runs the call."""

    def __init__(self, hooks: Sequence[tuple[str, Callable[[str], str]]]) -> None:
        self._hooks = tuple(hooks)
        self._originals: dict[str, list[Any]] = {}

    @classmethod
    def of(cls, hooks: Sequence[tuple[str | None, Hook]]) -> Redactor:
        """Hooks as given to `AgentBuilder.redact`: patterns compiled, each with its label
        (the given name, a function's qualified name, or `pattern N`; never the pattern)."""
        made: list[tuple[str, Callable[[str], str]]] = []
        for n, (name, hook) in enumerate(hooks, start=1):
            if isinstance(hook, str):
                hook = re.compile(hook)
            if isinstance(hook, re.Pattern):
                made.append((name or f"pattern {n}", _pattern(hook)))
            else:
                label = f"{getattr(hook, '__module__', '')}.{getattr(hook, '__qualname__', '')}"
                made.append((name or label.strip("."), hook))
        return cls(made)

    @property
    def labels(self) -> tuple[str, ...]:
        """What the run's definition records about the hooks: their labels, in order."""
        return tuple(label for label, _ in self._hooks)

    def text(self, text: str) -> str:
        """`text` through every hook."""
        for _, hook in self._hooks:
            text = hook(text)
        return text

    def value(self, value: Any) -> Any:
        """Every string inside a JSON value redacted (object keys are kept)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value

    def fact(self, fact: _F) -> _F:
        """The fact as it is to be recorded: the same object when no hook changed anything."""
        if not self._hooks:
            return fact
        data = fact.model_dump(mode="json")
        found: dict[str, list[Any]] = {}
        redacted = self._walk(data, str(data.get("kind", "")), found)
        if redacted == data:
            return fact
        self._originals.update(found)  # the latest fact that held real arguments wins
        return type(fact).model_validate(redacted)  # a user's own fact type too

    def reveal(self, call: ToolCall, ordinal: int = 0) -> ToolCall:
        """The call with the real arguments this process redacted from it (or as it is);
        `ordinal` tells apart calls that look the same once redacted (same id, same redacted
        arguments): the n-th of them in the plan gets the n-th real arguments."""
        if not self._originals:  # nothing was redacted from a call: no key to build
            return call
        originals = self._originals.get(_key(call.id, call.model_dump(mode="json")["args"]))
        if not originals:
            return call
        original = originals[min(ordinal, len(originals) - 1)]
        return call.model_copy(update={"args": copy.deepcopy(original)})

    def _walk(self, data: Any, kind: str, found: dict[str, list[Any]]) -> Any:
        if isinstance(data, list):
            return [self._walk(item, kind, found) for item in data]
        if not isinstance(data, dict):
            return data
        out: dict[str, Any] = {}
        for key, value in data.items():
            if key == "args" and isinstance(value, dict):
                out[key] = self.value(value)
                if out[key] != value:  # a call's (or a decision's) arguments: keep the real ones
                    owner = data.get("id", data.get("call_id"))
                    found.setdefault(_key(owner, out[key]), []).append(value)
            elif isinstance(value, str) and (
                key in _TEXT or (key == "reason" and kind in _FREE_REASON)
            ):
                out[key] = self.text(value)
            else:
                out[key] = self._walk(value, kind, found)
        return out

    def __bool__(self) -> bool:
        return bool(self._hooks)

    def __repr__(self) -> str:
        return f"Redactor({list(self.labels)!r})"
