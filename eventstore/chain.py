"""Tamper evidence: each event carries a SHA-256 hash chained to its run's previous event.

The hash covers the previous hash, the run id, the seq, the kind, the version, the payload, the
envelope metadata and the recording time. Two versions of the hash exist, and each event's hash
says which it is, so a run may hold both (a log recorded by an earlier release, continued by
this one) and no migration is needed on any backend:

- version 1 (64 hex digits, earlier releases): the SHA-256 of the canonical JSON (sorted keys,
  no spaces, text as UTF-8) of all eight, the payload and the metadata parsed first;
- version 2 (`"2:"` and 43 characters, what is written now): the SHA-256 (in unpadded
  URL-safe base64, a third shorter than hex) of the eight fields, each length-prefixed, the
  payload as the very text stored (it is not parsed, which made version 1 cost some 4 us per
  event) and the metadata in canonical JSON (the store hands it back parsed; its few repeated
  texts are canonicalised once).

An edit, a deletion or a reordering of facts breaks the chain at the first changed event; a
rewrite of the whole chain from there on, consistently, does not (compare the head hash with a
copy kept elsewhere for that). An export carries a version-2 payload's exact text when parsing
and re-encoding it would not give the same bytes back (`exact_text`), so the hashes survive an
export and an import.
"""

from __future__ import annotations

import binascii
import hashlib
import json
import json.scanner
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .blobs import Blob, blob_refs
from .errors import LogTampered
from .records import NewEvent, StoredEvent

__all__ = [
    "COVERED",
    "GENESIS",
    "V2",
    "ChainBreak",
    "ChainCheck",
    "ChainReport",
    "blob_break",
    "blob_refs_of",
    "chained",
    "check_chain",
    "exact_text",
    "link",
    "link_v1",
    "relink",
]

GENESIS = ""
"""The previous hash of a run's first hashed event."""


class _Covered(str):
    """The type of `COVERED`: no text read from a database is one."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "COVERED"


COVERED = _Covered("")
"""The hash a chained read gives an event whose hash its store does not keep (a format-2 row
keeps only its last event's, `eventstore.sqlite_format2`): it follows from the events before
it, and the next kept hash covers it. Recognised by identity (`given is COVERED`), so that no
stored text can pass for it."""


_canonical = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode
"""The canonical JSON encoding the hash covers (one encoder, built once)."""

_string = json.encoder.encode_basestring  # what that encoder does with a str, without the rest

_METAS: dict[str, str] = {}
"""Canonical forms of envelope texts seen (the same few repeat: state and step); bounded."""


_scan: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(
    json.JSONDecoder()  # type: ignore[arg-type]  # what JSONDecoder itself makes its scanner of
)
"""`json.loads` without its wrappers: the value at the start of a text and where it ends."""

_encoder = getattr(json.encoder, "c_make_encoder", None)
_parsed = (
    None if _encoder is None else _encoder(None, None, _string, None, ":", ",", True, False, True)
)
"""`_canonical` of a value parsed from JSON (no cycles, nothing but JSON's types), without
the encoder's per-call set-up: the same C encoder, the same settings."""


_UNPARSED: Any = object()
"""What `scanned` gives for a text it leaves to `json.loads`."""


def scanned(text: str) -> Any:
    """The value of a JSON object or list written as JSON writes it (nothing before or after
    it), parsed by `json.loads`' own scanner without its wrappers (reads parse many); else
    `_UNPARSED`, for `json.loads` to parse or to say what is wrong with it."""
    if text[:1] in ("{", "["):
        try:
            value, end = _scan(text, 0)
        except (StopIteration, ValueError):
            return _UNPARSED
        if end == len(text):
            return value
    return _UNPARSED


def loads(text: str) -> Any:
    """`json.loads(text)`, faster for an object or a list as JSON writes it (`scanned`)."""
    value = scanned(text)
    return json.loads(text) if value is _UNPARSED else value


def _value(text: str) -> str:
    """The canonical JSON of a JSON text (or of the text itself when it is not JSON)."""
    if _parsed is not None:
        value = scanned(text)
        if value is not _UNPARSED:
            return "".join(_parsed(value, 0))
    try:
        return _canonical(json.loads(text))
    except ValueError:
        return _canonical(text)  # not JSON: the text itself is what is hashed


_PLAIN_META = re.compile(r'\{"state":"[A-Za-z0-9_]*","step":(?:0|[1-9][0-9]{0,15})\}')
"""An envelope of a state name and a step, compact: its own canonical JSON (keys in order,
no spaces, plain text, a whole number as JSON writes it)."""


_PLAIN_STATE = re.compile(r"[A-Za-z0-9_]*")


def _meta(meta: str | dict[str, Any]) -> str:
    if not isinstance(meta, str):
        if len(meta) == 2:  # a state name and a step, as `_PLAIN_META`, made without encoding
            state, step = meta.get("state"), meta.get("step")
            if type(state) is str and type(step) is int and _PLAIN_STATE.fullmatch(state):
                return f'{{"state":"{state}","step":{int.__repr__(step)}}}'
        return _canonical(meta)
    found = _METAS.get(meta)  # first: a look-up costs a tenth of the match below
    if found is None:
        found = meta if _PLAIN_META.fullmatch(meta) else _value(meta)
        if '"metrics"' not in meta:  # measurements do not repeat
            if len(_METAS) >= 4096:
                _METAS.clear()
            _METAS[meta] = found
    return found


def link_v1(
    previous: str,
    run_id: str,
    seq: int,
    kind: str,
    version: int,
    payload: str,
    meta: str | dict[str, Any],
    recorded_at: float,
) -> str:
    """The hash of one event, chained to `previous` (the hash of the event before it): the
    SHA-256 of the canonical JSON of `[previous, run_id, seq, kind, version, payload, meta,
    recorded_at]`, the payload and meta parsed (sorted keys, no spaces, text as UTF-8)."""
    body = ",".join(
        (
            _string(previous),
            _string(run_id),
            int.__repr__(seq),
            _string(kind),
            int.__repr__(version),
            _value(payload),
            _meta(meta),
            _time(recorded_at),
        )
    )
    return hashlib.sha256(f"[{body}]".encode("utf-8", "surrogatepass")).hexdigest()


V2 = "2:"
"""How a version-2 hash begins (a version-1 hash is 64 hex digits)."""


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
    """The version-2 hash of one event, chained to `previous` (the hash of the event before
    it): `"2:"` and the SHA-256 (unpadded URL-safe base64) of the eight fields, each as its
    length, a colon and its text, the payload as stored and the meta in canonical JSON."""
    s, v, m, a = int.__repr__(seq), int.__repr__(version), _meta(meta), _time(recorded_at)
    body = (  # one f-string: a sixth faster than joining the eight (a read checks every event)
        f"{len(previous)}:{previous}{len(run_id)}:{run_id}{len(s)}:{s}{len(kind)}:{kind}"
        f"{len(v)}:{v}{len(payload)}:{payload}{len(m)}:{m}{len(a)}:{a}"
    )
    return _hash(body)


_sha256 = hashlib.sha256
_b64 = binascii.b2a_base64
_URLSAFE = bytes.maketrans(b"+/", b"-_")


def _hash(body: str) -> str:
    """A version-2 hash of the text of its fields (a read hashes every event)."""
    return hash_of_digest(_sha256(body.encode("utf-8", "surrogatepass")).digest())


def hash_of_digest(digest: bytes) -> str:
    """A version-2 hash as text, from its 32-byte SHA-256 digest: `base64.urlsafe_b64encode`
    of it without its one padding character, made in one call each."""
    return V2 + _b64(digest, newline=False).translate(_URLSAFE)[:43].decode("ascii")


def _time(recorded_at: float) -> str:
    """A recording time as a hash covers it (its JSON)."""
    at = float(recorded_at)
    return float.__repr__(at) if math.isfinite(at) else _canonical(at)


def chained(previous: str, run_id: str, seq: int, event: NewEvent) -> str:
    """The hash a store gives a new event after `previous`, in the version it asks for."""
    hashed = link if event.chain == 2 else link_v1
    return hashed(
        previous,
        run_id,
        seq,
        event.kind,
        event.version,
        event.payload,
        event.meta,
        event.recorded_at,
    )


def exact_text(payload: str) -> str | None:
    """The payload's text when compact JSON re-encoding of its value would not give the same
    bytes (an export carries it so that a version-2 hash survives an import), else None."""
    try:
        same = json.dumps(json.loads(payload), separators=(",", ":"), ensure_ascii=False)
    except ValueError:
        return payload
    return None if same == payload else payload


def relink(
    given: str,
    previous: str,
    run_id: str,
    seq: int,
    kind: str,
    version: int,
    payload: str,
    meta: str | dict[str, Any],
    recorded_at: float,
) -> str:
    """The hash an event should have, computed in the version its `given` hash states."""
    hashed = link if given.startswith(V2) else link_v1
    return hashed(previous, run_id, seq, kind, version, payload, meta, recorded_at)


def hash_of(previous: str, event: StoredEvent) -> str:
    """The hash a stored event should have, in the version its own hash states."""
    return relink(
        event.hash or "",
        previous,
        event.run_id,
        event.seq,
        event.kind,
        event.version,
        event.payload,
        event.meta,
        event.recorded_at,
    )


Cause = Literal["changed", "missing", "unhashed", "cut", "blob"]
"""How a chain breaks: a fact that does not match its hash (edited, or moved), a seq missing
(deleted), a fact without a hash after hashed ones, facts missing at the end, a blob a fact
refers to missing or changed (`eventstore.blobs`)."""


@dataclass(frozen=True)
class ChainBreak:
    """The first event whose hash does not match: where, and why."""

    seq: int
    kind: str
    reason: str
    cause: Cause = "changed"

    @property
    def problem(self) -> str:
        """The break in a few words, as `LogTampered` says it."""
        if self.cause == "missing":
            return f"seq {self.seq} is missing"
        if self.cause == "unhashed":
            return f"seq {self.seq} ({self.kind}) has lost its hash"
        if self.cause == "cut":
            return f"seq {self.seq} is missing ({self.reason})"
        if self.cause == "blob":
            return f"seq {self.seq} ({self.kind}): {self.reason}"
        return f"seq {self.seq} ({self.kind}) does not match its hash"

    def error(self, run_id: str) -> LogTampered:
        """The error a reader raises for this break of run `run_id`'s chain."""
        return LogTampered(run_id, self.seq, self.kind, self.problem)

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
    `last_seq`, the catalog's idea of the run's length, catches facts cut off the end. An event
    whose hash its store does not keep (`COVERED`) is chained on to the next kept hash; the
    last event must have one, so that no change to the end of a run goes unchecked."""
    previous = GENESIS
    unhashed = 0

    def report(broken: ChainBreak | None) -> ChainReport:
        return ChainReport(run_id, len(events), unhashed, previous or None, broken)

    for expected_seq, event in enumerate(events, start=1):
        if event.seq != expected_seq:
            return report(_missing(expected_seq, event.kind))
        if event.hash is None:
            if previous != GENESIS or event.seq > unhashed_upto:
                return report(_unhashed(event.seq, event.kind))
            unhashed += 1
            continue
        if event.hash is COVERED:  # a later kept hash covers it: the last event must have one
            previous = link(
                previous,
                run_id,
                event.seq,
                event.kind,
                event.version,
                event.payload,
                event.meta,
                event.recorded_at,
            )
            continue
        expected = hash_of(previous, event)
        if event.hash != expected:
            return report(_changed(event.seq, event.kind))
        previous = event.hash
    if last_seq is not None and last_seq > len(events):  # also why a tail is left uncovered
        return report(_cut(len(events) + 1, last_seq))
    if events and events[-1].hash is COVERED:
        return report(_unhashed(events[-1].seq, events[-1].kind))
    return report(None)


def _missing(seq: int, kind: str) -> ChainBreak:
    return ChainBreak(seq, kind, f"seq {seq} is missing", "missing")


def _unhashed(seq: int, kind: str) -> ChainBreak:
    return ChainBreak(seq, kind, "the fact has no hash", "unhashed")


def _changed(seq: int, kind: str) -> ChainBreak:
    return ChainBreak(
        seq,
        kind,
        "the hash does not match the fact and the chain before it: the fact, or one before it, "
        "was changed after it was recorded",
    )


def _cut(seq: int, last_seq: int) -> ChainBreak:
    return ChainBreak(seq, "?", f"the catalog says the run has {last_seq} facts", "cut")


_UNSET: Any = object()
"""No field seen yet (`ChainCheck.rows`): equal to nothing a row holds."""


class ChainCheck:
    """A run's chain checked as a reader reads its events, in order, from the first (or from
    the one after seq `seq`, whose hash is `previous`): `check` raises `LogTampered` at the
    first broken link, `end` when facts the catalog counts are missing at the end. Events
    without a hash are taken only before any hashed one (a log begun by an earlier release);
    `unhashed` counts them, and only the store knows how many a run may have (`verify`)."""

    __slots__ = ("open", "previous", "run_id", "seq", "unhashed")

    def __init__(self, run_id: str, *, seq: int = 0, previous: str = GENESIS) -> None:
        self.run_id, self.seq, self.previous = run_id, seq, previous
        self.unhashed = 0
        self.open: str | None = None
        """The kind of the last event checked when its hash was `COVERED` (a kept hash must
        follow), else None."""

    def check(
        self,
        seq: int,
        kind: str,
        version: int,
        payload: str,
        meta: str | dict[str, Any],
        recorded_at: float,
        given: str | None,
    ) -> None:
        """Check the next event (its stored fields and hash), or raise `LogTampered`."""
        due = self.seq + 1
        if seq != due:
            raise _missing(due, kind).error(self.run_id)
        self.seq = seq
        if given is None:
            if self.previous != GENESIS:
                raise _unhashed(seq, kind).error(self.run_id)
            self.unhashed += 1
            return
        if given is COVERED:  # not kept: the row's kept hash, further on, is compared
            self.previous = link(
                self.previous, self.run_id, seq, kind, version, payload, meta, recorded_at
            )
            self.open = kind
            return
        self.open = None
        hashed = link if given.startswith(V2) else link_v1
        if hashed(self.previous, self.run_id, seq, kind, version, payload, meta, recorded_at) != (
            given
        ):
            raise _changed(seq, kind).error(self.run_id)
        self.previous = given

    def rows(self, rows: Iterable[Sequence[Any]], hashes: list[str | None] | None = None) -> None:
        """`check` each of `rows` (seq, kind, version, payload, meta, recorded_at, hash), in
        order, or raise `LogTampered` at the first that breaks the chain, as `check` would;
        with `hashes`, append each event's hash as the chain has it (None where it has none).
        The same checks, each event hashed once, with the texts of fields that repeat from
        one event to the next (the envelope, the time) made once. After an error the check
        is spent."""
        run_id = self.run_id
        named = f"{len(run_id)}:{run_id}"
        previous, open_, due = self.previous, self.open, self.seq + 1
        last_meta: Any = _UNSET
        last_at: Any = _UNSET
        last_version: Any = _UNSET
        m = a = v = ""  # the fields' texts, each with its length before it
        kinds: dict[str, str] = {}
        sha256, b64, urlsafe = _sha256, _b64, _URLSAFE
        for row in rows:
            seq, kind, version, payload, meta, at, given = row
            if seq != due or given is None or (given is not COVERED and not given.startswith(V2)):
                # the rare ones (a gap, no hash, an earlier release's hash) as `check` does
                self.seq, self.previous, self.open = due - 1, previous, open_
                self.check(seq, kind, version, payload, meta, at, given)
                previous, open_, due = self.previous, self.open, self.seq + 1
                if hashes is not None:
                    hashes.append(None if given is None else previous)
                continue
            due += 1
            if meta is not last_meta:
                m, last_meta = _meta(meta), meta
                m = f"{len(m)}:{m}"
            if at is not last_at:
                a, last_at = _time(at), at
                a = f"{len(a)}:{a}"
            if version is not last_version:
                v, last_version = int.__repr__(version), version
                v = f"{len(v)}:{v}"
            k = kinds.get(kind)
            if k is None:
                k = kinds[kind] = f"{len(kind)}:{kind}"
            s = int.__repr__(seq)
            body = (
                f"{len(previous)}:{previous}{named}{len(s)}:{s}{k}{v}{len(payload)}:{payload}{m}{a}"
            )
            digest = sha256(body.encode("utf-8", "surrogatepass")).digest()  # `_hash`, inline
            hashed = V2 + b64(digest, newline=False).translate(urlsafe)[:43].decode("ascii")
            if given is COVERED:  # not kept: the row's kept hash, further on, is compared
                open_ = kind
            elif hashed != given:
                self.seq, self.previous, self.open = seq, previous, None
                raise _changed(seq, kind).error(run_id)
            else:
                open_ = None
            previous = hashed
            if hashes is not None:
                hashes.append(hashed)
        self.seq, self.previous, self.open = due - 1, previous, open_

    def end(self, upto: int, last_seq: int) -> None:
        """Raise `LogTampered` if the events read stop short of seq `upto` (the last one asked
        for, at most `last_seq`: the catalog's length of the run), or at an event whose hash
        no kept one confirmed (a store reads on to the next kept hash, and the last event of a
        run keeps one)."""
        if self.seq < upto:
            raise _cut(self.seq + 1, last_seq).error(self.run_id)
        if self.open is not None:
            raise _unhashed(self.seq, self.open).error(self.run_id)

    def __repr__(self) -> str:
        return f"ChainCheck(run_id={self.run_id!r}, seq={self.seq})"


def blob_refs_of(events: Iterable[StoredEvent]) -> list[str]:
    """The digests of the blobs these events refer to, each once."""
    return list(dict.fromkeys(d for e in events for d in blob_refs(e.payload)))


def blob_break(events: Iterable[StoredEvent], found: Mapping[str, Blob]) -> ChainBreak | None:
    """The first event that refers to a blob `found` (the store's blobs) lacks, or holds with
    bytes that no longer match its digest (`eventstore.blobs`); None if there is none."""
    for event in events:
        seq, kind = event.seq, event.kind
        for digest in blob_refs(event.payload):
            blob = found.get(digest)
            if blob is None:
                reason = f"the blob {digest} it refers to is not in the log"
                return ChainBreak(seq, kind, reason, "blob")
            if not blob.intact:
                reason = f"the bytes of the blob {digest} it refers to do not match its digest"
                return ChainBreak(seq, kind, reason, "blob")
    return None
