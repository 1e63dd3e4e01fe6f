"""The Bedrock Converse wire format: memory as `messages` of content blocks, tools as
`toolSpec`s, model families, and a response (plain or streamed) read back into an LlmResponse."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..frozen import thaw
from ..types import LlmResponse, ReasoningPart, TokenUsage, ToolCall
from ._common import parse_arguments, tool_call
from ._images import image_bytes, image_format, images_of
from .base import emit_reasoning, emit_text
from .errors import MalformedResponse

if TYPE_CHECKING:
    from ..memory import AgentMemory
    from ..tools import ToolRegistry

__all__ = [
    "REASONING",
    "Assembly",
    "converse_messages",
    "converse_tools",
    "model_family",
    "read_message",
]

REASONING = "bedrock"
"""The `provider` of the reasoning parts Converse returns and takes back (`reasoningContent`
blocks)."""

_GEOGRAPHIES = frozenset({"us", "eu", "apac", "global", "us-gov", "jp", "au", "ca"})
"""Prefixes of cross-region inference profiles (`us.anthropic.claude-...`)."""

STATUS_FAMILIES = frozenset({"anthropic", "amazon"})
"""Model families that take a `status` on `toolResult` blocks (the others refuse it)."""


def model_family(model_id: str) -> str:
    """The provider part of a Bedrock model id: "anthropic" for `anthropic.claude-...`,
    `us.anthropic.claude-...` or an ARN ending in one; "" when the id does not say (an
    application inference profile, an imported model)."""
    name = model_id.rsplit("/", 1)[-1] if model_id.startswith("arn:") else model_id
    parts = name.split(".")
    if len(parts) > 2 and parts[0] in _GEOGRAPHIES:
        parts = parts[1:]
    return parts[0] if len(parts) > 1 else ""


def converse_messages(memory: AgentMemory, family: str) -> tuple[str | None, list[dict[str, Any]]]:
    """The system prompt and `memory.build_messages()` as Converse turns: an assistant turn's
    `reasoningContent` blocks first, as they came, then its text and `toolUse` blocks; a turn's
    results as `toolResult` blocks in one user message; consecutive user content merged so that
    roles alternate. Images are `image` blocks of bytes, in a `toolResult`'s content for a
    tool's."""
    system: str | None = None
    turns: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        elif blocks:
            turns.append({"role": role, "content": blocks})

    for m in memory.build_messages():
        if m["role"] == "system":
            system = m["content"]
        elif m["role"] == "assistant":
            blocks = [
                sendable(part["native"])
                for part in m.get("reasoning") or ()
                if part.get("provider") == REASONING
            ]
            if m.get("content") and m["content"].strip():  # a blank text block is refused
                blocks.append({"text": m["content"]})
            blocks.extend(
                {"toolUse": {"toolUseId": c["id"], "name": c["name"], "input": c["arguments"]}}
                for c in m.get("tool_calls") or []
            )
            add("assistant", blocks)
        elif m["role"] == "tool":
            result: dict[str, Any] = {
                "toolUseId": m["tool_call_id"],
                "content": [{"text": m["content"]}, *_image_blocks(m)],
            }
            if family in STATUS_FAMILIES:
                result["status"] = "error" if m.get("is_error") else "success"
            add("user", [{"toolResult": result}])
        else:
            add("user", [{"text": m["content"]}, *_image_blocks(m)])
    return system, turns


def _image_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A message's images as Converse `image` blocks of bytes (Converse takes no URL)."""
    return [
        {
            "image": {
                "format": image_format(part, "Bedrock Converse"),
                "source": {"bytes": image_bytes(part, "Bedrock Converse")},
            }
        }
        for part in images_of(message)
    ]


def converse_tools(tools: ToolRegistry) -> list[dict[str, Any]]:
    """The registry's schemas as Converse `toolSpec`s (an empty description left out: the
    API refuses one)."""
    specs = []
    for s in tools.schemas():
        spec: dict[str, Any] = {"name": s.name, "inputSchema": {"json": s.input_schema}}
        if s.description:
            spec["description"] = s.description
        specs.append({"toolSpec": spec})
    return specs


def sendable(native: Mapping[str, Any]) -> dict[str, Any]:
    """A recorded `reasoningContent` block as boto3 takes it: as recorded, but redacted
    content (base64 on the wire and in the log) as the bytes boto3 encodes again."""
    block = thaw(native)
    inner = block.get("reasoningContent")
    if isinstance(inner, dict) and isinstance(inner.get("redactedContent"), str):
        inner["redactedContent"] = base64.b64decode(inner["redactedContent"])
    return block  # type: ignore[no-any-return]


def _reasoning(block: dict[str, Any]) -> ReasoningPart:
    """A `reasoningContent` block as recorded: the whole block, its redacted bytes as base64."""
    inner = dict(block)
    text = inner.get("reasoningText")
    if isinstance(inner.get("redactedContent"), bytes | bytearray):
        inner["redactedContent"] = base64.b64encode(inner["redactedContent"]).decode()
    native = {"reasoningContent": inner}
    if isinstance(text, dict):
        said = str(text.get("text") or "")
        return ReasoningPart(kind="thinking", text=said, provider=REASONING, native=native)
    return ReasoningPart(kind="redacted", provider=REASONING, native=native)


def read_usage(raw: Any) -> TokenUsage | None:
    """Converse `usage` as TokenUsage: cache reads and writes apart from the input tokens."""
    if not isinstance(raw, dict):
        return None
    counts = {
        name: int(raw.get(field) or 0)
        for field, name in (
            ("inputTokens", "input_tokens"),
            ("outputTokens", "output_tokens"),
            ("cacheReadInputTokens", "cache_read_tokens"),
            ("cacheWriteInputTokens", "cache_write_tokens"),
        )
    }
    return TokenUsage(**counts) if any(counts.values()) else None


def read_message(response: Mapping[str, Any]) -> LlmResponse:
    """A Converse response (boto3's dict) as an LlmResponse."""
    message = (response.get("output") or {}).get("message")
    if not isinstance(message, dict):
        raise MalformedResponse(f"the response has no output message: {sorted(response)}")
    text: list[str] = []
    calls: list[ToolCall] = []
    reasoning: list[ReasoningPart] = []
    seen: set[str] = set()
    for block in message.get("content") or []:
        if "text" in block:
            text.append(block["text"])
        elif "toolUse" in block:
            use = block["toolUse"]
            args = parse_arguments(use.get("input"), use["name"])
            calls.append(tool_call(use["name"], args, use.get("toolUseId"), seen))
        elif "reasoningContent" in block:
            reasoning.append(_reasoning(block["reasoningContent"]))
    return answer(
        calls,
        "".join(text),
        response.get("stopReason"),
        read_usage(response.get("usage")),
        reasoning,
    )


def answer(
    calls: list[ToolCall],
    text: str,
    stop: str | None,
    usage: TokenUsage | None,
    reasoning: list[ReasoningPart],
) -> LlmResponse:
    """The LlmResponse of a turn; text that comes with calls is kept as it came (it is sent
    back on the next turn), blank text is none."""
    if calls:
        return LlmResponse(
            calls=tuple(calls),
            content=text if text.strip() else None,
            usage=usage,
            stop_reason=stop,
            reasoning=tuple(reasoning),
        )
    return LlmResponse(content=text, usage=usage, stop_reason=stop, reasoning=tuple(reasoning))


class Assembly:
    """A ConverseStream response put together event by event: text and reasoning passed on
    as they arrive, `toolUse` input fragments joined, usage from the `metadata` event.

    Blocks are keyed by `contentBlockIndex`; a text block may come without a
    `contentBlockStart`, and fields the events carry besides (the `p` padding) are ignored."""

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, Any]] = {}
        self.stop: str | None = None
        self.usage: TokenUsage | None = None

    def feed(self, event: Mapping[str, Any]) -> None:
        if "contentBlockStart" in event:
            start = event["contentBlockStart"]
            use = (start.get("start") or {}).get("toolUse")
            block = self._block(start)
            if isinstance(use, dict):
                block.update(kind="toolUse", id=use.get("toolUseId"), name=use.get("name"))
        elif "contentBlockDelta" in event:
            delta_event = event["contentBlockDelta"]
            block, delta = self._block(delta_event), delta_event.get("delta") or {}
            if "text" in delta:
                block["kind"] = block["kind"] or "text"
                block["text"] += delta["text"]
                emit_text(delta["text"])
            elif "toolUse" in delta:
                block["kind"] = "toolUse"
                block["json"] += (delta["toolUse"] or {}).get("input") or ""
            elif "reasoningContent" in delta:
                self._reason(block, delta["reasoningContent"] or {})
        elif "messageStop" in event:
            self.stop = event["messageStop"].get("stopReason") or self.stop
        elif "metadata" in event:
            self.usage = read_usage(event["metadata"].get("usage")) or self.usage

    def _block(self, event: Mapping[str, Any]) -> dict[str, Any]:
        index = int(event.get("contentBlockIndex") or 0)
        return self.blocks.setdefault(
            index,
            {"kind": None, "text": "", "json": "", "id": None, "name": None, "reasoning": None},
        )

    @staticmethod
    def _reason(block: dict[str, Any], delta: Mapping[str, Any]) -> None:
        block["kind"] = "reasoning"
        said = block["reasoning"] = block["reasoning"] or {"text": "", "signature": None}
        if "text" in delta:
            said["text"] += delta["text"]
            emit_reasoning(delta["text"])
        if "signature" in delta:
            said["signature"] = delta["signature"]
        if "redactedContent" in delta:
            said["redacted"] = said.get("redacted", b"") + delta["redactedContent"]

    def response(self) -> LlmResponse:
        text: list[str] = []
        calls: list[ToolCall] = []
        reasoning: list[ReasoningPart] = []
        seen: set[str] = set()
        for _, b in sorted(self.blocks.items()):
            if b["kind"] == "text":
                text.append(b["text"])
            elif b["kind"] == "toolUse":
                args = parse_arguments(b["json"], b["name"])
                calls.append(tool_call(b["name"], args, b["id"], seen))
            elif b["kind"] == "reasoning":
                said = b["reasoning"]
                if "redacted" in said:
                    reasoning.append(_reasoning({"redactedContent": said["redacted"]}))
                else:
                    shown = {"text": said["text"]}
                    if said["signature"] is not None:
                        shown["signature"] = said["signature"]
                    reasoning.append(_reasoning({"reasoningText": shown}))
        return answer(calls, "".join(text), self.stop, self.usage, reasoning)
