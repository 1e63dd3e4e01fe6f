"""`agentsm show`, `replay` and `branch` with `--thread` (a conversation instead of one run):
the commands of `inspect` and `change`, given their thread options when first loaded."""

from __future__ import annotations

from .change import branch, replay
from .inspect import show
from .threads import add_thread_options

__all__ = ["branch", "replay", "show"]

add_thread_options(show, replay, branch)
