"""Time travel in one pass: `moments` steps through a run, `memory_at` reuses what it folded."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agentsm import LlmResponse, State
from agentsm.memory import fold_with_state
from agentsm.trace import Trace
from eventstore import SQLiteEventStore
from replay import Moment, memory_at, moments
from replay.timetravel import CHECKPOINT

from .scenarios import LONG, base


def record(db: Path, steps: int, key: str = "k") -> str:
    """A run of `steps` tool calls (about ten facts each), then an answer, with a fixed id."""
    script = [LlmResponse.tool_call("lookup", {"key": f"{key}{i}"}) for i in range(steps)]
    script.append(LlmResponse.final_answer(LONG))
    agent = base("Look things up.", script, max_steps=steps + 1, reflect_every_n_steps=0)
    engine = agent.store(db).run_id("the-run").build()
    engine.run()
    return engine.run_id


def expected(db: Path, run_id: str, seq: int) -> tuple[object, str]:
    facts = Trace.load(SQLiteEventStore(db), run_id, upto=seq).facts()
    return fold_with_state(facts)


def test_moments_give_every_fact_with_the_memory_and_state_after_it(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id = record(db, 3)
    walked = list(moments(db, run_id))
    facts = Trace.load(SQLiteEventStore(db), run_id).facts()
    assert [m.seq for m in walked] == list(range(1, len(facts) + 1))
    assert [m.fact for m in walked] == facts
    for m in walked:
        assert (m.memory, m.state) == expected(db, run_id, m.seq)
    assert walked[-1].state == State.Done and walked[-1].memory.final_answer == LONG
    seq, fact, memory, state = walked[0]
    assert isinstance(walked[0], Moment) and fact.kind == "RunStarted" and state == State.Idle
    assert [m.seq for m in moments(db, run_id[:8], start=5, upto=7)] == [5, 6, 7]


def test_memory_at_is_the_fold_up_to_the_seq_past_and_between_checkpoints(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    run_id = record(db, 60)  # some 600 facts: a few checkpoints
    last = SQLiteEventStore(db).run(run_id).last_seq
    assert last > 2 * CHECKPOINT
    for seq in (last, 1, CHECKPOINT, CHECKPOINT + 1, 2 * CHECKPOINT - 1, last - 3):
        assert memory_at(db, run_id, seq) == expected(db, run_id, seq)
    with pytest.raises(ValueError, match=f"seq {last + 1} is not one of them"):
        memory_at(db, run_id, last + 1)


def test_a_log_replaced_at_the_same_path_is_folded_again(tmp_path: Path) -> None:
    db, other = tmp_path / "runs.db", tmp_path / "other.db"
    run_id = record(db, 60, key="first")
    assert record(other, 60, key="second") == run_id
    seq = SQLiteEventStore(db).run(run_id).last_seq - 1
    before = memory_at(db, run_id, seq)
    assert before[0].history[-1].tool.args == {"key": "first59"}
    source, target = sqlite3.connect(other), sqlite3.connect(db)
    source.backup(target)  # another log with the same run id, where the first one was
    source.close()
    target.close()
    after = memory_at(db, run_id, seq)
    assert after == expected(other, run_id, seq)
    assert after[0].history[-1].tool.args == {"key": "second59"}
