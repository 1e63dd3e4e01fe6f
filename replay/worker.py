"""Workers: processes on any host that claim runs that can go on and drive them to their end.

A run can go on when it was submitted to run later (`AgentBuilder.submit()`, status "queued"),
when a human's decision on a waiting run was recorded (`replay.decide`, status "ready"), or
when its driver died (its lease ran out: "orphaned"). The store's `claim_next` hands each such
run to one worker only; the worker continues it as `resume_run` does, so a tool that was running
when a driver died is re-run only if idempotent, and otherwise waits for a human.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from agentsm import AgentFailed, HumanInputRequired
from eventstore import EventStore, StoreError

from .resuming import Around, continue_claimed
from .source import Builder

__all__ = ["Worker", "WorkResult"]

Outcome = Literal["done", "failed", "waiting", "lost", "stopped"]


@dataclass(frozen=True)
class WorkResult:
    """What a worker did with one run: how it found it (`claimed`: "queued", "ready" or
    "orphaned"), how it left it (`outcome`), and the answer or the reason."""

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
    live).
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
    ) -> None:
        if poll <= 0:
            raise ValueError(f"poll must be a positive number of seconds, not {poll!r}.")
        self.store = store
        self.builder = builder
        self.kinds = tuple(kinds)
        self.poll = poll
        self.on_result = on_result
        self.around = around

    def run_once(self) -> WorkResult | None:
        """Claim one run that can go on and drive it; None when no run can go on now."""
        record = self.store.claim_next(kinds=self.kinds)
        if record is None:
            return None
        claimed = _KIND_OF_STATUS.get(record.status, record.status)
        result = self._drive(record.run_id, claimed)
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
        taken = 0
        while not stop.is_set():
            if self.run_once() is not None:
                taken += 1
                continue
            self.store.wait_for_append(self.poll)
        return taken

    def _drive(self, run_id: str, claimed: str) -> WorkResult:
        def result(outcome: Outcome, detail: str) -> WorkResult:
            return WorkResult(run_id, claimed, outcome, detail)

        try:
            return result(
                "done", continue_claimed(self.store, run_id, self.builder, around=self.around)
            )
        except AgentFailed as e:
            return result("failed", e.error)
        except HumanInputRequired as e:
            return result("waiting", "; ".join(f"{r.call.name}: {r.reason}" for r in e.requests))
        except StoreError as e:  # taken over (this worker's lease ran out) or the store failed:
            return result("lost", str(e))  # the log says what happened; leave the run be
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
