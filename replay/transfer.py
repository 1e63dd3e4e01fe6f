"""Moving runs between databases as JSON lines: one line for the run, one per fact, and one
per blob its facts refer to (an image's bytes, checked against its digest on the way in).

The run's line states how many facts follow (`facts`) and the hash of the last (`head`); each
fact line carries the fact's hash. An import checks every line (it is JSON, its fact decodes,
its hash continues the run's chain), that the facts reach the stated count and head, and that
the run's line says of the run what its facts say (`replay.vouched`) before it writes anything,
so a file that is damaged, edited or cut off after export imports nothing, and the catalog of
an imported run shows what its verified facts say.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from agentsm import UnreadableFact
from agentsm.facts import FACTS, Fact
from agentsm.recorder import RIDERS
from eventstore import EventStore, NewEvent, RunSummary, StoredEvent
from eventstore.blobs import Blob, BlobReader, blob_refs
from eventstore.chain import GENESIS, V2, blob_refs_of, exact_text, relink
from eventstore.records import meta_text, with_riders

from .errors import ExportRefused, ImportRefused
from .source import resolve_run
from .vouched import Entry, vouched

__all__ = ["export_run", "facts_of", "import_runs"]


def export_run(store: EventStore, run_id: str) -> Iterator[str]:
    """The run as JSON lines: its catalog entry, then every event with its envelope and hash,
    then each blob its facts refer to (an image's bytes, in base64). A run whose hash chain
    does not verify (or a blob it refers to) is refused (`ExportRefused`) before any line: its
    export could not be imported."""
    record = store.run(resolve_run(store, run_id))
    report = store.verify(record.run_id)
    if report.broken is not None:
        broken = report.broken
        raise ExportRefused(record.run_id, broken.seq, broken.kind, broken.problem)
    events = store.read(record.run_id, upto=record.last_seq)  # the facts its status is about
    head = next((e.hash for e in reversed(events) if e.hash is not None), None)
    line = {
        "type": "run",
        "run_id": record.run_id,
        "task": record.task,
        "status": record.status,
        "parent_id": record.parent_id,
        "branch_seq": record.branch_seq,
        "created_at": record.created_at,
        "info": record.info,
        "facts": len(events),
        "head": head,
    }
    if record.summary != RunSummary():
        line["summary"] = asdict(record.summary)
    yield json.dumps(line)
    for e in events:
        fact = {
            "type": "event",
            "seq": e.seq,
            "kind": e.kind,
            "payload": json.loads(e.payload),
            "meta": e.meta,
            "recorded_at": e.recorded_at,
            "version": e.version,
            "hash": e.hash,
        }
        if e.hash is not None and e.hash.startswith(V2) and (text := exact_text(e.payload)):
            fact["payload_text"] = text  # the bytes its hash covers, which re-encoding loses
        yield json.dumps(fact)
    digests = blob_refs_of(events)
    if digests and isinstance(store, BlobReader):  # verified above: each there, intact
        found = store.blobs(digests)
        for digest in digests:
            blob = found.get(digest)
            if blob is None:
                continue
            yield json.dumps(
                {
                    "type": "blob",
                    "digest": digest,
                    "media_type": blob.media_type,
                    "data": base64.b64encode(blob.data).decode("ascii"),
                }
            )


@dataclass
class _Run:
    line: int
    item: dict[str, Any]
    events: list[NewEvent] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)
    previous: str = GENESIS
    last_line: int = 0
    blobs: dict[str, Blob] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        return str(self.item["run_id"])

    @property
    def stated(self) -> int | None:
        """How many facts the run's line says follow (None in exports made before it said)."""
        facts = self.item.get("facts")
        return facts if isinstance(facts, int) else None

    def check_whole(self, next_line: int | None) -> None:
        """Refuse a run whose facts stop short of the count and head its first line states."""
        stated = self.stated
        if stated is None:
            return
        if len(self.events) < stated:
            problem = f"run {self.run_id} has {len(self.events)} facts of {stated}; it was cut off"
            if next_line is None:
                raise ImportRefused(self.last_line, problem, at_end=True)
            raise ImportRefused(next_line, problem)
        if (self.previous or None) != self.item.get("head"):
            raise ImportRefused(
                self.last_line,
                f"run {self.run_id} ends at hash {self.previous or None}, not at the head "
                f"{self.item.get('head')} its first line states",
            )


def _event(run: _Run, item: dict[str, Any]) -> NewEvent:
    """One fact line as an event to append, after checking its seq, fact and hash."""
    seq, kind, version = item.get("seq"), item.get("kind"), item.get("version", 1)
    expected = len(run.events) + 1
    if run.stated is not None and expected > run.stated:
        raise ValueError(
            f"run {run.run_id} has more facts than the {run.stated} its first line states"
        )
    if seq != expected:
        raise ValueError(f"seq {seq!r} where {expected} was due")
    if not isinstance(kind, str) or not isinstance(version, int):
        raise ValueError("a fact needs a kind (text) and a version (a whole number)")
    if not isinstance(item.get("meta"), dict) or not isinstance(
        item.get("recorded_at"), int | float
    ):
        raise ValueError("a fact needs its meta (an object) and recorded_at (a number)")
    payload = json.dumps(item.get("payload"), separators=(",", ":"), ensure_ascii=False)
    text = item.get("payload_text")
    if text is not None:
        if not isinstance(text, str) or json.loads(text) != item.get("payload"):
            raise ValueError("payload_text is not the text of the fact's payload")
        payload = text
    custom = item["meta"].get("custom") is True  # a user's own fact: read whole without its type
    fact = FACTS.decode(
        payload, kind, version, run_id=run.run_id, seq=seq, custom=custom, meta=item["meta"]
    )
    run.facts.append(fact)
    if seq == 1 and kind != "RunStarted":
        raise ValueError(f"run {run.run_id} begins with {kind}, not RunStarted")
    given = item.get("hash")
    old = isinstance(given, str) and not given.startswith(V2)  # keeps its version-1 hash
    meta = meta_text(item["meta"])
    event = NewEvent(kind, payload, meta, item["recorded_at"], version, 1 if old else 2)
    if given is None:
        if run.previous != GENESIS:
            raise ValueError(f"seq {seq} ({kind}) has no hash, though the facts before it do")
        return event
    if not isinstance(given, str):
        raise ValueError(f"seq {seq} ({kind}) has a hash that is not text")
    hashed = relink(
        given, run.previous, run.run_id, seq, kind, version, payload, event.meta, event.recorded_at
    )
    if given != hashed:
        raise _BrokenChain(
            f"the hash of seq {seq} ({kind}) does not match its fact and the chain before it: "
            "the file was changed after it was exported, or the run's chain was already broken "
            "at the source",
            run.run_id,
        )
    run.previous = hashed
    return event


class _BrokenChain(ValueError):
    """A fact whose hash does not continue the chain: changed in the file, or at the source."""

    def __init__(self, problem: str, run_id: str) -> None:
        super().__init__(problem)
        self.run_id = run_id


def _blob(item: dict[str, Any]) -> Blob:
    """One blob line as a blob, after checking that its bytes match its digest."""
    digest, media_type, data = item.get("digest"), item.get("media_type"), item.get("data")
    if not isinstance(digest, str) or not isinstance(media_type, str):
        raise ValueError("a blob needs its digest and media_type (text)")
    try:
        raw = base64.b64decode(data if isinstance(data, str) else "", validate=True)
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"the data of the blob {digest} is not base64 ({e})") from e
    blob = Blob(digest, media_type, raw)
    if not blob.intact:
        raise ValueError(
            f"the bytes of the blob {digest} do not match its digest: the file was changed "
            "after it was exported"
        )
    return blob


def _with_blobs(store: EventStore, runs: list[_Run]) -> None:
    """Give each event the blobs its facts refer to first, from the file, so that the
    store writes them with it; refuse a run that refers to a blob neither the file nor the
    store holds."""
    given = {d: b for run in runs for d, b in run.blobs.items()}
    for run in runs:
        refs = [blob_refs(e.payload) for e in run.events]
        wanted = list(dict.fromkeys(d for found in refs for d in found))
        missing = [d for d in wanted if d not in given]
        if missing and isinstance(store, BlobReader):
            held = store.blobs(missing)
            missing = [d for d in missing if d not in held]
        if missing:
            raise ImportRefused(
                run.line,
                f"run {run.run_id} refers to the blob {missing[0]}, which neither the file nor "
                "this database holds",
                advice="export the run again with this version of agentsm",
            )
        sent: set[str] = set()
        for n, found in enumerate(refs):
            blobs = tuple(given[d] for d in found if d in given and d not in sent)
            if blobs:
                sent.update(b.digest for b in blobs)
                run.events[n] = dataclasses.replace(run.events[n], blobs=blobs)


def _header(item: dict[str, Any]) -> None:
    """Check a run's line: the fields an import needs, of the right types."""
    if not isinstance(item.get("run_id"), str) or not isinstance(item.get("task"), str):
        raise ValueError("a run needs a run_id and a task (text)")
    summary = item.get("summary")
    if summary is not None:
        known = {f.name for f in fields(RunSummary)}
        if not isinstance(summary, dict) or not set(summary) <= known:
            raise ValueError(f"a run's summary must be an object with fields among {sorted(known)}")
    if "facts" in item or "head" in item:  # older exports state neither
        facts, head = item.get("facts"), item.get("head")
        if not isinstance(facts, int) or isinstance(facts, bool) or facts < 1:
            raise ValueError("a run's facts must be a whole number, at least 1")
        if head is not None and not isinstance(head, str):
            raise ValueError("a run's head must be a hash (text) or null")


def _parse(lines: Iterable[str], name: str) -> list[_Run]:
    runs: list[_Run] = []
    number = 0
    try:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(
                    f"not JSON ({e.msg}), where an agentsm export has one JSON object per line"
                ) from e
            kind = item.get("type") if isinstance(item, dict) else None
            if kind == "run":
                _header(item)
                if runs:
                    runs[-1].check_whole(number)
                runs.append(_Run(number, item, last_line=number))
            elif kind == "event" and runs and not runs[-1].blobs:
                runs[-1].events.append(_event(runs[-1], item))
                runs[-1].last_line = number
            elif kind == "blob" and runs:
                blob = _blob(item)
                runs[-1].blobs[blob.digest] = blob
            else:
                raise ValueError("neither a run nor one of its facts")
    except _BrokenChain as e:
        advice = f"check the source with agentsm verify {e.run_id}, then export the run again"
        raise ImportRefused(number, str(e), advice=advice) from e
    except (ValueError, UnreadableFact) as e:
        raise ImportRefused(number, str(e)) from e
    if not runs:
        raise ImportRefused(
            0, f"no runs in {name}", advice="give a file that `agentsm export` wrote"
        )
    runs[-1].check_whole(None)
    for run in runs:
        if not run.events:
            raise ImportRefused(run.line, f"run {run.run_id} has no facts")
    return runs


def _entry(run: _Run) -> Entry:
    """What the catalog gets of the run: what its facts say, where its line says the same."""
    try:
        return vouched(run.item, run.facts, stated=run.stated is not None)
    except ValueError as e:
        raise ImportRefused(run.line, f"run {run.run_id}: {e}") from e


def facts_of(events: Iterable[NewEvent | StoredEvent]) -> list[tuple[Any, ...]]:
    """Events as values, so that the same facts compare equal whatever their JSON spacing."""
    return [
        (
            e.kind,
            e.version,
            json.loads(e.payload),
            json.loads(e.meta) if isinstance(e.meta, str) else e.meta,
            float(e.recorded_at),
        )
        for e in events
    ]


def _already_there(store: EventStore, runs: list[_Run]) -> set[str]:
    """The runs of the file that the store holds already with the same facts (left as they
    are); one it holds with other facts, or one in the file twice, is refused."""
    known = {r.run_id for r in store.runs()}
    seen: set[str] = set()
    present: set[str] = set()
    for run in runs:
        if run.run_id in seen:
            raise ImportRefused(run.line, f"run {run.run_id} is in the file twice")
        seen.add(run.run_id)
        if run.run_id not in known:
            continue
        if facts_of(store.read(run.run_id)) != facts_of(run.events):
            raise ImportRefused(
                run.line,
                f"run {run.run_id} is already in this database, with other facts",
                advice="import the file into another database to keep both",
            )
        present.add(run.run_id)
    return present


def import_runs(store: EventStore, lines: Iterable[str], *, name: str = "the file") -> list[str]:
    """Add the runs of an export to the store, in one transaction, and return the ids of the
    file's runs (a run the store holds already with the same facts is left as it is, so an
    import can be run again). Every line is checked first; a file with any bad line (not JSON,
    a fact that does not decode, a broken hash, facts cut off before the count and head the
    run's line states, a run line that says other than its facts, a run that exists with other
    facts) or with no runs raises `ImportRefused` naming the line, and nothing of it is
    imported. `name` names the file in messages. A run's catalog entry is what its facts say
    (`replay.vouched`: the run line's created_at, and the status of a run stopped mid-way, are
    taken as the line states them); an export made before exports stated their length is
    imported with status "imported" (the file cannot show that it is whole)."""
    runs = _parse(lines, name)
    entries = {run.run_id: _entry(run) for run in runs}
    present = _already_there(store, runs)
    _with_blobs(store, [run for run in runs if run.run_id not in present])
    with store.batch():  # one transaction: the whole file or nothing of it
        for run in runs:
            if run.run_id in present:
                continue
            entry = entries[run.run_id]
            store.create_run(
                run.run_id,
                entry.task,
                parent_id=entry.parent_id,
                branch_seq=entry.branch_seq,
                info=entry.info,
                created_at=entry.created_at,
                events=with_riders(run.events, RIDERS),  # packed as recorded (log format 2)
                status=entry.status,
                summary=entry.summary,
            )
    return [run.run_id for run in runs]
