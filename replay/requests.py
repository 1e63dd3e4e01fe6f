"""What an LLM request sent, rebuilt from a run's facts for a readable divergence.

`LlmRequested` keeps the model and digests of the messages and of the tool schemas; the
messages, schemas and settings themselves follow from the run's definition and the facts
before the request. Each side of a divergence at an LLM request is rebuilt by folding its facts
and kept only where the digests confirm it; what they do not confirm is said to be unknown."""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from agentsm import facts as f
from agentsm.frozen import same_json, thaw
from agentsm.memory import apply, initial_memory
from agentsm.states.reflecting import compression_view
from agentsm.tools import schemas_digest
from agentsm.trace import TraceEntry

__all__ = ["Views", "request_diff", "sent"]

Views = Mapping[str, Sequence[Mapping[str, Any]]]
"""Messages of requests a replay saw its handlers make, by their digest (views of memory the
fold cannot make again, such as a handler's own summary prompt)."""


def sent(entries: Sequence[TraceEntry], at: int, views: Views | None = None) -> dict[str, Any]:
    """The request of the `LlmRequested` fact at position `at` of a run's entries: model, the
    LLM's settings, the tools offered (their schemas) and the messages."""
    fact, definition = entries[at].fact, entries[0].fact
    if not isinstance(fact, f.LlmRequested) or not isinstance(definition, f.RunStarted):
        raise ValueError(f"Position {at} is not an LLM request of a run with its definition.")
    memory = initial_memory(definition)
    for entry in entries[1:at]:
        memory = apply(memory, entry.fact)
    messages: Any = f"(not known: the log keeps only their digest, {fact.messages_digest})"
    known = (views or {}).get(fact.messages_digest)
    if known is not None:
        messages = [thaw(m) for m in known]
    else:
        for view in (memory, compression_view(memory)):
            if view.messages_digest() == fact.messages_digest:
                messages = view.build_messages()
                break
    schemas = {s.name: s for s in definition.tools}
    offered = [schemas[name] for name in fact.tools if name in schemas]
    tools: Any = list(fact.tools)
    if len(offered) == len(fact.tools) and schemas_digest(offered) == fact.tools_digest:
        tools = [s.model_dump(mode="json") for s in offered]
    return {
        "model": fact.model,
        "settings": thaw(definition.llm),
        "tools": tools,
        "messages": messages,
    }


def request_diff(
    expected: Sequence[TraceEntry],
    actual: Sequence[TraceEntry],
    at: int,
    views: Views | None = None,
) -> str:
    """A unified diff of the requests at position `at` of two runs (the recorded one and its
    replay, whose handlers' own `views` may be given), or "" when they cannot be told apart."""
    recorded, replayed = sent(expected, at), sent(actual, at, views)
    if same_json(recorded, replayed):
        return ""

    def lines(request: dict[str, Any]) -> list[str]:
        return json.dumps(request, indent=2, ensure_ascii=False).splitlines()

    return "\n".join(
        difflib.unified_diff(
            lines(recorded), lines(replayed), "recorded request", "replayed request", lineterm=""
        )
    )
