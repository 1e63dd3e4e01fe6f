"""Digests of what memory holds, short and stable: the same value gives the same digest in
every process (canonical JSON: sorted keys, no spaces), so a replay can compare them."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from .types import HistoryEntry

__all__ = ["digest", "history_digest"]

_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode
"""What `json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)` gives,
with one encoder built once (a digest is made at every step)."""


def digest(value: Any) -> str:
    """The digest of a JSON value."""
    return hashlib.sha256(_CANONICAL(value).encode()).hexdigest()[:32]


def history_digest(previous: str, entries: Iterable[HistoryEntry]) -> str:
    """The digest of a history whose earlier entries digest to `previous`, with `entries`
    added: a chain, so that each step adds its entries without going over all of them."""
    return digest([previous, [e.model_dump(mode="json") for e in entries]])
