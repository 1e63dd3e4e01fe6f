"""Tamper evidence: each event carries a SHA-256 hash chained to its run's previous event.

The hash covers the previous hash, the run id, the seq, the kind, the version, the payload, the
envelope metadata and the recording time, in a canonical JSON encoding (sorted keys, no spaces,
text as UTF-8), so it survives an export and an import that keep the values but not the bytes.
An edit, a deletion or a reordering of facts breaks the chain at the first changed event; a
rewrite of the whole chain from there on, consistently, does not (compare the head hash with a
copy kept elsewhere for that).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .records import StoredEvent

__all__ = ["GENESIS", "ChainBreak", "ChainReport", "check_chain", "link"]

GENESIS = ""
"""The previous hash of a run's first hashed event."""


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text  # not JSON: the text itself is what is hashed


def link(
    previous: str,
    run_id: str,
    seq: int,
    kind: str,
    version: int,
    payload: str,
    meta: str | dict[str, Any],
    recorded_at: float,
) -> str:
    """The hash of one event, chained to `previous` (the hash of the event before it)."""
    body = [
        previous,
        run_id,
        seq,
        kind,
        version,
        _value(payload),
        _value(meta) if isinstance(meta, str) else meta,
        float(recorded_at),
    ]
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def hash_of(previous: str, event: StoredEvent) -> str:
    """`link` for a stored event."""
    return link(
        previous,
        event.run_id,
        event.seq,
        event.kind,
        event.version,
        event.payload,
        event.meta,
        event.recorded_at,
    )


@dataclass(frozen=True)
class ChainBreak:
    """The first event whose hash does not match: where, and why."""

    seq: int
    kind: str
    reason: str

    def __str__(self) -> str:
        return f"seq {self.seq} ({self.kind}): {self.reason}"


@dataclass(frozen=True)
class ChainReport:
    """What checking one run's chain found: how many events were hashed, how many were
    recorded before hashes were kept, the head hash, and the first broken link if any."""

    run_id: str
    events: int
    unhashed: int
    head: str | None
    broken: ChainBreak | None = None

    @property
    def ok(self) -> bool:
        """True when no link is broken (events recorded before hashes are not failures)."""
        return self.broken is None

    def __str__(self) -> str:
        if self.broken is not None:
            return f"run {self.run_id}: broken at {self.broken}"
        if self.unhashed == self.events:
            return (
                f"run {self.run_id}: {self.events} facts recorded before hashes were kept; "
                "nothing to verify"
            )
        older = f", {self.unhashed} recorded before hashes (not verified)" if self.unhashed else ""
        return (
            f"run {self.run_id}: intact, {self.events - self.unhashed} facts chained{older}; "
            f"head {self.head}"
        )

    def __repr__(self) -> str:
        state = "ok" if self.ok else f"broken at seq {self.broken.seq}"  # type: ignore[union-attr]
        return f"ChainReport(run_id={self.run_id!r}, {state}, events={self.events})"


def check_chain(
    run_id: str,
    events: Sequence[StoredEvent],
    *,
    unhashed_upto: int = 0,
    last_seq: int | None = None,
) -> ChainReport:
    """Check a run's events, in order. Events up to seq `unhashed_upto` may lack a hash (they
    were recorded before the store kept hashes); every later one must have the right one.
    `last_seq`, the catalog's idea of the run's length, catches facts cut off the end."""
    previous = GENESIS
    unhashed = 0

    def report(broken: ChainBreak | None) -> ChainReport:
        return ChainReport(run_id, len(events), unhashed, previous or None, broken)

    for expected_seq, event in enumerate(events, start=1):
        if event.seq != expected_seq:
            return report(ChainBreak(expected_seq, event.kind, f"seq {expected_seq} is missing"))
        if event.hash is None:
            if previous != GENESIS or event.seq > unhashed_upto:
                return report(ChainBreak(event.seq, event.kind, "the fact has no hash"))
            unhashed += 1
            continue
        expected = hash_of(previous, event)
        if event.hash != expected:
            return report(
                ChainBreak(
                    event.seq,
                    event.kind,
                    "the hash does not match the fact and the chain before it: the fact, "
                    "or one before it, was changed after it was recorded",
                )
            )
        previous = event.hash
    if last_seq is not None and last_seq > len(events):
        missing = len(events) + 1
        return report(ChainBreak(missing, "?", f"the catalog says the run has {last_seq} facts"))
    return report(None)
