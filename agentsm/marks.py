"""Marks a run carries in its catalog entry's `info`, read without loading a fact: which
sub-agent call started it (`info["subagent"]`, written by `agentsm.subagent`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Protocol

    class Marked(Protocol):
        """A catalog entry (`eventstore.RunRecord`, or a listing's lighter `ListedRun`)."""

        @property
        def info(self) -> Mapping[str, Any]: ...
        @property
        def parent_id(self) -> str | None: ...


__all__ = ["subagent_of"]


def subagent_of(record: Marked) -> str | None:
    """The sub-agent tool whose call started this run, when the run is the sub-agent run of
    its catalog parent; None for any other run (a branch, a root). A branch of a sub-agent run
    copies the catalog info of its parent, so the mark counts only where its parent matches."""
    mark = record.info.get("subagent") if record.info else None
    if isinstance(mark, dict) and record.parent_id and mark.get("parent") == record.parent_id:
        return str(mark.get("tool") or "?")
    return None
