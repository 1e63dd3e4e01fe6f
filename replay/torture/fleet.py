"""The worker processes of a trial, one per slot, each writing its output to its own log."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

from .report import Report, Violation

_RESULT = re.compile(r"^(\S+) \((\w+)\) -> (\w+)")


class Fleet:
    """The worker processes, one per slot; a slot whose process dies is given a new one."""

    def __init__(self, command: list[str], env: dict[str, str], logs: Path, size: int) -> None:
        self.command, self.env, self.logs = command, env, logs
        self.every: list[subprocess.Popen[bytes]] = []
        self.ended_by_us: set[int] = set()
        self.slots = [self._start() for _ in range(size)]

    def __repr__(self) -> str:
        return (
            f"<Fleet pids {[p.pid for p in self.slots]}: {len(self.every)} started, "
            f"{len(self.ended_by_us)} ended by the harness, logs in {str(self.logs)!r}>"
        )

    def _start(self) -> subprocess.Popen[bytes]:
        with (self.logs / f"worker-{len(self.every)}.log").open("ab") as out:
            process = subprocess.Popen(self.command, env=self.env, stdout=out, stderr=out)
        self.every.append(process)
        return process

    def kill(self, slot: int) -> int:
        """SIGKILL the worker of `slot` and start another in its place; the victim's pid."""
        victim = self.slots[slot]
        self.ended_by_us.add(victim.pid)
        victim.kill()
        victim.wait(timeout=60)
        self.slots[slot] = self._start()
        return victim.pid

    def exited(self) -> list[tuple[int, int | None, str]]:
        """Workers that exited without being told to (pid, code, last output), replaced."""
        gone = []
        for slot, process in enumerate(self.slots):
            if process.poll() is not None and process.pid not in self.ended_by_us:
                self.ended_by_us.add(process.pid)
                log = (self.logs / f"worker-{self.every.index(process)}.log").read_text(
                    "utf-8", "replace"
                )
                said = [line for line in log.splitlines() if not line.startswith("discarding")]
                gone.append((process.pid, process.returncode, " | ".join(said[-2:])))
                self.slots[slot] = self._start()
        return gone

    def shut_down(self) -> None:
        """Wake and terminate every worker still alive (kill those that do not end)."""
        for process in self.every:
            if process.poll() is None:
                self.ended_by_us.add(process.pid)
                process.send_signal(signal.SIGCONT)
                process.terminate()
        for process in self.every:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=60)

    def reports(self) -> list[tuple[int, str, str, str]]:
        """What the workers printed: (pid, run id, how claimed, outcome) per run driven."""
        found = []
        for n, process in enumerate(self.every):
            for line in (self.logs / f"worker-{n}.log").read_text("utf-8", "replace").splitlines():
                if m := _RESULT.match(line):
                    found.append((process.pid, m[1], m[2], m[3]))
        return found


def note_exits(fleet: Fleet, report: Report) -> None:
    """Replace the workers that exited on their own, each a `worker_exit` violation."""
    for pid, code, last in fleet.exited():
        report.note(f"{'exit':<12} pid {pid} exited by itself ({code}); replaced")
        report.violations.append(
            Violation("worker_exit", f"pid {pid}", f"exited with status {code}: {last}")
        )
