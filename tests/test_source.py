"""Opening the log (replay.source): a function given the log's path opens its store and closes
it when done; a store object given stays open, as its caller owns it."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

import replay
from agentsm import AgentBuilder, HumanInputRequired, LlmResponse
from eventstore import EventStore, open_store
from replay.source import opened

from .agent_factory import make_agent

LONG = "A branch's answer, which is long enough to be accepted by the agent."
CALLS = 10
RUNS = CALLS + 1  # the first is called once before the count starts


def agent(task: str) -> AgentBuilder:
    return make_agent(task).require_approval("pay")


def waiting_runs(db: str, count: int) -> list[str]:
    """`count` runs waiting for a human to approve their payment."""
    ids = []
    with closing(open_store(db, create=True)) as store:
        for _ in range(count):
            engine = agent("Pay ann 30").store(store).build()
            with pytest.raises(HumanInputRequired):
                engine.run()
            ids.append(engine.run_id)
    return ids


def store_threads(db: str) -> list[str]:
    """The threads of stores open on `db` (its writer's, its lease renewer's)."""
    return [t.name for t in threading.enumerate() if t.name.endswith(f" of {db}")]


def open_files(db: str) -> list[str]:
    """The files of the log this process holds open (its connections' main file and -wal)."""
    fds = Path("/proc/self/fd")
    if not fds.is_dir():
        pytest.skip("no /proc/self/fd here to count the files held open")
    held = []
    for fd in fds.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # closed meanwhile
        if target.startswith(db):
            held.append(target)
    return held


def finished(db: str, count: int = RUNS) -> list[str]:
    ids = waiting_runs(db, count)
    for run_id in ids:
        replay.decide(db, run_id, "approved")
        replay.resume_run(db, run_id, agent)
    return ids


def judged(db: str) -> list[str]:
    """One judgement, as many times as it is read."""
    run_id = finished(db, 1)[0]
    judgement = replay.best_of(db, run_id, 3, [replay.Variant(answer=LONG)], lambda c: 0)
    return [judgement.judgement_id] * RUNS


CASES: dict[str, tuple[Callable[[str], list[str]], Callable[[str, str], Any]]] = {
    "decide": (lambda db: waiting_runs(db, RUNS), lambda db, r: replay.decide(db, r, "approved")),
    "pending_requests": (lambda db: waiting_runs(db, RUNS), replay.pending_requests),
    "resume_run": (
        lambda db: [r for r in waiting_runs(db, RUNS) if replay.decide(db, r, "rejected")],
        lambda db, r: replay.resume_run(db, r, agent),
    ),
    "replay_run": (finished, lambda db, r: replay.replay_run(db, r, agent)),
    "branch_run": (
        finished,
        lambda db, r: replay.branch_run(
            db, r, 3, llm_response=LlmResponse.final_answer(LONG), builder=agent
        ),
    ),
    "memory_at": (finished, lambda db, r: replay.memory_at(db, r, 3)),
    "moments": (finished, lambda db, r: list(replay.moments(db, r))),
    "moments, left early": (finished, lambda db, r: next(iter(replay.moments(db, r)))),
    "judgements": (finished, replay.judgements),
    "best_of": (
        finished,
        lambda db, r: replay.best_of(db, r, 3, [replay.Variant(answer=LONG)], lambda c: 0),
    ),
    "load_best_of": (judged, replay.load_best_of),
    "judge_again": (judged, lambda db, r: replay.judge_again(db, r, lambda c: 0)),
    "replay_judgement": (judged, replay.replay_judgement),
}


@pytest.mark.parametrize("name", CASES)
def test_a_function_given_the_logs_path_closes_the_store_it_opened(
    name: str, tmp_path: Path
) -> None:
    db = str(tmp_path / "log.db")
    made, call = CASES[name]
    ids = made(db)
    call(db, ids[0])  # the first call may start threads that are reused (a tool's, say)
    before = threading.active_count()
    for run_id in ids[1:]:
        call(db, run_id)
    assert store_threads(db) == []  # no writer, no lease renewer left behind
    assert threading.active_count() <= before
    assert open_files(db) == []  # no connection either


def test_a_store_given_stays_open_and_one_opened_is_closed(tmp_path: Path) -> None:
    db = str(tmp_path / "log.db")
    run_id = waiting_runs(db, 1)[0]
    with closing(open_store(db)) as store:
        with opened(store) as same:
            assert same is store
        assert replay.pending_requests(store, run_id)  # still open: the caller owns it
        replay.decide(store, run_id, "approved")
        assert store.run(run_id).status == "ready"
    with opened(db) as mine:
        assert isinstance(mine, EventStore)
        mine.claim(run_id)  # its lease renewer starts
        assert store_threads(db)
        mine.release(run_id)
    assert store_threads(db) == [] and open_files(db) == []
