"""Blobs: bytes stored once per content hash beside the log (images a run sends or receives).

A fact refers to a blob by its digest, `"sha256:"` and 64 hex digits, as the value of an
object member named `"digest"` in its payload; the event's hash covers the payload, so the
chain covers the blob through its digest. A store writes the blobs an event carries
(`NewEvent.blobs`) in the transaction that appends the event, once per digest: the first
event that refers to a blob stores it, later ones find it there. `verify` reports a blob a
run refers to that is missing, or whose bytes no longer match its digest (`chain.blob_break`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["Blob", "BlobReader", "blob_digest", "blob_refs"]

DIGEST = "sha256:"
"""How a blob's digest begins."""

_REF = re.compile(r'"digest"\s*:\s*"(sha256:[0-9a-f]{64})"')
"""A reference in a payload's JSON text. A string value cannot hold one: its quotes would be
escaped there."""


def blob_digest(data: bytes) -> str:
    """The digest a blob of these bytes is stored under: `"sha256:"` and 64 hex digits."""
    return DIGEST + hashlib.sha256(data).hexdigest()


def blob_refs(payload: str) -> list[str]:
    """The digests a payload (JSON text) refers to, in order, each once."""
    if DIGEST not in payload:
        return []
    return list(dict.fromkeys(_REF.findall(payload)))


@dataclass(frozen=True, slots=True)
class Blob:
    """Bytes stored once per digest, with their media type (e.g. "image/png")."""

    digest: str
    media_type: str
    data: bytes

    @classmethod
    def of(cls, data: bytes, media_type: str) -> Blob:
        """A blob of `data`, under the digest of its bytes."""
        return cls(blob_digest(data), media_type, bytes(data))

    @property
    def size(self) -> int:
        """How many bytes it holds."""
        return len(self.data)

    @property
    def intact(self) -> bool:
        """Whether the bytes still match the digest."""
        return blob_digest(self.data) == self.digest

    def __repr__(self) -> str:
        return f"Blob({self.digest[:19]}…, {self.media_type!r}, {self.size} bytes)"


@runtime_checkable
class BlobReader(Protocol):
    """A store that keeps blobs beside its log (both backends do): `blobs` gives those of
    these digests it holds, by digest (a digest it does not hold is left out)."""

    def blobs(self, digests: Sequence[str]) -> dict[str, Blob]: ...
