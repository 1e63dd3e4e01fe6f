"""A checked read (`ChainCheck.rows`, the loop every reader of a run goes through) finds each
edit of a log exactly where checking its facts one by one finds it, and the hashes it checks
against are the ones the chain defines, whatever text a fact holds."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentsm import AgentBuilder, AgentConfig, LlmResponse, MockLlmCaller, tool
from eventstore import LogTampered, SQLiteEventStore
from eventstore.chain import COVERED, GENESIS, ChainCheck, link, link_v1
from eventstore.reading import read_checked

Row = tuple[Any, ...]


@tool
def lookup(city: str) -> str:
    """Look a city up."""
    return f"{city} has {len(city)} museums"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Row]]:
    """A format-2 log of a five-step run, and its rows as a checked read is given them."""
    db = tmp_path_factory.mktemp("chain") / "log.db"
    script = [LlmResponse.tool_call("lookup", {"city": f"c{n}"}) for n in range(5)]
    script.append(LlmResponse.final_answer("The answer, long enough to be accepted: Paris."))
    config = AgentConfig(reflect_every_n_steps=0, max_steps=8)
    with SQLiteEventStore(db) as store:
        builder = AgentBuilder("Find the capital").llm(MockLlmCaller(script)).tool(lookup)
        builder.config(config).store(store).run_id("r").build().run()
        assert store.log_format == 2
        rows = list(store.read_chained("r"))
    assert any(r[6] is COVERED for r in rows) and any(r[6] is not COVERED for r in rows)
    return db, rows


def one_by_one(rows: list[Row]) -> tuple[Any, ...]:
    """What checking `rows` one at a time gives: the error, or the state and each hash."""
    check, hashes = ChainCheck("r"), list[str | None]()
    try:
        for row in rows:
            check.check(*row)
            hashes.append(None if row[6] is None else check.previous)
        check.end(rows[-1][0], rows[-1][0])
    except LogTampered as e:
        return "tampered", str(e), check.seq
    return "ok", check.seq, check.previous, check.open, check.unhashed, hashes


def at_once(rows: list[Row]) -> tuple[Any, ...]:
    """The same, from `ChainCheck.rows`."""
    check, hashes = ChainCheck("r"), list[str | None]()
    try:
        check.rows(rows, hashes)
        check.end(rows[-1][0], rows[-1][0])
    except LogTampered as e:
        return "tampered", str(e), check.seq
    return "ok", check.seq, check.previous, check.open, check.unhashed, hashes


def with_v1_hashes(rows: list[Row]) -> list[Row]:
    """The rows as an earlier release hashed them: every fact its own version-1 hash."""
    out, previous = [], GENESIS
    for row in rows:
        previous = link_v1(previous, "r", *row[:6])
        out.append((*row[:6], previous))
    return out


def edit(i: int, field: int, value: Callable[[Any], Any]) -> Callable[[list[Row]], list[Row]]:
    def edited(rows: list[Row]) -> list[Row]:
        row = list(rows[i])
        row[field] = value(row[field])
        return [*rows[:i], tuple(row), *rows[i + 1 :]]

    return edited


EDITS: dict[str, Callable[[list[Row]], list[Row]]] = {
    "as recorded": lambda rows: rows,
    "a payload changed": edit(8, 3, lambda p: p.replace("c0", "d0")),
    "a rider's payload changed": edit(2, 3, lambda p: p + " "),
    "an envelope changed": edit(9, 4, lambda m: m.replace('"step":1', '"step":2')),
    "a time changed": edit(7, 5, lambda at: at + 1e-6),
    "a version changed": edit(6, 2, lambda v: v + 1),
    "a kind changed": edit(4, 1, lambda k: k + "s"),
    "a kept hash changed": lambda rows: edit(
        next(i for i, r in enumerate(rows) if i > 10 and r[6] is not COVERED), 6, lambda h: h[::-1]
    )(rows),
    "a kept hash removed": lambda rows: edit(
        next(i for i, r in enumerate(rows) if i > 10 and r[6] is not COVERED), 6, lambda h: None
    )(rows),
    "a fact removed": lambda rows: rows[:8] + rows[9:],
    "two facts swapped": lambda rows: [*rows[:8], rows[9], rows[8], *rows[10:]],
    "the end cut inside a row": lambda rows: rows[
        : next(i for i, r in enumerate(rows) if i > 10 and r[6] is COVERED) + 1
    ],
    "hashes of an earlier release": with_v1_hashes,
    "an earlier release's hash changed": lambda rows: edit(12, 3, lambda p: p.replace("2", "3"))(
        with_v1_hashes(rows)
    ),
    "recorded before hashes were kept": lambda rows: [(*r[:6], None) for r in rows],
    "hashes removed from the start": lambda rows: [(*r[:6], None) for r in rows[:6]] + rows[6:],
}


@pytest.mark.parametrize("edited", list(EDITS))
def test_a_read_checked_at_once_finds_what_a_check_fact_by_fact_finds(
    recorded: tuple[Path, list[Row]], edited: str
) -> None:
    rows = EDITS[edited](recorded[1])
    expected = one_by_one(rows)
    assert at_once(rows) == expected
    intact = ("as recorded", "hashes of an earlier release", "recorded before hashes were kept")
    assert (expected[0] == "ok") == (edited in intact)  # the store checks the last (`verify`)


def test_a_checked_read_gives_every_fact_with_the_hash_the_chain_gives_it(
    recorded: tuple[Path, list[Row]],
) -> None:
    db, rows = recorded
    previous = GENESIS
    with SQLiteEventStore(db, read_only=True) as store:
        for row, read in zip(rows, read_checked(store, "r"), strict=True):
            hashed = link(previous, "r", *row[:6])
            assert row[6] is COVERED or row[6] == hashed
            assert read[:6] == row[:6]
            previous = hashed
        assert store.verify("r").head == previous


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def parsed(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=12,
)


@st.composite
def texts(draw: st.DrawFn) -> str:
    """A payload or an envelope as a log may hold it: JSON written compactly, with spaces,
    escaped, or any text at all."""
    how = draw(st.sampled_from(["compact", "spaced", "ascii", "any"]))
    if how == "any":
        return draw(st.text(max_size=30))
    value = draw(JSON)
    if how == "spaced":
        return json.dumps(value, indent=1)
    return json.dumps(value, ensure_ascii=how == "ascii", separators=(",", ":"))


@given(texts(), texts(), st.integers(1, 10**6), st.floats(allow_nan=False))
def test_a_version_1_hash_is_the_sha256_of_the_canonical_json_of_its_fields(
    payload: str, meta: str, seq: int, at: float
) -> None:
    fields = ["2:previous", "r", seq, "Kind", 1, parsed(payload), parsed(meta), at]
    body = canonical(fields).encode("utf-8", "surrogatepass")
    assert link_v1("2:previous", "r", seq, "Kind", 1, payload, meta, at) == (
        hashlib.sha256(body).hexdigest()
    )
