"""A drive: one stretch of a turn's run driven by the server (a new turn, or the same run
going on after an answer, a decision or a resume), as the events it sends. It runs in a task
of its own, so a client that leaves does not stop the run; any number of followers read its
events from any point until its `end`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence

from agentsm.outputs import AgentOutput, FinalAnswer, RunErrored

from .events import EndEvent, ErrorEvent, Event, RunEvent, StoppedEvent, events_of

__all__ = ["Drive", "one_line"]

Ending = Callable[[str | None, str | None], EndEvent]
"""The `end` event of a drive, given the answer and the error it saw (read from the log)."""


STOPPING = "the server stopped; resume the turn to go on"
"""The reason a drive gives when the server stops under it."""


def one_line(error: BaseException) -> str:
    """An error as one line of text."""
    return " ".join(str(error).split()) or type(error).__name__


class Drive:
    """The events of one drive of run `run_id` (turn `turn` of thread `thread_id`), from its
    `run` event to its `end`: `start` pumps the engine's outputs into them in a task of its
    own; `follow` reads them."""

    def __init__(self, thread_id: str, run_id: str, turn: int) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.events: list[Event] = [
            ("run", RunEvent(thread_id=thread_id, run_id=run_id, turn=turn))
        ]
        self.ended = False
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(
        self,
        outputs: AsyncIterator[AgentOutput] | None,
        ending: Ending,
        *,
        first: Sequence[AgentOutput] = (),
        failure: BaseException | None = None,
    ) -> Drive:
        """Send `first`, then every output of `outputs` as it comes (a `failure` instead of
        outputs: the run could not go on), then the `end` event `ending` gives."""
        self._task = asyncio.create_task(self._pump(outputs, ending, first, failure))
        return self

    async def _pump(
        self,
        outputs: AsyncIterator[AgentOutput] | None,
        ending: Ending,
        first: Sequence[AgentOutput],
        failure: BaseException | None,
    ) -> None:
        answer: str | None = None
        error: str | None = None

        def send(output: AgentOutput) -> None:
            nonlocal answer, error
            if isinstance(output, FinalAnswer):
                answer = output.content
            elif isinstance(output, RunErrored):
                error = output.error
            for event in events_of(output):
                self._add(event)

        try:
            for output in first:
                send(output)
            if failure is not None:
                raise failure
            if outputs is not None:
                async for output in outputs:
                    send(output)
        except asyncio.CancelledError:  # the server stops: the engine records the run stopped
            self._add(("stopped", StoppedEvent(reason=STOPPING)))
            ending = self._stopped
            raise
        except Exception as e:  # the engine stopped the run (aborted), or the store failed
            error = one_line(e)
            self._add(("error", ErrorEvent(error=error)))
        finally:
            try:
                end = ending(answer, error)
            except Exception as e:  # the log cannot be read now: say what the drive saw
                end = EndEvent(
                    thread_id=self.thread_id,
                    run_id=self.run_id,
                    status="unknown",
                    answer=answer,
                    error=error or one_line(e),
                )
            self._add(("end", end))
            self.ended = True

    def ended_with(self, events: Sequence[Event]) -> Drive:
        """This drive, ended after `events` (its `end` last), without driving anything: how
        a turn driven elsewhere stands."""
        self.events.extend(events)
        self.ended = True
        return self

    def _stopped(self, answer: str | None, error: str | None) -> EndEvent:
        """The end of a drive the server stopped (as the engine records it, cancelled)."""
        return EndEvent(thread_id=self.thread_id, run_id=self.run_id, status="stopped")

    @property
    def status(self) -> str | None:
        """The run's status its `end` event gave (None before it)."""
        name, payload = self.events[-1]
        return payload.status if isinstance(payload, EndEvent) else None

    def _add(self, event: Event) -> None:
        self.events.append(event)
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def follow(self, after: int = 0) -> AsyncIterator[tuple[int, Event]]:
        """The events after the first `after`, numbered from 1, as they come, to the `end`."""
        n = max(after, 0)
        while True:
            while n < len(self.events):
                n += 1
                yield n, self.events[n - 1]
            if self.ended:
                return
            await self._changed.wait()

    async def wait(self) -> None:
        """Until the drive has sent its `end` (cancelled too)."""
        if self._task is not None:
            await asyncio.wait([self._task])

    def cancel(self) -> None:
        """Stop driving (the server stops): the run is left stopped, resumable."""
        if self._task is not None and not self._task.done():
            self._task.cancel()

    def __repr__(self) -> str:
        state = "ended" if self.ended else "driving"
        return f"Drive({self.run_id!r}, {state}, events={len(self.events)})"
