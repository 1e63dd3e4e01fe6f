"""Log format 2 on SQLite: a run's facts packed into few, narrow rows.

Format 1 writes one self-describing row per fact: the run id as text, the kind and the
envelope as text, the hash as 45 characters, and a second copy of the run id and seq in the
primary key's index. Format 2 writes one row per fact that stands on its own and carries the
small facts that follow from it (`NewEvent.rides`: a transition, a step's start) in that row:

    facts(id, run, seq, last, kind, state, step, payload, meta, at, version, more, hash)

`run` is the run's integer `runs.key`; `seq`..`last` the facts the row holds; `kind` and
`state` small codes of the `names` table; `step` the envelope's step; `payload` the first
fact's payload as recorded; `meta` the rest of its envelope (metrics, custom), NULL when there
is none; `at` its recording time; `version` its version (1 is stored in no bytes); `more` the
riders, NULL when there are none; `hash` the SHA-256 of the row's last fact as 32 bytes.

The hash chain is the one of format 1 (`eventstore.chain`, version-2 hashes, fact by fact);
only the last fact's hash of each row is stored. A reader recomputes the others on its way to
the stored one, so a change to any fact of a row (or before it) breaks the row's hash: a
chained read marks them `COVERED`, and `ChainCheck` compares at the row's end. Facts imported
with an earlier release's version-1 hash, and a migrated log's facts, are kept one to a row
with their own hashes (a version-1 hash as 33 bytes, its first 0x01).

Every fact reads back exactly as it was written (kind, version, payload text, envelope,
recording time, hash), so format-1 and format-2 logs read, fold, verify and replay alike.
"""

from __future__ import annotations

import base64
import json
import json.scanner
import math
import re
import sqlite3
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .chain import COVERED, GENESIS, V2, chained, hash_of_digest, link, loads
from .errors import StoreError
from .records import NewEvent, StoredEvent

if TYPE_CHECKING:
    import sqlite_utils

__all__ = [
    "FORMAT2_COLUMNS",
    "KEPT_EVERY",
    "MAX_RIDERS",
    "Names",
    "Naming",
    "create_format2",
    "hash_bytes",
    "hash_text",
    "insert_rows",
    "unpack",
]


FORMAT2_COLUMNS = "seq, last, kind, state, step, payload, meta, at, version, more, hash"
"""The columns a reader of `facts` selects, in the order `unpack` takes them."""

MAX_RIDERS = 0xFFFF
"""The most facts a row carries after its first: the search index names a fact by its row's
id and its place in the row, in 16 bits (`SQLiteEventStore.search`)."""

KEPT_EVERY = 256
"""A long append (an import, a copy, a run created with many facts) keeps the hash of every
this many rows too, not only its last row's: a read that begins in its middle checks its
chain from the kept hash before it, not from the run's first fact."""

_PLAIN_META = re.compile(r'\{"state":"([A-Za-z0-9_]+)","step":(0|[1-9][0-9]{0,15})(?:,(.+))?\}')
"""An envelope that begins with a state name and a step (as the recorder writes it): both go
in columns, the rest (`,"metrics":...}`) in `meta`."""


def hash_bytes(hash_: str | None) -> bytes:
    """A stored hash as bytes: a version-2 hash's 32, a version-1 hash's 32 after 0x01, none
    for a fact recorded before hashes were kept (NULL is a hash a later row's covers)."""
    if hash_ is None or hash_ == "":
        return b""
    if hash_.startswith(V2):
        return base64.urlsafe_b64decode(hash_[len(V2) :] + "=")
    return b"\x01" + bytes.fromhex(hash_)


def hash_text(stored: bytes | str | None) -> str | None:
    """The hash as `eventstore.chain` writes it, from its stored bytes: `COVERED` where the row
    keeps none (NULL), None for a fact recorded before hashes were kept (no bytes)."""
    if stored is None:
        return COVERED
    if not stored:
        return None
    if isinstance(stored, str):  # text where bytes belong (edited outside agentsm)
        return "!" + stored  # matches no hash: the check names the fact
    if len(stored) == 33 and stored[0] == 1:
        return stored[1:].hex()
    return hash_of_digest(stored)


class Names:
    """The codes of kinds and states (`names` table), kept once read or committed."""

    __slots__ = ("codes", "names", "texts")

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}
        self.names: dict[int, str] = {}
        self.texts: dict[Any, str] = {}
        """Texts made of codes (`unpack`), kept for the next rows read."""

    def load(self, conn: sqlite3.Connection) -> None:
        """Read every code the log holds."""
        for code, name in conn.execute("SELECT code, name FROM names"):
            self.codes[name] = code
            self.names[code] = name

    def missing(self, names: Iterable[str]) -> list[str]:
        """The names that have no code here yet."""
        return [n for n in dict.fromkeys(names) if n not in self.codes]

    def add(self, conn: sqlite3.Connection, names: Sequence[str]) -> dict[str, int]:
        """Give `names` codes in the caller's transaction; returns them (the caller keeps them
        once the transaction committed: `keep`)."""
        conn.executemany("INSERT OR IGNORE INTO names (name) VALUES (?)", [(n,) for n in names])
        marks = ", ".join("?" * len(names))
        rows = conn.execute(f"SELECT name, code FROM names WHERE name IN ({marks})", tuple(names))
        return dict(rows.fetchall())

    def keep(self, codes: dict[str, int]) -> None:
        """Remember codes that are committed."""
        for name, code in codes.items():
            self.codes[name] = code
            self.names[code] = name

    def name(self, conn: sqlite3.Connection, code: int) -> str:
        """The name of a code (read from the log if this store has not seen it)."""
        found = self.names.get(code)
        if found is None:
            self.load(conn)
            found = self.names[code]
        return found

    def __repr__(self) -> str:
        return f"Names({len(self.codes)} known)"


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")

_MEMO = 4096
"""At most this many texts remembered in each of the memos below (then they start again)."""

_NAMED: dict[str, list[str] | None] = {}
_ENVELOPES: dict[str, tuple[str | None, int | None, str | None]] = {}
_INLINE: dict[str, str] = {}
_UNSEEN: list[str] = []
"""What `_NAMED` gives for a text it does not hold (compared by identity)."""


def _remember(memo: dict[str, Any], text: str, value: Any) -> Any:
    if len(memo) >= _MEMO:
        memo.clear()
    memo[text] = value
    return value


def _named(payload: str) -> list[str] | None:
    """A payload that is a flat object of names (`{"event":"Continue","to_state":"Planning"}`)
    as its keys and values in order, where compact JSON of them gives its very text back."""
    seen = _NAMED.get(payload, _UNSEEN)  # one look-up: another thread may clear the memo
    if seen is not _UNSEEN:
        return seen
    found: list[str] | None = None
    if payload.startswith('{"'):
        try:
            value = json.loads(payload)
        except ValueError:
            value = None
        if isinstance(value, dict) and _compact(value) == payload:
            found = []
            for k, v in value.items():
                if type(v) is not str or not _NAME.fullmatch(k) or not _NAME.fullmatch(v):
                    found = None
                    break
                found += (k, v)
    return _remember(_NAMED, payload, found)  # type: ignore[no-any-return]


def _split(meta: str) -> tuple[str | None, int | None, str | None]:
    """An envelope as (state, step, the rest as JSON or None); a state and step that are not a
    plain name and a whole number stay in the text."""
    found = _ENVELOPES.get(meta)
    if found is None:
        plain = _PLAIN_META.fullmatch(meta)
        if plain is None:
            found = (None, None, meta)
        else:
            rest = plain.group(3)
            found = (plain.group(1), int(plain.group(2)), f"{{{rest}}}" if rest else None)
        _remember(_ENVELOPES, meta, found)
    return found


class Naming:
    """The codes one write needs: those the store knows, and `missing` ones given inside the
    write's transaction (`codes`); the store keeps those (`added`) only once it committed, so
    that a code rolled back is never used."""

    __slots__ = ("added", "missing", "names")

    def __init__(self, names: Names, missing: list[str]) -> None:
        self.names, self.missing = names, missing
        self.added: dict[str, int] = {}

    def codes(self, conn: sqlite3.Connection) -> dict[str, int]:
        """Every code the write needs, the missing ones given in `conn`'s transaction."""
        if not self.missing:
            return self.names.codes
        self.added = self.names.add(conn, self.missing)
        return {**self.names.codes, **self.added}

    def __repr__(self) -> str:
        return f"Naming(missing={self.missing!r})"


def names_of(events: Sequence[NewEvent]) -> list[str]:
    """The kinds and envelope states of `events`, and the names in the riders' payloads (what
    their rows need codes for)."""
    found = [e.kind for e in events]
    for e in events:
        state = _split(e.meta)[0]
        if state is not None:
            found.append(state)
        if e.rides and (named := _named(e.payload)) is not None:
            found += named
    return found


def _envelope(meta: str, codes: dict[str, int]) -> tuple[int | None, int | None, str | None]:
    """An envelope as (state code, step, the rest as JSON or None) (see `_split`)."""
    state, step, rest = _split(meta)
    return (None if state is None else codes[state]), step, rest


def _meta_text(state: str | None, step: int | None, rest: str | None) -> str:
    """The envelope as it was written (the inverse of `_envelope`)."""
    if state is None:
        return rest if rest is not None else "{}"
    if rest is None:
        return f'{{"state":"{state}","step":{step}}}'
    return f'{{"state":"{state}","step":{step},{rest[1:-1]}}}'


def _inline(payload: str, codes: dict[str, int]) -> str:
    """A rider's payload in `more`: a flat object of names as the list of their codes, else its
    text as a JSON string."""
    named = _named(payload)
    if named is not None:
        return f"[{','.join([str(codes[n]) for n in named])}]"
    found = _INLINE.get(payload)
    if found is None:  # as a JSON string: read back as the text itself, nothing to re-encode
        found = str(_remember(_INLINE, payload, json.dumps(payload, ensure_ascii=False)))
    return found


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def insert_rows(
    conn: sqlite3.Connection,
    run_id: str,
    key: int,
    after: int,
    events: Sequence[NewEvent],
    codes: dict[str, int],
) -> None:
    """Insert `events` after seq `after` of run `run_id` (key `key`) as format-2 rows, the
    hash chain continued from the row before; the last row keeps its hash, and every
    `KEPT_EVERY`-th row of a long append too (a fact of an earlier release's version-1 hash,
    in a row of its own, keeps its own). A fact
    recorded at a time JSON cannot hold (infinite) takes a row of its own, its time a
    column's."""
    row = conn.execute(
        "SELECT hash FROM facts WHERE run = ? AND seq <= ? ORDER BY seq DESC LIMIT 1",
        (key, after),
    ).fetchone()
    previous = (hash_text(row[0]) if row is not None else None) or GENESIS
    rows: list[list[Any]] = []
    riders: list[str] = []
    current: list[Any] | None = None
    last_meta = last_at = None
    for seq, e in enumerate(events, start=after + 1):
        before, previous = previous, chained(previous, run_id, seq, e)
        if (
            e.rides
            and current is not None
            and e.chain == 2
            and math.isfinite(e.recorded_at)
            and current[1] - current[0] < MAX_RIDERS
        ):
            extra: list[str] = []
            if e.meta != last_meta:
                state, step, rest = _envelope(e.meta, codes)
                plain = state is not None and rest is None
                shown = f"[{state},{step}]" if plain else json.dumps(e.meta)
                extra.append(f'"m":{shown}')
            if e.recorded_at != last_at:
                extra.append(f'"t":{float.__repr__(float(e.recorded_at))}')
            if e.version != 1:
                extra.append(f'"v":{int(e.version)}')
            more = f",{{{','.join(extra)}}}" if extra else ""
            riders.append(f"[{codes[e.kind]},{_inline(e.payload, codes)}{more}]")
            current[1] = seq
        else:
            if current is not None:
                current[9] = f"[{','.join(riders)}]" if riders else None
                riders = []
                if len(rows) % KEPT_EVERY == 0:  # the hash of its last fact, the one before
                    current[-1] = hash_bytes(before)
            state, step, rest = _envelope(e.meta, codes)
            version = None if e.version == 1 else e.version
            current = [seq, seq, codes[e.kind], state, step, e.payload, rest, e.recorded_at]
            current += [version, None, None]
            rows.append(current)
            if e.chain != 2:  # an earlier release's version-1 hash: a row of its own, kept
                current[-1] = hash_bytes(previous)
                current = None
        last_meta, last_at = e.meta, e.recorded_at
    if current is not None:
        current[9] = f"[{','.join(riders)}]" if riders else None
    if rows and rows[-1][-1] is None:  # the append's last row keeps the hash that covers all
        rows[-1][-1] = hash_bytes(previous)
    conn.executemany(
        "INSERT INTO facts (run, seq, last, kind, state, step, payload, meta, at, version, "
        "more, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(key, *r) for r in rows],
    )


Row = tuple[int, str, int, str, str, float, "str | None"]
"""One fact as (seq, kind, version, payload, meta text, recorded_at, hash)."""


def unpack(rows: Iterable[Sequence[Any]], name: Any, texts: dict[Any, str]) -> list[Row]:
    """The facts of format-2 rows (`FORMAT2_COLUMNS`, in seq order), each as a `Row`; a fact
    whose hash its row does not store gets `COVERED`. `name(code)` gives a code's name;
    `texts` keeps the texts made of codes (envelopes, flat payloads) for the next rows."""
    out: list[Row] = []
    append = out.append
    named: dict[Any, str] = {}  # the names of the codes met in these rows
    for seq, last, kind, state, step, payload, rest, at, version, more, stored in rows:
        if state is None:
            meta = rest if rest is not None else "{}"
        elif rest is None:
            key = ("m", state, step)
            meta = texts.get(key) or _text(texts, key, name)
        else:
            meta = _meta_text(named.get(state) or _name(named, name, state), step, rest)
        version = 1 if version is None else version
        kind_name = named.get(kind) or _name(named, name, kind)
        if more is None:
            append((seq, kind_name, version, payload, meta, at, hash_text(stored)))
            continue
        append((seq, kind_name, version, payload, meta, at, COVERED))
        for n, rider in enumerate(loads(more), start=seq + 1):
            given_payload = rider[1]
            if type(given_payload) is str:
                text = given_payload
            elif isinstance(given_payload, list):  # a flat object of names, by their codes
                codes = tuple(given_payload)
                text = texts.get(codes) or _text(texts, codes, name)
            else:
                text = _compact(given_payload)
            version = 1
            if len(rider) > 2:
                extra = rider[2]
                given_meta = extra.get("m")
                if isinstance(given_meta, list):  # a state's code and a step
                    key = ("m", given_meta[0], given_meta[1])
                    meta = texts.get(key) or _text(texts, key, name)
                elif given_meta is not None:
                    meta = given_meta
                at = extra.get("t", at)
                version = extra.get("v", 1)
            code = rider[0]
            append(
                (
                    n,
                    named.get(code) or _name(named, name, code),
                    version,
                    text,
                    meta,
                    at,
                    hash_text(stored) if n == last else COVERED,
                )
            )
    return out


def _name(named: dict[Any, str], name: Any, code: Any) -> str:
    """`name(code)`, kept in `named` for the rest of the rows being unpacked."""
    found: str = name(code)
    named[code] = found
    return found


def _text(texts: dict[Any, str], key: tuple[Any, ...], name: Any) -> str:
    """The text a key of codes stands for, kept in `texts`: `("m", state, step)` an envelope,
    a tuple of codes a flat object of names."""
    if len(texts) >= _MEMO:
        texts.clear()
    if key[0] == "m":
        made = _meta_text(name(key[1]), key[2], None)
    else:
        pairs = iter([name(c) for c in key])
        made = _compact(dict(zip(pairs, pairs, strict=True)))
    texts[key] = made
    return made


def hashed(rows: list[Row], run_id: str, previous: str) -> list[Row]:
    """`rows` with each `COVERED` hash computed, chained from `previous` (the hash of the fact
    before the first); the stored ones are left as they are (a check compares them)."""
    out: list[Row] = []
    for seq, kind, version, payload, meta, at, given in rows:
        if given is COVERED:
            given = link(previous, run_id, seq, kind, version, payload, meta, at)
        out.append((seq, kind, version, payload, meta, at, given))
        previous = given or GENESIS
    return out


def stored_events(run_id: str, rows: list[Row]) -> list[StoredEvent]:
    """Stored events of these facts (their meta parsed)."""
    return [StoredEvent(run_id, r[0], r[1], r[3], json.loads(r[4]), r[5], r[2], r[6]) for r in rows]


def create_format2(db: sqlite_utils.Database) -> None:
    """Migrate a log to format 2: the `names` and `facts` tables, an integer key per run, the
    events of format 1 moved into `facts` one to a row (their hashes kept), and `events`
    become a view of the facts for SQL readers. The search index is made again from the
    facts at the next search."""
    db.execute("CREATE TABLE names (code INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)")
    db.execute("ALTER TABLE runs ADD COLUMN key INTEGER")
    db.execute(  # 1, 2, 3 ... in the order the runs were added, in one pass over the catalog
        "UPDATE runs SET key = n.key FROM (SELECT rowid AS id, ROW_NUMBER() OVER "
        "(ORDER BY rowid) AS key FROM runs) AS n WHERE n.id = runs.rowid"
    )
    db.execute("CREATE UNIQUE INDEX runs_key ON runs (key)")
    db.execute(
        "CREATE TRIGGER runs_give_key AFTER INSERT ON runs WHEN NEW.key IS NULL BEGIN "
        "UPDATE runs SET key = (SELECT COALESCE(MAX(key), 0) + 1 FROM runs) "
        "WHERE run_id = NEW.run_id; END"
    )
    db.execute(
        "CREATE TRIGGER runs_keep_key BEFORE UPDATE OF key ON runs "
        "WHEN OLD.key IS NOT NULL AND NEW.key IS NOT OLD.key BEGIN "
        "SELECT RAISE(ABORT, 'runs: a run keeps its key'); END"
    )
    db.execute(
        "CREATE TABLE facts (id INTEGER PRIMARY KEY, run INTEGER NOT NULL, "
        "seq INTEGER NOT NULL, last INTEGER NOT NULL, kind INTEGER NOT NULL, state INTEGER, "
        "step INTEGER, payload TEXT NOT NULL, meta TEXT, at REAL NOT NULL, version INTEGER, "
        "more TEXT, hash BLOB)"
    )
    db.execute("CREATE UNIQUE INDEX facts_at ON facts (run, seq)")
    _move_events(db)
    for trigger in (
        "events_refuse_update",
        "events_refuse_delete",
        "events_insert_at_end",
        "runs_keep_logged_runs",
        "runs_keep_logged_ids",
    ):
        db.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    db.execute("DROP TABLE events")
    for action in ("UPDATE", "DELETE"):
        db.execute(
            f"CREATE TRIGGER facts_refuse_{action.lower()} BEFORE {action} ON facts BEGIN "
            f"SELECT RAISE(ABORT, 'facts are append-only: {action} is refused'); END"
        )
    db.execute(
        "CREATE TRIGGER facts_insert_at_end BEFORE INSERT ON facts "
        "WHEN NEW.seq IS NOT COALESCE((SELECT last FROM facts WHERE run = NEW.run "
        "ORDER BY seq DESC LIMIT 1), 0) + 1 OR NEW.last < NEW.seq "
        "OR NOT EXISTS (SELECT 1 FROM runs WHERE key = NEW.run) BEGIN "
        "SELECT RAISE(ABORT, 'facts are append-only: a row goes right after its run''s last "
        "fact, into a run of the catalog'); END"
    )
    db.execute(
        "CREATE TRIGGER runs_keep_logged_runs BEFORE DELETE ON runs "
        "WHEN EXISTS (SELECT 1 FROM facts WHERE run = OLD.key) BEGIN "
        "SELECT RAISE(ABORT, 'runs: a run that has facts cannot leave the catalog'); END"
    )
    db.execute(
        "CREATE TRIGGER runs_keep_logged_ids BEFORE UPDATE OF run_id ON runs "
        "WHEN NEW.run_id IS NOT OLD.run_id "
        "AND EXISTS (SELECT 1 FROM facts WHERE run = OLD.key) BEGIN "
        "SELECT RAISE(ABORT, 'runs: a run that has facts cannot change its id'); END"
    )
    db.execute(_EVENTS_VIEW)
    for action in ("UPDATE", "DELETE"):
        db.execute(
            f"CREATE TRIGGER names_refuse_{action.lower()} BEFORE {action} ON names BEGIN "
            f"SELECT RAISE(ABORT, 'names are append-only: {action} is refused'); END"
        )
    if "events_words" in db.table_names():  # rowids were the events': index the facts anew
        db.execute("DROP TABLE events_words")
        db.execute(
            "CREATE VIRTUAL TABLE events_words USING FTS5 (words, content='', tokenize='ascii')"
        )
        db.execute("UPDATE events_indexed SET upto = 0")


def _move_events(db: sqlite_utils.Database) -> None:
    """Copy format 1's events into `facts`, one to a row, each with its own hash; facts of a
    run the catalog lacks (which `facts` has no key for) stop the migration, nothing changed."""
    conn = db.conn
    lost = [
        r[0]
        for r in conn.execute(
            "SELECT DISTINCT run_id FROM events WHERE run_id NOT IN (SELECT run_id FROM runs) "
            "ORDER BY run_id LIMIT 4"
        )
    ]
    if lost:
        raise StoreError(
            f"Facts of runs missing from the catalog (table runs): {', '.join(map(repr, lost[:3]))}"
            f"{' and more' if len(lost) > 3 else ''}. Format 2 keeps a run's facts under its "
            "catalog entry, so the log was left in format 1, as it was; add those runs to the "
            "catalog first."
        )
    names = Names()
    columns = {r[1] for r in conn.execute("PRAGMA table_info(events)")}
    hashes = "e.hash" if "hash" in columns else "NULL"
    query = conn.execute(
        "SELECT r.key, e.run_id, e.seq, e.kind, e.payload, e.meta, e.recorded_at, e.version, "
        f"{hashes} FROM events e JOIN runs r ON r.run_id = e.run_id ORDER BY r.key, e.seq"
    )
    while page := query.fetchmany(5000):
        wanted = names.missing(
            [r[3] for r in page]
            + [m.group(1) for r in page if (m := _PLAIN_META.fullmatch(r[5])) is not None]
        )
        if wanted:
            names.keep(names.add(conn, wanted))
        rows = []
        for key, _run_id, seq, kind, payload, meta, at, version, given in page:
            state, step, rest = _envelope(meta, names.codes)
            rows.append(
                (key, seq, seq, names.codes[kind], state, step, payload, rest, at)
                + (None if version == 1 else version, None, hash_bytes(given))
            )
        conn.executemany(
            "INSERT INTO facts (run, seq, last, kind, state, step, payload, meta, at, version, "
            "more, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )


_EVENTS_VIEW = """CREATE VIEW events (run_id, seq, kind, payload, meta, recorded_at, version,
hash) AS
SELECT r.run_id, f.seq, k.name, f.payload,
       CASE WHEN f.state IS NULL THEN COALESCE(f.meta, '{}')
            ELSE '{"state":' || json_quote(s.name) || ',"step":' || f.step
                 || CASE WHEN f.meta IS NULL THEN '}' ELSE ',' || substr(f.meta, 2) END
       END,
       f.at, COALESCE(f.version, 1), CASE WHEN f.more IS NULL THEN f.hash END
FROM facts f JOIN runs r ON r.key = f.run JOIN names k ON k.code = f.kind
LEFT JOIN names s ON s.code = f.state
UNION ALL
SELECT r.run_id, f.seq + j.key + 1, k.name,
       CASE json_type(j.value, '$[1]') WHEN 'text' THEN j.value ->> '$[1]'
            WHEN 'array' THEN (SELECT json_group_object(k.name, v.name)
                FROM json_each(j.value, '$[1]') a JOIN json_each(j.value, '$[1]') b
                ON b.key = a.key + 1 AND a.key % 2 = 0
                JOIN names k ON k.code = a.value JOIN names v ON v.code = b.value)
            ELSE j.value -> '$[1]' END,
       NULL,
       COALESCE((SELECT t.value ->> '$[2].t' FROM json_each(f.more) t
                 WHERE t.key <= j.key AND t.value ->> '$[2].t' IS NOT NULL
                 ORDER BY t.key DESC LIMIT 1), f.at),
       COALESCE(j.value ->> '$[2].v', 1),
       CASE WHEN f.seq + j.key + 1 = f.last THEN f.hash END
FROM facts f JOIN runs r ON r.key = f.run, json_each(f.more) j
JOIN names k ON k.code = j.value ->> '$[0]'
"""
"""For SQL readers: one row per fact as format 1 stored them (kind, payload, recorded_at,
version; the envelope of a row's first fact, NULL for the facts that follow it; the hash where
a row keeps it). agentsm reads `facts`."""
