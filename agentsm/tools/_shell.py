"""Running one shell command for the workspace's `shell` tool: a timeout, a minimal
environment, no input, and outputs kept to a size (their start and their end).

The outputs go to temporary files, not to memory, so a command that prints gigabytes costs
disk for a moment and never the process's memory; only the kept bytes are read back.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

__all__ = ["CommandResult", "run_command", "shell_environment"]

SHELL = "/bin/sh"


def shell_environment(root: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whole environment a command gets: `PATH` (this process's), `HOME` (the workspace),
    `LANG=C.UTF-8`, `TERM=dumb`, `NO_COLOR=1`, `PAGER=cat`, then `extra`. Nothing else of this
    process's environment (API keys included) reaches the command."""
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(root),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "PAGER": "cat",
    }
    env.update(extra or {})
    return env


@dataclass(frozen=True)
class CommandResult:
    """What a command did: its exit code (None when it was stopped at its timeout) and its
    outputs, each already cut to the limit with a note saying how much was cut."""

    exit_code: int | None
    stdout: str
    stderr: str


def _kept(stream: IO[bytes], limit: int, name: str) -> str:
    size = stream.seek(0, os.SEEK_END)
    stream.seek(0)
    if size <= limit:
        return stream.read().decode("utf-8", errors="replace")
    head = stream.read(limit // 2).decode("utf-8", errors="replace")
    stream.seek(size - (limit - limit // 2))
    tail = stream.read().decode("utf-8", errors="replace")
    note = (
        f"\n[... {size - limit:,} bytes of {name} cut: it was {size:,} bytes and shell keeps "
        f"{limit:,}, its start and its end; redirect to a file and search it to see more ...]\n"
    )
    return head + note + tail


def _stop_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone already


def run_command(
    command: str, *, cwd: Path, env: Mapping[str, str], timeout: float, limit: int
) -> CommandResult:
    """Run `command` with `/bin/sh -c` in `cwd`, stdin empty, in a process group of its own;
    at `timeout` seconds the whole group is killed. Processes the command left running in the
    background are killed when it returns, so nothing outlives the call."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(
            [SHELL, "-c", command],
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        try:
            code: int | None = process.wait(timeout)
        except subprocess.TimeoutExpired:
            code = None
        _stop_group(process.pid)
        process.wait()
        return CommandResult(code, _kept(out, limit, "stdout"), _kept(err, limit, "stderr"))
