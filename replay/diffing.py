"""Where two runs part (a run and its branch, or two runs of one task), and how they end."""

from __future__ import annotations

from dataclasses import dataclass

from agentsm import AgentMemory
from agentsm.facts import RunBranched
from agentsm.memory import fold_with_state
from eventstore import EventStore

from .recording import Recording
from .report import Divergence, first_divergence

__all__ = ["RunDiff", "diff_runs"]


@dataclass(frozen=True)
class RunSummary:
    """How a run ended: state, status, answer or error, steps and tokens."""

    run_id: str
    state: str
    status: str
    answer: str | None
    error: str | None
    steps: int
    tokens: int
    facts: int

    def field(self, label: str) -> object:
        """One outcome, by name (`answer` is the answer, or else the error)."""
        if label == "answer":
            return self.answer or self.error or "-"
        return getattr(self, label)

    @classmethod
    def of(cls, recording: Recording) -> RunSummary:
        memory: AgentMemory
        memory, state = fold_with_state(e.fact for e in recording.entries)
        return cls(
            recording.run_id,
            str(state),
            recording.run.status,
            memory.final_answer,
            memory.error,
            memory.step,
            memory.total_usage.total_tokens,
            len(recording.entries),
        )


@dataclass(frozen=True)
class RunDiff:
    """Two runs compared: their first differing fact and their outcomes side by side."""

    a: RunSummary
    b: RunSummary
    divergence: Divergence | None
    relation: str

    def __str__(self) -> str:
        lines = [f"A {self.a.run_id}  B {self.b.run_id}  ({self.relation})"]
        if self.divergence is None:
            lines.append("facts: identical")
        else:
            lines.append(
                f"facts: same up to seq {self.divergence.seq - 1}; first difference at "
                f"seq {self.divergence.seq}"
            )
            exp, act = self.divergence.expected, self.divergence.actual
            lines.append(f"  A: {exp.event + ' ' + exp.data if exp else '(ends)'}")
            lines.append(f"  B: {act.event + ' ' + act.data if act else '(ends)'}")
        for label in ("state", "status", "steps", "tokens", "facts", "answer"):
            va, vb = self.a.field(label), self.b.field(label)
            mark = "" if va == vb else "  *"
            lines.append(
                f"{label:<7} A: {va}\n{'':<7} B: {vb}{mark}"
                if label == "answer"
                else f"{label:<7} A: {va:<12} B: {vb}{mark}"
            )
        return "\n".join(lines)


def diff_runs(store: EventStore, run_a: str, run_b: str) -> RunDiff:
    """Compare two runs fact by fact (envelopes aside) and by outcome."""
    a, b = Recording.load(store, run_a), Recording.load(store, run_b)
    if b.run.parent_id == a.run_id:
        relation = f"B branched from A at seq {b.run.branch_seq}"
    elif a.run.parent_id == b.run_id:
        relation = f"A branched from B at seq {a.run.branch_seq}"
    elif a.run.parent_id and a.run.parent_id == b.run.parent_id:
        relation = f"siblings, both branched from {a.run.parent_id}"
    elif a.run_id == b.run_id:
        relation = "one run compared with itself"
    else:
        relation = "unrelated runs" if a.run.task != b.run.task else "two runs of the same task"
    own = [e for e in a.entries if not isinstance(e.fact, RunBranched)]
    other = [e for e in b.entries if not isinstance(e.fact, RunBranched)]
    return RunDiff(RunSummary.of(a), RunSummary.of(b), first_divergence(own, other), relation)
