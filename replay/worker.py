"""Workers: processes on any host that claim runs that can go on and drive them to their end.

A run can go on when it was submitted to run later (`AgentBuilder.submit()`, status "queued"),
when a human's decision on a waiting run was recorded (`replay.decide`, status "ready"), or
when its driver died (its lease ran out: "orphaned"). The store's `claim_next` hands each such
run to one worker only; the worker continues it as `resume_run` does, so a tool that was running
when a driver died is re-run only if idempotent, and otherwise waits for a human.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from agentsm import AgentFailed, HumanInputRequired
from agentsm.errors import RunStopped
from eventstore import EventStore, LeaseLost, RunRecord, StoreError

from .resuming import Around, continue_claimed
from .source import Builder

__all__ = ["Worker", "WorkResult"]

Outcome = Literal["done", "failed", "waiting", "lost", "interrupted", "stopped"]

log = logging.getLogger("agentsm.worker")

BACKOFF = (0.1, 10.0)
"""A worker's first and longest pause after a store error, in seconds (doubled each time)."""


@dataclass(frozen=True)
class WorkResult:
    """What a worker did with one run: how it found it (`claimed`: "queued", "ready" or
    "orphaned"), how it left it (`outcome`: "done", "failed", "waiting" for a human, "lost" to
    another driver that took it, "interrupted" by a store error, to be taken again, or
    "stopped": someone asked it to stop, or the agent could not go on here), and the answer or
    the reason."""

    run_id: str
    claimed: str
    outcome: Outcome
    detail: str = ""

    def __str__(self) -> str:
        detail = " ".join(self.detail.split())
        detail = detail if len(detail) <= 100 else detail[:99] + "…"
        return f"{self.run_id} ({self.claimed}) -> {self.outcome}" + (
            f": {detail}" if detail else ""
        )


_KIND_OF_STATUS = {"queued": "queued", "ready": "ready", "running": "orphaned"}


class Worker:
    """Claims runs that can go on from `store` and drives each to its end (or to a human)
    with the user's agent, `builder(task)` (an `AgentBuilder` with the LLM, tools and
    handlers; the store is set here).

    `kinds` limits what it takes (default: queued, ready and orphaned runs); `poll` is the
    longest it sleeps between looks when nothing can go on (it wakes earlier when something
    is recorded); `on_result` is called with each `WorkResult`; `around(engine)`, a context
    manager, wraps each run it drives (`lambda engine: replay.otel.traced(engine)` traces them
    live); `on_error` is called with one line when the store fails between runs (the worker
    backs off and goes on; by default the line is logged).
    """

    def __init__(
        self,
        store: EventStore,
        builder: Builder,
        *,
        kinds: Sequence[str] = ("queued", "ready", "orphaned"),
        poll: float = 1.0,
        on_result: Callable[[WorkResult], None] | None = None,
        around: Around | None = None,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        if poll <= 0:
            raise ValueError(f"poll must be a positive number of seconds, not {poll!r}.")
        self.store = store
        self.builder = builder
        self.kinds = tuple(kinds)
        self.poll = poll
        self.on_result = on_result
        self.around = around
        self.on_error = on_error or log.warning

    def run_once(self) -> WorkResult | None:
        """Claim one run that can go on and drive it; None when no run can go on now."""
        record = self.store.claim_next(kinds=self.kinds)
        if record is None:
            return None
        claimed = _KIND_OF_STATUS.get(record.status, record.status)
        result = self._drive(record, claimed)
        if self.on_result is not None:
            self.on_result(result)
        return result

    def drain(self) -> list[WorkResult]:
        """Drive runs until none can go on now; the results, in order."""
        results = []
        while (result := self.run_once()) is not None:
            results.append(result)
        return results

    def run_forever(self, stop: threading.Event | None = None) -> int:
        """Drive runs as they become able to go on, until `stop` is set (checked between
        runs and while idle); returns how many runs it took."""
        stop = stop or threading.Event()
        taken, pause = 0, BACKOFF[0]
        while not stop.is_set():
            try:
                if self.run_once() is not None:
                    taken += 1
                else:
                    self.store.wait_for_append(self.poll)
                pause = BACKOFF[0]
            except StoreError as e:  # a blip, or the store is down: say so, wait, go on
                self.on_error(f"{e} (trying again in {pause:.1f} s)")
                stop.wait(pause * random.uniform(0.5, 1.0))
                pause = min(pause * 2, BACKOFF[1])
        return taken

    def _drive(self, record: RunRecord, claimed: str) -> WorkResult:
        run_id = record.run_id

        def result(outcome: Outcome, detail: str) -> WorkResult:
            return WorkResult(run_id, claimed, outcome, detail)

        try:
            answer = continue_claimed(
                self.store, run_id, self.builder, around=self.around, previous=record.previous
            )
            return result("done", answer)
        except AgentFailed as e:
            return result("failed", e.error)
        except HumanInputRequired as e:
            return result("waiting", "; ".join(f"{r.call.name}: {r.reason}" for r in e.requests))
        except RunStopped as e:  # someone asked it to stop: stopped there, for `agentsm resume`
            return result("stopped", e.reason or "stop requested")
        except LeaseLost as e:  # taken over (this worker stalled past its lease): its driver now
            return result("lost", str(e))  # has it, and this worker wrote nothing more to it
        except StoreError as e:  # the store failed: the run stays where its last commit left
            return result("interrupted", str(e))  # it, released below for any worker to take
        except Exception as e:  # the agent cannot go on here (its builder failed, a handler
            # crashed): take the run out of the queue, so that it does not come straight back
            self._set_aside(run_id)
            return result("stopped", f"{type(e).__name__}: {e}")
        finally:
            self.store.release(run_id)

    def _set_aside(self, run_id: str) -> None:
        """Mark a run this worker still holds but could not drive "stopped" (unless it ended
        meanwhile): it waits for `agentsm resume`, as a run stopped by hand does."""
        try:
            if self.store.run(run_id).status in _KIND_OF_STATUS:
                self.store.set_status(run_id, "stopped")
        except StoreError:
            pass

    def __repr__(self) -> str:
        return f"Worker(store={self.store!r}, kinds={self.kinds!r})"
