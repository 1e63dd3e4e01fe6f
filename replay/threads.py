"""Threads offline: replay every turn of a thread, and branch a thread at a turn with another
message (a new thread sharing the turns before it). See `agentsm.threads`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentsm import AgentFailed, HumanInputRequired, Thread
from agentsm.threads import thread_runs
from eventstore import EventStore, RunRecord

from .errors import UnknownThread
from .replaying import replay_run
from .report import ReplayReport
from .source import Builder, StoreLike, opened

__all__ = ["ThreadBranched", "ThreadReplay", "branch_thread", "replay_thread", "turns_of"]


def turns_of(store: EventStore, thread_id: str) -> list[RunRecord]:
    """The turns of a thread in order (`agentsm.threads.thread_runs`); `UnknownThread` when
    the log holds none."""
    records = thread_runs(store, thread_id)
    if not records:
        raise UnknownThread(thread_id)
    return records


@dataclass(frozen=True)
class ThreadReplay:
    """The replay of every turn of a thread, one report per turn, in order."""

    thread_id: str
    reports: tuple[ReplayReport, ...]

    @property
    def identical(self) -> bool:
        """True when every turn replayed identical."""
        return all(r.identical for r in self.reports)

    def __bool__(self) -> bool:
        return self.identical

    def __str__(self) -> str:
        return "\n".join(f"turn {n}: {r}" for n, r in enumerate(self.reports, 1))

    def __repr__(self) -> str:
        same = sum(r.identical for r in self.reports)
        return f"ThreadReplay({self.thread_id!r}, turns={len(self.reports)}, identical={same})"


def replay_thread(
    db: StoreLike, thread_id: str, builder: Builder | None = None, *, execute_tools: bool = False
) -> ThreadReplay:
    """Replay each turn of a thread on its own (`replay_run`): each turn's log holds the
    conversation it started from, so each replays against its own recording."""
    with opened(db) as store:
        reports = tuple(
            replay_run(store, r.run_id, builder, execute_tools=execute_tools)
            for r in turns_of(store, thread_id)
        )
    return ThreadReplay(thread_id, reports)


@dataclass(frozen=True)
class ThreadBranched:
    """A thread branched from another at a turn: its id, where it came from, the run of its
    first own turn and how that turn ended (status done, failed, waiting...)."""

    thread_id: str
    branched_from: str
    at_turn: int
    run_id: str
    status: str
    answer: str | None = None
    error: str | None = None
    runs: tuple[str, ...] = ()
    """The run ids of the new thread's turns: the shared ones, then its own."""

    def to_dict(self) -> dict[str, Any]:
        """As plain data (what `agentsm branch --thread --json` prints)."""
        return {
            "thread_id": self.thread_id,
            "branched_from": self.branched_from,
            "at_turn": self.at_turn,
            "run_id": self.run_id,
            "status": self.status,
            "answer": self.answer,
            "error": self.error,
            "runs": list(self.runs),
        }

    def __repr__(self) -> str:
        said = f"answer={self.answer!r:.50}" if self.answer is not None else f"error={self.error!r}"
        return (
            f"ThreadBranched({self.thread_id!r} from {self.branched_from!r} at turn "
            f"{self.at_turn}, {self.status}, {said})"
        )


def branch_thread(
    db: StoreLike,
    thread_id: str,
    at_turn: int,
    message: str,
    builder: Builder,
    *,
    new_thread_id: str | None = None,
) -> ThreadBranched:
    """Branch thread `thread_id` at turn `at_turn` (from 1) with another user message: a new
    thread that shares the turns before it, whose turn `at_turn` answers `message` with the
    user's agent (`builder(task)`, its live LLM), recorded with where it came from. The turn
    may fail or wait for a human like any other: the result says how it ended."""
    with opened(db) as store:
        turns_of(store, thread_id)
        branched = Thread.of(builder, store, thread_id).branch(at_turn, new_thread_id)
        answer = error = None
        try:
            answer = branched.send(message)
        except AgentFailed as e:
            error = e.error
        except HumanInputRequired:
            pass  # waits for a human: its status says so
        run_id = branched.runs[-1]
        return ThreadBranched(
            branched.id,
            thread_id,
            at_turn,
            run_id,
            store.run(run_id).status,
            answer,
            error,
            branched.runs,
        )
