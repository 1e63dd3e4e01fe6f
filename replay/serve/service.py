"""What `agentsm serve` does for each request: threads read from the log, turns run with the
user's agent through `Thread.stream` (recorded exactly as `thread.send` records them), and
what people send a turn (answers, decisions, steering, stops) through the functions the CLI
uses, so that the log cannot tell where anything came from."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Literal

from agentsm import AgentError, Thread, ThreadBusy
from agentsm.images import Image
from agentsm.inbox import send_stop
from agentsm.outputs import AgentOutput, ApprovalNeeded
from agentsm.threads import ENDED, ThreadSummary, thread_runs, threads
from agentsm.types import ApprovalRequest
from eventstore import EventStore, RunRecord

from ..opening import open_store
from ..outside import answer, request_stop, steer
from ..resuming import decide, pending_requests
from ..source import Builder
from .drives import Drive, one_line
from .events import EndEvent
from .models import Steered, Stopped, ThreadDetail, ThreadInfo, TurnInfo
from .views import (
    empty_thread,
    standing_events,
    thread_detail,
    thread_info,
    thread_of,
    turn_info,
    turn_of,
)

__all__ = ["Refused", "Service", "ThreadNotFound"]


class ThreadNotFound(LookupError):
    """No thread (or no turn) of that id, in the log or started here: a 404."""


class Refused(Exception):
    """The thread cannot take that now (its turn runs, waits, or has ended): a 409, whose
    message says what to do instead."""


class Service:
    """The conversations `agentsm serve` serves: the log at `db` (a path or a PostgreSQL URL,
    created if missing) and the user's agent, `builder(task)` (as `agentsm chat --builder`
    takes it). Turns are driven here, in tasks of the server's event loop; `keep` finished
    drives are kept so that a client that left can read their events again."""

    def __init__(self, db: str | Path, builder: Builder, *, keep: int = 100) -> None:
        self.db = str(db)
        self.builder = builder
        self.keep = keep
        self.store: EventStore = open_store(db, create=True)
        """Reads, and what people send a turn: a store apart from the one that drives the
        turns, so that a stop sent here reaches a turn driven here as it would from afar."""
        try:
            self._driving: EventStore = open_store(db)
        except BaseException:
            self.store.close()
            raise
        self.started: dict[str, float] = {}
        """Threads started here that have no turn yet (nothing of them is in the log)."""
        self.drives: OrderedDict[str, Drive] = OrderedDict()
        """The last drive of each run driven here, by run id, the latest last."""

    # -- reading -------------------------------------------------------------------------

    def threads(self, limit: int = 50) -> list[ThreadInfo]:
        """The threads, the last updated first (those started here with no turn yet first)."""
        found = [self._info(t) for t in reversed(threads(self.store))]
        fresh = [
            self._empty(thread_id)
            for thread_id in sorted(self.started, key=self.started.__getitem__, reverse=True)
            if not any(t.thread_id == thread_id for t in found)
        ]
        listed = fresh + found
        return listed[:limit] if limit else listed

    def thread(self, thread_id: str) -> ThreadDetail:
        """A thread: its turns, the conversation, what its last turn waits for."""
        turns = self._turns(thread_id)
        if not turns:
            return thread_detail(self.store, self._empty(thread_id), [], [])
        summary = next(t for t in threads(self.store) if t.thread_id == thread_id)
        last = turns[-1]
        waiting = pending_requests(self.store, last.run_id) if last.status == "waiting" else []
        return thread_detail(self.store, self._info(summary), turns, waiting)

    def turn(self, thread_id: str, run_id: str) -> TurnInfo:
        """One turn of a thread."""
        return turn_info(self._run_of(thread_id, run_id))

    def drive_of(self, thread_id: str, run_id: str) -> Drive:
        """The last drive of a turn here, under way, or ended as the turn stands now; for a
        turn not driven here (or changed since: answered, stopped...), how it stands, as a
        drive that has ended (what it waits for, and `end`)."""
        record = self._run_of(thread_id, run_id)
        drive = self.drives.get(run_id)
        if drive is not None and (not drive.ended or drive.status == record.shown_status):
            return drive
        return self._standing(thread_id, record)  # not driven here, or changed since

    # -- starting ------------------------------------------------------------------------

    def start(self, thread_id: str | None) -> ThreadInfo:
        """A new thread (of that id, or a new one); nothing is recorded until its first
        message."""
        if thread_id is None:
            thread_id = Thread.of(self.builder, self.store).id
        elif thread_runs(self.store, thread_id) or thread_id in self.started:
            raise Refused(
                f"Thread {thread_id} exists already; post its next message to "
                f"/threads/{thread_id}/messages, or start a thread with another id."
            )
        self.started[thread_id] = time.time()
        return self._empty(thread_id)

    async def send(self, thread_id: str, text: str, images: Sequence[Image] = ()) -> Drive:
        """Run the thread's next turn with `text`: recorded here, driven in a task; its events
        come as they happen. Refused while the thread's last turn has not ended."""
        turns = self._turns(thread_id)
        if turns:
            self._refuse_unended(thread_id, turns[-1])
        thread = Thread.of(self.builder, self._driving, thread_id)
        before = len(thread.runs)
        outputs = thread.stream(text, images=list(images) or None)
        first: list[AgentOutput] = []
        failure: BaseException | None = None
        try:
            first.append(await anext(outputs))  # the turn is recorded (or refused) by then
        except StopAsyncIteration:
            pass
        except ThreadBusy as e:
            raise Refused(one_line(e)) from e
        except Exception as e:
            if len(thread.runs) == before:  # nothing recorded: the agent could not be built
                raise
            failure = e  # recorded, then stopped: the stream says why
        self.started.pop(thread_id, None)
        run_id = thread.runs[-1]
        live = None if failure is not None or not first else outputs
        return self._drive(thread_id, run_id, len(thread.runs), live, first, failure)

    async def answer(self, thread_id: str, text: str, call: str | None) -> Drive:
        """Answer the question the thread's last turn waits on (`replay.answer`); the turn
        goes on here once nothing else waits."""
        record = self._last(thread_id)
        self._refuse_driven(record)
        try:
            done = answer(self.store, record.run_id, text, call_id=call)
        except ValueError as e:
            raise Refused(one_line(e)) from e
        return self._go_on(thread_id, record, done.waiting)

    async def decide(
        self,
        thread_id: str,
        verdict: Literal["approved", "rejected", "modified"],
        *,
        call: str | None,
        args: dict[str, Any] | None,
        note: str,
    ) -> Drive:
        """Decide on the calls the thread's last turn waits on (`replay.decide`); the turn
        goes on here once nothing else waits."""
        record = self._last(thread_id)
        self._refuse_driven(record)
        if verdict == "modified" and args is None:
            raise Refused("A `modified` decision needs `args`: the call's new arguments.")
        try:
            decide(self.store, record.run_id, verdict, args=args, call_id=call, note=note)
        except ValueError as e:  # said for the command line: here, the endpoint to use
            said = one_line(e).replace(
                f"agentsm answer {record.run_id} TEXT", f"POST /threads/{thread_id}/answer"
            )
            raise Refused(said) from e
        return self._go_on(thread_id, record, pending_requests(self.store, record.run_id))

    async def resume(self, thread_id: str) -> Drive:
        """Continue the thread's last turn, stopped (or answered, or left by a process that
        died), here (as `agentsm resume` does)."""
        record = self._last(thread_id)
        self._refuse_driven(record)
        status = record.shown_status
        if status in ENDED:
            raise Refused(
                f"Thread {thread_id}'s last turn (run {record.run_id}) has ended ({status}); "
                f"post the next message to /threads/{thread_id}/messages."
            )
        if status == "waiting":
            raise Refused(
                f"Thread {thread_id}'s turn (run {record.run_id}) waits for a person: answer it "
                f"(/threads/{thread_id}/answer) or decide it (/threads/{thread_id}/decision)."
            )
        if status == "running":
            raise Refused(
                f"Thread {thread_id}'s turn (run {record.run_id}) is driven by another process; "
                "wait for its end (agentsm tail) or stop it."
            )
        return self._go_on(thread_id, record, [])

    # -- sending a turn under way ----------------------------------------------------------

    def steer(self, thread_id: str, text: str) -> Steered:
        """Send the thread's turn under way (or waiting) a message (`replay.steer`)."""
        record = self._last(thread_id)
        if record.status in ENDED:
            raise Refused(
                f"Thread {thread_id}'s last turn (run {record.run_id}) has ended "
                f"({record.status}): nothing is under way to steer; post the message as the "
                f"next turn (/threads/{thread_id}/messages)."
            )
        try:
            n = steer(self.store, record.run_id, text)
        except ValueError as e:
            raise Refused(one_line(e)) from e
        return Steered(thread_id=thread_id, run_id=record.run_id, message=n, status=record.status)

    def stop(self, thread_id: str, reason: str) -> Stopped:
        """Stop the thread's turn under way (`replay.request_stop`): at its next transition
        if it is driven, at once if nobody drives it."""
        record = self._last(thread_id)
        if record.status in ENDED:
            raise Refused(
                f"Thread {thread_id}'s last turn (run {record.run_id}) has ended "
                f"({record.status}); there is nothing to stop."
            )
        drive = self.drives.get(record.run_id)
        how: Literal["requested", "stopped"]
        if drive is not None and not drive.ended:  # driven here: heard at its next transition
            send_stop(self.store, record.run_id, reason)
            how = "requested"
        else:
            try:
                how = (
                    "stopped"
                    if request_stop(self.store, record.run_id, reason) == "stopped"
                    else "requested"
                )
            except ValueError as e:
                raise Refused(one_line(e)) from e
        return Stopped(thread_id=thread_id, run_id=record.run_id, stop=how)

    # -- the end ---------------------------------------------------------------------------

    async def wait(self) -> None:
        """Until every drive under way has ended."""
        for drive in list(self.drives.values()):
            await drive.wait()

    async def stop_drives(self) -> None:
        """Stop the drives under way (the server stops): each run is recorded stopped
        (resumable: `POST .../resume`, or `agentsm resume`), and its stream ends."""
        for drive in self.drives.values():
            drive.cancel()
        for drive in list(self.drives.values()):
            await drive.wait()

    async def aclose(self) -> None:
        """Stop the drives under way (`stop_drives`), then close the log."""
        await self.stop_drives()
        self.close()

    def close(self) -> None:
        """Close the log. A drive still under way is cancelled, but only `aclose` (in the
        event loop) waits for it to record its stop; here its run is left as it was, and
        resumed once this process has ended."""
        for drive in self.drives.values():
            drive.cancel()
        self._driving.close()
        self.store.close()

    def __enter__(self) -> Service:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Service:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        under_way = sum(not d.ended for d in self.drives.values())
        return f"Service(db={self.db!r}, driving={under_way})"

    # -- helpers -------------------------------------------------------------------------

    def _turns(self, thread_id: str) -> list[RunRecord]:
        """The thread's turns; `ThreadNotFound` unless it has some or was started here."""
        turns = thread_runs(self.store, thread_id)
        if not turns and thread_id not in self.started:
            raise ThreadNotFound(
                f"No thread {thread_id!r} in {self.db}; list the threads with GET /threads, or "
                "start one with POST /threads."
            )
        return turns

    def _last(self, thread_id: str) -> RunRecord:
        """The thread's last turn; a thread without one has nothing to act on."""
        turns = self._turns(thread_id)
        if not turns:
            raise Refused(
                f"Thread {thread_id} has no turn yet; post its first message to "
                f"/threads/{thread_id}/messages."
            )
        return turns[-1]

    def _run_of(self, thread_id: str, run_id: str) -> RunRecord:
        found = [r for r in self._turns(thread_id) if r.run_id == run_id]
        if not found:
            raise ThreadNotFound(
                f"Run {run_id!r} is no turn of thread {thread_id}; GET /threads/{thread_id} "
                "lists its turns."
            )
        return found[0]

    def _driven_here(self, run_id: str) -> bool:
        drive = self.drives.get(run_id)
        return drive is not None and not drive.ended

    def _refuse_driven(self, record: RunRecord) -> None:
        if self._driven_here(record.run_id):
            raise Refused(
                f"Run {record.run_id} is under way here; follow it "
                f"(GET /threads/{thread_of(record)}/runs/{record.run_id}/events), steer it or "
                "stop it."
            )

    def _refuse_unended(self, thread_id: str, last: RunRecord) -> None:
        """Refuse a message while the thread's last turn has not ended, saying what to do."""
        status = last.shown_status
        if status in ENDED:
            return
        where = f"/threads/{thread_id}"
        todo = {
            "waiting": f"it waits for a person: answer it ({where}/answer) or decide it "
            f"({where}/decision)",
            "stopped": f"it was stopped: resume it ({where}/resume)",
            "ready": f"it was answered and goes on when resumed ({where}/resume)",
            "interrupted": f"its process died: resume it ({where}/resume)",
        }.get(
            status,
            f"wait for its end event ({where}/runs/{last.run_id}/events) or stop it ({where}/stop)",
        )
        raise Refused(
            f"Thread {thread_id}'s turn {turn_of(last)} (run {last.run_id}) has not ended "
            f"(status {status}): {todo}; then post the message again."
        )

    def _go_on(
        self, thread_id: str, record: RunRecord, waiting: Sequence[ApprovalRequest]
    ) -> Drive:
        """Drive the turn on from its log, or, while something still waits, say what."""
        turn = turn_of(record)
        if waiting:
            asked = [ApprovalNeeded(tuple(waiting))]
            return self._drive(thread_id, record.run_id, turn, None, asked, None)
        try:  # the engine as `agentsm resume` makes it: the user's agent, attached to the run
            engine = self.builder(record.task).store(self._driving).attach(record.run_id)
        except (AgentError, ValueError) as e:
            return self._drive(thread_id, record.run_id, turn, None, [], e)
        return self._drive(thread_id, record.run_id, turn, engine.stream(), [], None)

    def _drive(
        self,
        thread_id: str,
        run_id: str,
        turn: int,
        outputs: AsyncIterator[AgentOutput] | None,
        first: Sequence[AgentOutput],
        failure: BaseException | None,
    ) -> Drive:
        def ending(answer: str | None, error: str | None) -> EndEvent:
            record = self.store.run(run_id)
            status = record.shown_status
            if status in ("failed", "aborted") and error is None:
                error = record.summary.error
            return EndEvent(
                thread_id=thread_id, run_id=run_id, status=status, answer=answer, error=error
            )

        drive = Drive(thread_id, run_id, turn)
        self.drives.pop(run_id, None)
        self.drives[run_id] = drive
        self._forget()
        return drive.start(outputs, ending, first=first, failure=failure)

    def _forget(self) -> None:
        """Keep at most `keep` ended drives (the oldest go first)."""
        ended = [run_id for run_id, d in self.drives.items() if d.ended]
        for run_id in ended[: max(0, len(ended) - self.keep)]:
            del self.drives[run_id]

    def _standing(self, thread_id: str, record: RunRecord) -> Drive:
        """How a turn not driven here stands, as a drive that has ended: what it waits for,
        then its `end`."""
        waiting = pending_requests(self.store, record.run_id) if record.status == "waiting" else []
        return Drive(thread_id, record.run_id, turn_of(record)).ended_with(
            standing_events(thread_id, record, waiting)
        )

    def _info(self, summary: ThreadSummary) -> ThreadInfo:
        return thread_info(summary, self._driven_here(summary.last.run_id))

    def _empty(self, thread_id: str) -> ThreadInfo:
        return empty_thread(thread_id, self.started.get(thread_id))
