"""The process that drives a run: host, pid and start time, and whether it is still alive."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import RunInUse

__all__ = ["CLAIM_ORDER", "RELEASED", "Driver", "hands_back", "refuse_live_driver"]

RELEASED = (
    "driver_host = NULL, driver_pid = NULL, driver_started = NULL, driver_token = NULL, "
    "lease_until = NULL"
)
"""The catalog columns that name a run's driver, cleared (SQL for an UPDATE's SET)."""

CLAIM_ORDER = "CASE status WHEN 'running' THEN 0 WHEN 'ready' THEN 1 ELSE 2 END, updated_at, run_id"
"""The order in which workers take runs (SQL for an ORDER BY): orphaned runs first (their work
was under way), then runs a human has answered, then queued ones; the oldest first in each."""


def hands_back(status: str | None) -> bool:
    """Whether an append with this status hands the run back (waiting, ready, done, failed,
    stopped, aborted): the append then releases the run in the same statement, so that the
    catalog never shows a run that waits for a human as still driven."""
    return status is not None and status != "running"


def _start_time(pid: int) -> str | None:
    """When process `pid` started, as an opaque token (boot id and start tick), or None when
    there is no such process (or it is a zombie) or the system cannot tell."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ", which may hold spaces
    if fields[0] in ("Z", "X"):  # state: zombie or dead, the process has exited
        return None
    return f"{boot}:{fields[19]}"  # field 22 of proc(5): start time in clock ticks since boot


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


@dataclass(frozen=True, slots=True)
class Driver:
    """A process driving a run. Its start time tells it apart from a later process that reuses
    the pid; an empty `started` means the system could not say."""

    host: str
    pid: int
    started: str = ""

    @classmethod
    def current(cls) -> Driver:
        """This process."""
        return cls(_hostname(), os.getpid(), _start_time(os.getpid()) or "")

    def alive(self) -> bool | None:
        """Whether the process still runs: None when it is on another host (then only its
        lease can tell)."""
        if self.host != _hostname():
            return None
        if not _pid_exists(self.pid):
            return False
        now = _start_time(self.pid)
        if now is None:  # a zombie (its /proc entry stays), or a system without /proc
            return not Path("/proc").is_dir()
        return not self.started or now == self.started

    def __str__(self) -> str:
        return f"pid {self.pid} on host {self.host}"


def refuse_live_driver(
    run_id: str, row: tuple[Any, ...], mine: str | None, *, force: bool, now: float
) -> None:
    """Raise `RunInUse` when the catalog row `(driver_token, driver_host, driver_pid,
    driver_started, lease_until)` names another driver that is alive (same host: its pid runs
    with the same start time; other host: its lease has not expired), unless `force`."""
    held, host, pid, started, until = row
    if held is None or held == mine or force:
        return
    holder = Driver(host, pid, started or "")
    alive = holder.alive()
    if alive or (alive is None and (until or 0) > now):
        raise RunInUse(
            run_id,
            holder,
            f"Run {run_id!r} is being driven by {holder}; it is not resumed under it. Wait for "
            "it to end, stop that process, or force the takeover (--force) if you know it is "
            "stuck.",
        )


def _hostname() -> str:
    """This machine's name (socket loads when a driver is looked at, not with every listing)."""
    import socket

    return socket.gethostname()
