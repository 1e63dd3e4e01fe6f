"""A fact whose recording time is not a number (a clock that failed) is refused with a clear
error before the database sees it, and what was recorded before stays as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from eventstore import NewEvent, SQLiteEventStore, StoreError

META = '{"state":"Planning","step":1}'


@pytest.mark.parametrize("log_format", [1, 2])
def test_a_fact_timed_nan_is_refused_and_nothing_is_written(
    tmp_path: Path, log_format: int
) -> None:
    with SQLiteEventStore(tmp_path / "log.db", log_format=log_format) as store:
        with pytest.raises(StoreError, match=r"create run 'x'.*fact 1 of 1 \(RunStarted\).*NaN"):
            store.create_run("x", "t", events=[NewEvent("RunStarted", "{}", META, float("nan"))])
        store.create_run("r", "t", events=[NewEvent("RunStarted", '{"task":"t"}', META, 1.0)])
        before = store.read("r")
        for nan_at in (0, 1):  # the last fact, and one before it
            events = [NewEvent("Said", '{"text":"a"}', META, 2.0) for _ in range(2)]
            events[nan_at] = NewEvent("Said", '{"text":"b"}', META, float("nan"))
            with pytest.raises(StoreError, match=rf"fact {nan_at + 1} of 2 \(Said\).*NaN"):
                store.append("r", 1, events)
        assert store.read("r") == before and store.run("r").last_seq == 1
        assert store.verify("r").ok and "x" not in {r.run_id for r in store.runs()}
