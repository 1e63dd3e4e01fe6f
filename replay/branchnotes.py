"""What a branch's own log says about the changes it was asked for: a change that nothing after
the branch point used leaves the branch a copy of its parent, an answer given may be refused,
a branch point may move; the user is told so."""

from __future__ import annotations

from collections.abc import Sequence

from agentsm import facts as f
from agentsm.trace import TraceEntry

__all__ = ["UnusedChange", "moved_point", "refused_answers", "unused_changes"]


class UnusedChange(UserWarning):
    """A branch's requested change was never used: nothing after the branch point asked for
    it (or it went where it was not meant to go)."""


def _after(entries: Sequence[TraceEntry]) -> list[TraceEntry]:
    marks = [i for i, e in enumerate(entries) if isinstance(e.fact, f.RunBranched)]
    return list(entries[marks[-1] + 1 :]) if marks else []


def unused_changes(run_id: str, entries: Sequence[TraceEntry], changes: Sequence[str]) -> list[str]:
    """One sentence per requested change the branch `run_id` never used, from its facts."""
    after = _after(entries)
    point = next((e.seq for e in reversed(entries) if isinstance(e.fact, f.RunBranched)), 0)
    llm = [e.fact for e in after if isinstance(e.fact, f.LlmResponded | f.LlmFailed)]
    notes = []
    if "llm_response" in changes:
        if not llm:
            notes.append(
                f"Branch {run_id} made no LLM call after the branch point (seq {point}): the "
                "answer given was never used and the branch repeats its parent; branch at an "
                "earlier seq, before the LLM call whose answer you want to change."
            )
        elif llm[0].purpose == "reflect":
            notes.append(
                f"Branch {run_id}: the first LLM call after the branch point (seq {point}) was a "
                "reflection, so the answer given became the history summary, not the agent's "
                "next answer; branch after that reflection to change the next answer."
            )
    if "llm" in changes and not llm:
        notes.append(
            f"Branch {run_id} made no LLM call after the branch point (seq {point}): the LLM "
            "given was never asked; branch at an earlier seq."
        )
    if "tool_result" in changes and not any(isinstance(e.fact, f.ToolExecuted) for e in after):
        notes.append(
            f"Branch {run_id} ran no tool after the branch point (seq {point}): the tool result "
            "given was never used; branch before the tool call whose result you want to change."
        )
    return notes


def refused_answers(entries: Sequence[TraceEntry]) -> list[str]:
    """One sentence per answer the branch refused after its point (too short, ...), and why."""
    return [
        f"the answer at seq {e.seq} was refused ({e.fact.reason}): {e.fact.content[:60]!r}"
        for e in _after(entries)
        if isinstance(e.fact, f.AnswerRejected)
    ]


def moved_point(at: int, point: int) -> str:
    """Why a branch asked for at seq `at` starts after seq `point` instead."""
    return (
        f"seq {at} asked for: a branch starts after a complete transition, and seq {point} "
        "is the last one at or before it"
    )
