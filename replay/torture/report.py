"""What a trial found: the invariants it checks, each one broken, and its figures."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from .options import Options

INVARIANTS = {
    "done": "every run ends done",
    "stranded": "no run left running with no lease (no worker can take it)",
    "lost_fact": "no fact lost (chain verifies, log folds to Done, reported ends are logged)",
    "late_write": "no fact written by a driver that had lost the run",
    "fault_abort": "no run aborted or set aside because of a store fault",
    "effect_once": "each write took effect once (ledger), never twice",
    "worker_exit": "no worker exits on its own",
    "replay": "every finished run replays identical",
}


@dataclass(frozen=True)
class Violation:
    """One invariant broken: which (a key of INVARIANTS), where (a run id, or a worker's pid)
    and what the log, the catalog or the ledger showed."""

    invariant: str
    run_id: str
    detail: str

    def __str__(self) -> str:
        return f"[{self.invariant}] {self.run_id}: {self.detail}"


@dataclass(repr=False)
class Report:
    """A trial's figures, its timeline (`log`: faults, resumptions, drain) and violations."""

    options: Options
    where: str = ""
    statuses: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    facts: int = 0
    replays: int = 0
    decisions: int = 0
    violations: list[Violation] = field(default_factory=list)
    wall: float = 0.0
    log: list[str] = field(default_factory=list)
    began: float = field(default_factory=time.monotonic)
    """When the workers were started: the origin of the fault times and of the log."""

    def __repr__(self) -> str:
        o = self.options
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(self.statuses.items())) or "unchecked"
        return (
            f"<Report {o.db} seed={o.seed} runs={o.runs} ({statuses}) "
            f"faults={sum(self.faults.values())} violations={len(self.violations)} "
            f"wall={self.wall:.1f}s>"
        )

    def note(self, text: str) -> None:
        """Add a line to the timeline, stamped with the time since the workers started."""
        self.log.append(f"t={time.monotonic() - self.began:6.2f}s {text}")

    def table(self) -> str:
        """The figures and the count of violations of each invariant, one per line."""
        o = self.options
        rows = [
            ("backend", f"{o.db} ({self.where})"),
            ("seed / lease", f"{o.seed} / {o.lease:g} s"),
            (
                "runs",
                f"{o.runs} ({', '.join(f'{k} {v}' for k, v in sorted(self.statuses.items()))})",
            ),
            ("workers", str(o.workers)),
            *((f"faults: {k}", str(v)) for k, v in sorted(self.faults.items())),
            ("human decisions", str(self.decisions)),
            ("facts checked", str(self.facts)),
            ("replays", str(self.replays)),
            ("wall time", f"{self.wall:.1f} s"),
        ]
        found = Counter(v.invariant for v in self.violations)
        rows += [(f"violations: {k}", str(found[k])) for k in INVARIANTS]
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)
