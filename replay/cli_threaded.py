"""`agentsm show`, `replay` and `branch` with `--thread` (a conversation instead of one run):
the commands of `cli_inspect` and `cli_change`, given their thread options when first loaded."""

from __future__ import annotations

from .cli_change import branch, replay
from .cli_inspect import show
from .cli_threads import add_thread_options

__all__ = ["branch", "replay", "show"]

add_thread_options(show, replay, branch)
