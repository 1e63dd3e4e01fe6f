"""Workspace tools: files and a shell for an agent, confined to one directory.

    agent = AgentBuilder("Fix the failing test").llm(llm).workspace("./project")

gives the LLM `read_file`, `write_file`, `edit_file`, `list_files`, `search_files` and `shell`.
Every path is resolved (symbolic links followed) and must stay inside the workspace; one that
leaves it (`..`, an absolute path elsewhere, a link pointing out) is refused as a failed result
the LLM reads, never an exception. Reads are idempotent; writes and `shell` are not, and the
builder has them wait for a human's approval unless told otherwise. Binary files and files over
the limits are refused, long results cut, each with a note saying the size and the limit.

The confinement is the file tools': `shell` runs in the workspace with a minimal environment
(`shell_environment`) but is no sandbox (a command can reach whatever its user can), which is
why it asks first by default. Like any tool's, every result is recorded, so a run replays,
branches and time-travels with the workspace gone.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import BuildError
from . import _files
from ._files import Refused
from ._shell import run_command, shell_environment
from .registry import Tool, ToolOutcome

__all__ = ["Workspace", "WorkspaceLimits", "shell_environment"]


@dataclass(frozen=True)
class WorkspaceLimits:
    """How much the workspace tools read, list, search and keep (sizes in bytes)."""

    read_bytes: int = 100_000
    """The most `read_file` returns at once; a longer file says where to read on."""
    file_bytes: int = 10_000_000
    """Larger files are refused by `read_file` and `edit_file` and skipped by `search_files`."""
    list_entries: int = 500
    """The most entries `list_files` shows."""
    search_files: int = 5_000
    """The most files `search_files` opens."""
    search_matches: int = 100
    """The most matching lines `search_files` returns."""
    output_bytes: int = 20_000
    """What `search_files` returns in all, and `shell` of each of stdout and stderr."""
    shell_timeout: float = 30.0
    """Seconds before a command's processes are killed."""

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise BuildError(
                    f"WorkspaceLimits.{name} must be a positive number, not {value!r}."
                )


_PATH = {
    "type": "string",
    "description": "A path relative to the workspace root, such as 'src/app.py'.",
}


@dataclass(frozen=True)
class Workspace:
    """A directory the tools are confined to, with its limits and the shell's environment.

    `path` need not exist when the agent is built (so a run replays without it); a call made
    while it is missing fails with a result saying so. `shell=False` leaves the shell tool out;
    `env` adds variables to the shell's minimal environment; `prefix` goes before every tool
    name (two workspaces in one agent)."""

    path: Path
    shell: bool = True
    env: Mapping[str, str] = field(default_factory=dict)
    limits: WorkspaceLimits = field(default_factory=WorkspaceLimits)
    prefix: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.path, str | os.PathLike) or not str(self.path).strip():
            raise BuildError(f"A workspace needs a directory path, not {self.path!r}.")
        # absolute now: a later chdir must not move the workspace
        object.__setattr__(self, "path", Path(os.path.abspath(self.path)))
        if not isinstance(self.limits, WorkspaceLimits):
            raise BuildError(f"limits= takes a WorkspaceLimits, not {self.limits!r}.")
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in self.env.items()):
            raise BuildError("The shell's env= maps variable names to string values.")

    @property
    def writing_tools(self) -> list[str]:
        """The names of the tools that change files: `write_file`, `edit_file`."""
        return [self.prefix + "write_file", self.prefix + "edit_file"]

    @property
    def shell_tool(self) -> str | None:
        """The name of the shell tool, None when it is left out."""
        return self.prefix + "shell" if self.shell else None

    def root(self) -> Path:
        """The workspace directory, resolved; refused as data when it does not exist."""
        root = Path(os.path.realpath(self.path))
        if not root.is_dir():
            raise Refused(
                "WorkspaceMissing",
                f"the workspace directory {self.path.name!r} does not exist; no file can be "
                "read or written and no command run until it is created.",
            )
        return root

    def tools(self) -> list[Tool]:
        """The tools, ready to register: reads first, then writes, then the shell."""
        made = [
            self._tool("read_file", _files.read_file, _READ, idempotent=True),
            self._tool("list_files", _files.list_files, _LIST, idempotent=True),
            self._tool("search_files", _files.search_files, _SEARCH, idempotent=True),
            self._tool("write_file", _files.write_file, _WRITE),
            self._tool("edit_file", _files.edit_file, _EDIT),
        ]
        if self.shell:
            made.append(
                self._tool("shell", _shell_call, _SHELL, timeout=self.limits.shell_timeout + 10)
            )
        return made

    def _tool(
        self,
        name: str,
        func: Callable[[Workspace, dict[str, Any]], str | ToolOutcome],
        spec: tuple[str, dict[str, Any]],
        *,
        idempotent: bool = False,
        timeout: float | None = None,
    ) -> Tool:
        description, properties = spec
        required = [k for k, v in properties.items() if "default" not in v]
        schema = {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        }

        defaults = {k: v["default"] for k, v in properties.items() if "default" in v}

        def run(args: dict[str, Any]) -> str | ToolOutcome:
            try:
                return func(self, {**defaults, **args})
            except Refused as r:
                return ToolOutcome.failed(r.kind, r.message)
            except OSError as e:  # said without the absolute path, which the LLM cannot use
                where = args.get("path", ".")
                return ToolOutcome.failed(type(e).__name__, f"{e.strerror or e}: {where!r}")

        text = description.format(limits=self.limits)
        return Tool(self.prefix + name, text, schema, run, idempotent=idempotent, timeout=timeout)

    def __repr__(self) -> str:
        shell = "" if self.shell else ", shell=False"
        return f"Workspace({str(self.path)!r}{shell})"


def _shell_call(ws: Workspace, args: dict[str, Any]) -> str | ToolOutcome:
    command = args["command"]
    if not command.strip():
        raise Refused("InvalidArguments", "command is empty; give the command line to run.")
    root = ws.root()
    limits = ws.limits
    env = shell_environment(root, ws.env)
    done = run_command(
        command, cwd=root, env=env, timeout=limits.shell_timeout, limit=limits.output_bytes
    )
    parts = [
        f"--- stdout ---\n{done.stdout}" if done.stdout else "",
        f"--- stderr ---\n{done.stderr}" if done.stderr else "",
    ]
    output = "\n".join(p for p in parts if p) or "(no output)"
    if done.exit_code is None:
        return ToolOutcome.failed(
            "CommandTimedOut",
            f"the command did not finish in {limits.shell_timeout:g} seconds and was killed "
            f"with every process it started. Output so far:\n{output}",
        )
    return f"exit code {done.exit_code}\n{output}"


_READ = (
    "Read a UTF-8 text file of the workspace. Returns its text from line `offset` (1-based), "
    "at most `limit` lines and at most {limits.read_bytes:,} bytes at once; a file that goes "
    "on ends with a note giving the offset to read on from. Binary files and files over "
    "{limits.file_bytes:,} bytes are refused.",
    {
        "path": _PATH,
        "offset": {
            "type": "integer",
            "minimum": 1,
            "default": 1,
            "description": "The first line to return (1-based).",
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "default": 2000,
            "description": "The most lines to return.",
        },
    },
)
_WRITE = (
    "Create a text file in the workspace, or replace all of one, with `content` (UTF-8); "
    "missing parent directories are created. To change part of a file, use edit_file.",
    {
        "path": _PATH,
        "content": {"type": "string", "description": "The whole new text of the file."},
    },
)
_EDIT = (
    "Replace exact text in a workspace file. `old_text` must occur exactly once, with its "
    "indentation and line breaks (copy it from read_file), unless replace_all is true. When it "
    "occurs nowhere or several times nothing is changed and the result says where it looked "
    "and what it found.",
    {
        "path": _PATH,
        "old_text": {"type": "string", "description": "The exact text to replace."},
        "new_text": {"type": "string", "description": "The text to put in its place."},
        "replace_all": {
            "type": "boolean",
            "default": False,
            "description": "Replace every occurrence instead of exactly one.",
        },
    },
)
_LIST = (
    "List a directory of the workspace (default: its root). Directories end with '/', files "
    "show their size in bytes, symbolic links their target. With recursive, everything below "
    "it (not inside .git, node_modules, __pycache__ or .venv); at most "
    "{limits.list_entries:,} entries.",
    {
        "path": {**_PATH, "default": "."},
        "recursive": {
            "type": "boolean",
            "default": False,
            "description": "List subdirectories' contents too.",
        },
    },
)
_SEARCH = (
    "Search the workspace's text files, line by line, for a Python regular expression; "
    "returns `path:line: text` for each matching line. `path` narrows the search to a file "
    "or directory, `glob` to file names such as '*.py'. At most {limits.search_matches:,} "
    "matches, {limits.search_files:,} files searched and {limits.output_bytes:,} bytes; "
    "binary files, symbolic links and files over {limits.file_bytes:,} bytes are skipped.",
    {
        "pattern": {"type": "string", "description": "A Python regular expression."},
        "path": {**_PATH, "default": "."},
        "glob": {
            "type": "string",
            "default": "",
            "description": "Only files whose name or path matches, such as '*.py'.",
        },
        "ignore_case": {
            "type": "boolean",
            "default": False,
            "description": "Match regardless of case.",
        },
    },
)
_SHELL = (
    "Run a command with /bin/sh -c in the workspace directory and return its exit code, "
    "stdout and stderr. It is killed after {limits.shell_timeout:g} seconds; each output "
    "keeps at most {limits.output_bytes:,} bytes (its start and its end). It gets no input, "
    "and a minimal environment: PATH, HOME (the workspace), LANG, TERM.",
    {"command": {"type": "string", "description": "The command line, such as 'pytest -q'."}},
)
