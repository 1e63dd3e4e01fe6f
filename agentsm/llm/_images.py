"""The images of `memory.build_messages()` as the callers send them: URLs, data: URLs, base64
text or bytes, and the formats each API names them by."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from .errors import BadRequest

__all__ = [
    "image_base64",
    "image_bytes",
    "image_data_url",
    "image_format",
    "images_of",
    "tool_images_note",
]


def tool_images_note(message: Mapping[str, Any]) -> str:
    """What the user message carrying a tool's images says first, for an API whose tool
    results take text only (the images go in the user message after the results)."""
    return f"The images {message.get('name')} returned (call {message.get('tool_call_id')}):"


def images_of(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The message's images (none for most)."""
    return list(message.get("images") or ())


def image_bytes(part: Mapping[str, Any], api: str) -> bytes:
    """The bytes of an image part; `BadRequest` for a URL image, or one whose bytes the
    engine found nowhere (not in the log's blobs)."""
    data = part.get("data")
    if isinstance(data, bytes):
        return data
    if part.get("url"):
        raise BadRequest(
            f"{api} takes images as bytes, and {part['url']!r} is a URL; give the image as "
            "a file or bytes (Image.from_file, Image.from_bytes)."
        )
    raise BadRequest(
        f"The bytes of the image {part.get('digest')} are not in this log's blobs, so it cannot "
        "be sent; copy the run with its blobs (agentsm copy, export and import carry them)."
    )


def image_base64(part: Mapping[str, Any], api: str) -> str:
    """The image's bytes as base64 text."""
    return base64.b64encode(image_bytes(part, api)).decode("ascii")


def image_data_url(part: Mapping[str, Any], api: str) -> str:
    """The image's URL, or its bytes as a `data:` URL."""
    if part.get("url"):
        return str(part["url"])
    return f"data:{part['media_type']};base64,{image_base64(part, api)}"


_FORMATS = {"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif", "image/webp": "webp"}


def image_format(part: Mapping[str, Any], api: str) -> str:
    """The image's format as Bedrock names it ("png", "jpeg", "gif", "webp"); `BadRequest`
    for another media type."""
    found = _FORMATS.get(str(part.get("media_type")))
    if found is None:
        raise BadRequest(
            f"{api} takes PNG, JPEG, GIF and WebP images, not {part.get('media_type')!r}."
        )
    return found
