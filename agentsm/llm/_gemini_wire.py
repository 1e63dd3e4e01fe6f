"""The Gemini wire format, as plain JSON: the conversation as `contents` (model turns with
their thought parts and thought signatures put back where they came), tools as function
declarations, the tool choice, and a response's parts read back into calls, text, reasoning,
usage and finish reason."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..frozen import thaw
from ..types import LlmResponse, ReasoningPart, TokenUsage, ToolCall
from ._common import parse_arguments, tool_call
from ._images import image_base64, images_of, tool_images_note

if TYPE_CHECKING:
    from ..memory import AgentMemory
    from ..tools import ToolRegistry

__all__ = [
    "REASONING",
    "function_calling",
    "gemini_contents",
    "gemini_tools",
    "llm_response",
    "merge_part",
    "model_parts",
    "reasoning_of",
    "response_parts",
    "sdk_part",
    "stop_reason",
    "usage_of",
    "wire_part",
]

REASONING = "gemini"
"""The `provider` of the reasoning parts this API returns and takes back."""


def gemini_contents(memory: AgentMemory) -> tuple[str | None, list[dict[str, Any]]]:
    """The system instruction and `memory.build_messages()` as Gemini `contents`: a turn's
    calls as `functionCall` parts (with the thought parts and signed parts of its response
    put back at their places), its results as `functionResponse` parts in one user content,
    matched to the calls by order. Images are `inlineData` (bytes) or `fileData` (a URL)
    parts; a function response takes no image on every model, so the images of a turn's
    results follow its `functionResponse` parts in the same user content, each call named."""
    system: str | None = None
    contents: list[dict[str, Any]] = []

    def add(role: str, parts: list[dict[str, Any]]) -> None:
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})

    shown: list[dict[str, Any]] = []  # the images of the results just added
    for m in memory.build_messages():
        if shown and m["role"] != "tool":
            add("user", shown)
            shown = []
        if m["role"] == "system":
            system = m["content"]
        elif m["role"] == "assistant":
            add("model", model_parts(m))
        elif m["role"] == "tool":
            key = "error" if m.get("is_error") else "output"
            answer = {"name": m["name"], "response": {key: m["content"]}}
            add("user", [{"functionResponse": answer}])
            if images_of(m):
                shown += [{"text": tool_images_note(m)}, *_image_parts(m)]
        else:
            add("user", [{"text": m["content"]}, *_image_parts(m)])
    if shown:
        add("user", shown)
    return system, contents


def _image_parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A message's images as `inlineData` parts (bytes, in base64 on the wire) or `fileData`
    parts (a URL)."""
    parts = []
    for part in images_of(message):
        if part.get("url"):
            parts.append({"fileData": {"mimeType": part["media_type"], "fileUri": part["url"]}})
        else:
            data = image_base64(part, "Gemini")
            parts.append({"inlineData": {"mimeType": part["media_type"], "data": data}})
    return parts


def model_parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The parts of an assistant turn: the parts its response's reasoning recorded (thought
    parts, and parts that carried a thought signature), each at its index as it came, and the
    turn's text and calls as new parts in the places left."""
    calls = message.get("tool_calls") or []
    ids = {c["id"] for c in calls}
    placed: dict[int, dict[str, Any]] = {}
    signed_calls: set[str] = set()
    signed_text = False
    for part in message.get("reasoning") or ():
        if part.get("provider") != REASONING:
            continue
        native = thaw(part["native"])
        call = native.get("call")
        if call is not None:
            if call not in ids:
                continue  # a call this turn does not hold: its result is not sent either
            signed_calls.add(call)
        elif not native["part"].get("thought") and native["part"].get("text"):
            signed_text = True
        placed[int(native["index"])] = native["part"]
    new: list[dict[str, Any]] = []
    if message.get("content") and not signed_text:
        new.append({"text": message["content"]})
    new.extend(
        {"functionCall": {"name": c["name"], "args": c["arguments"]}}
        for c in calls
        if c["id"] not in signed_calls
    )
    left = iter(new)
    parts: list[dict[str, Any]] = []
    for index in range(max(placed, default=-1) + 1):
        part = placed.get(index) or next(left, None)
        if part is not None:
            parts.append(part)
    parts.extend(left)
    return parts


def gemini_tools(tools: ToolRegistry) -> list[dict[str, Any]]:
    """The registry's schemas as one Gemini tool of function declarations."""
    declarations = [
        {"name": s.name, "description": s.description, "parameters_json_schema": s.input_schema}
        for s in tools.schemas()
    ]
    return [{"function_declarations": declarations}] if declarations else []


def wire_part(part: Any) -> dict[str, Any] | None:
    """An SDK `Part` as the API sent it (camelCase, the signature in base64); None for a kind
    of part this caller does not read (inline data, code execution, ...)."""
    out: dict[str, Any]
    call = getattr(part, "function_call", None)
    if call is not None:
        out = {"functionCall": {"name": call.name or "", "args": dict(call.args or {})}}
    elif getattr(part, "text", None) is not None:
        out = {"text": part.text}
        if getattr(part, "thought", None):
            out["thought"] = True
    else:
        return None
    signature = getattr(part, "thought_signature", None)
    if signature:
        out["thoughtSignature"] = base64.b64encode(signature).decode("ascii")
    return out


def merge_part(parts: list[dict[str, Any]], new: dict[str, Any]) -> None:
    """Add a streamed part to the parts so far: text continues the text part before it (of the
    same kind, thought or answer) unless it brings a signature of its own; an empty unsigned
    text part (a stream's last chunk) adds nothing."""
    last = parts[-1] if parts else None
    if "text" in new and "thoughtSignature" not in new:
        if last is not None and "text" in last and last.get("thought") == new.get("thought"):
            last["text"] += new["text"]
            return
        if not new["text"]:
            return
    parts.append(dict(new))


def reasoning_of(parts: list[dict[str, Any]], call_ids: list[str]) -> list[ReasoningPart]:
    """What a response's parts hold of the model's reasoning, in order: thought summaries
    (kind "thinking") and the signatures on other parts (kind "redacted"), each with the part
    as it came and its index, and for a call the id it was given (`call_ids`, in order)."""
    found: list[ReasoningPart] = []
    calls = iter(call_ids)
    for index, part in enumerate(parts):
        call = next(calls, None) if "functionCall" in part else None
        native: dict[str, Any] = {"index": index, "part": part}
        if part.get("thought"):
            found.append(
                ReasoningPart(
                    kind="thinking", text=part.get("text", ""), provider=REASONING, native=native
                )
            )
        elif "thoughtSignature" in part:
            if call is not None:
                native["call"] = call
            found.append(ReasoningPart(kind="redacted", provider=REASONING, native=native))
    return found


def usage_of(meta: Any) -> TokenUsage | None:
    """`usageMetadata` as token usage: thoughts count as output (and as reasoning), cached
    prompt tokens as cache reads (apart from the input tokens)."""
    if meta is None:
        return None

    def count(name: str) -> int:
        return int(getattr(meta, name, None) or 0)

    cached = count("cached_content_token_count")
    prompt = count("prompt_token_count") + count("tool_use_prompt_token_count")
    return TokenUsage(
        input_tokens=max(prompt - cached, 0),
        output_tokens=count("candidates_token_count") + count("thoughts_token_count"),
        cache_read_tokens=cached,
        reasoning_tokens=count("thoughts_token_count"),
    )


def sdk_part(types: Any, part: dict[str, Any]) -> Any:
    """A part as the SDK takes it (`types` is `google.genai.types`): the signature as bytes."""
    signature = part.get("thoughtSignature")
    fields: dict[str, Any] = {}
    if signature:
        fields["thought_signature"] = base64.b64decode(signature)
    if "functionCall" in part:
        fields["function_call"] = types.FunctionCall(**part["functionCall"])
    elif "functionResponse" in part:
        fields["function_response"] = types.FunctionResponse(**part["functionResponse"])
    elif "inlineData" in part:
        inline = part["inlineData"]
        data = base64.b64decode(inline["data"])
        fields["inline_data"] = types.Blob(mime_type=inline["mimeType"], data=data)
    elif "fileData" in part:
        file = part["fileData"]
        fields["file_data"] = types.FileData(mime_type=file["mimeType"], file_uri=file["fileUri"])
    else:
        fields["text"] = part["text"]
        if part.get("thought"):
            fields["thought"] = True
    return types.Part(**fields)


def response_parts(response: Any) -> list[Any]:
    """The SDK parts of a response's first candidate (none when the prompt was blocked)."""
    candidates = getattr(response, "candidates", None) or []
    content = getattr(candidates[0], "content", None) if candidates else None
    return list(getattr(content, "parts", None) or [])


def llm_response(parts: list[dict[str, Any]], last: Any, metered: Any, step: int) -> LlmResponse:
    """The response of these (merged) parts; `last` is the final chunk (finish reason, served
    model) and `metered` the last one with usage."""
    seen: set[str] = set()
    calls: list[ToolCall] = []
    for part in parts:
        if "functionCall" in part:
            name, args = part["functionCall"]["name"], part["functionCall"]["args"]
            place = f"call_{step}_{len(calls)}"
            calls.append(tool_call(name, parse_arguments(args, name), place, seen))
    text = "".join(p["text"] for p in parts if "text" in p and not p.get("thought"))
    reasoning = tuple(reasoning_of(parts, [c.id for c in calls]))
    usage = usage_of(getattr(metered, "usage_metadata", None))
    served = getattr(last, "model_version", None) or None
    stop = stop_reason(last)
    if calls:
        return LlmResponse(
            calls=tuple(calls),
            content=text.strip() or None,
            usage=usage,
            stop_reason=stop,
            model=served,
            reasoning=reasoning,
        )
    return LlmResponse(
        content=text, usage=usage, stop_reason=stop, model=served, reasoning=reasoning
    )


def stop_reason(response: Any) -> str | None:
    """The finish reason in lower case ("max_tokens" when cut off), or why the prompt was
    blocked."""
    candidates = getattr(response, "candidates", None) or []
    reason = getattr(candidates[0], "finish_reason", None) if candidates else None
    if reason is None:
        feedback = getattr(response, "prompt_feedback", None)
        reason = getattr(feedback, "block_reason", None)
    return None if reason is None else str(getattr(reason, "value", reason)).lower()


def function_calling(choice: str | Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The caller's tool choice as a `function_calling_config`."""
    if choice is None:
        return None
    if isinstance(choice, Mapping):
        return dict(choice)
    modes = {"auto": "AUTO", "none": "NONE", "required": "ANY", "any": "ANY"}
    if choice in modes:
        return {"mode": modes[choice]}
    return {"mode": "ANY", "allowed_function_names": [choice]}
