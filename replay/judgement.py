"""A best-of-N judgement read back from its run: the candidates, the judge, the pick; and
what listings say of it (the pick marked)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentsm import facts as f
from agentsm.facts import Candidate
from agentsm.tables import Column, render_table
from eventstore import EventStore, RunRecord

from .errors import BestOfError
from .recording import Recording
from .source import StoreLike, opened

__all__ = [
    "CANDIDATE_COLUMNS",
    "BestOf",
    "family_notes",
    "judgement_lines",
    "judgements",
    "load_best_of",
]


@dataclass(frozen=True)
class BestOf:
    """A best-of-N judgement read from its run: the candidates (branch runs of `parent_id` at
    seq `at`) and how each ended, the judge, its prompt and answer (an LLM judge), its scores
    and reason, and the pick (`pick`, a candidate's index, None when there is none: no
    candidate finished, or the judge's choice was refused, see `refused`)."""

    judgement_id: str
    parent_id: str
    at: int
    task: str
    candidates: tuple[Candidate, ...]
    judge: str
    pick: int | None = None
    scores: tuple[float | None, ...] = ()
    reason: str = ""
    refused: str | None = None
    prompt: str | None = None
    judge_answer: str | None = None
    status: str = "done"

    @classmethod
    def of(cls, run_id: str, facts: Sequence[f.Fact], status: str = "") -> BestOf:
        """The judgement whose facts these are (its run's, in order)."""
        start, gathered = facts[0], facts[1] if len(facts) > 1 else None
        if not isinstance(start, f.RunStarted) or not isinstance(gathered, f.CandidatesGathered):
            raise BestOfError(
                f"Run {run_id} is not a best-of judgement (it gathers no candidates); the "
                "judgements of a run are listed by replay.judgements(db, run_id)."
            )
        fields: dict[str, Any] = {}
        for x in facts[2:]:
            if isinstance(x, f.JudgeAsked):
                fields["prompt"] = x.prompt
            elif isinstance(x, f.JudgeAnswered):
                fields["judge_answer"] = x.response.content or ""
            elif isinstance(x, f.CandidatePicked):
                fields.update(pick=x.index, scores=x.scores, reason=x.reason)
            elif isinstance(x, f.PickRefused):
                fields["refused"] = x.message
        closed = isinstance(facts[-1], f.RunFinished)
        ended = "running" if not closed else "done" if "pick" in fields else "failed"
        return cls(
            run_id,
            gathered.parent_id,
            gathered.parent_seq,
            start.task,
            gathered.candidates,
            gathered.judge,
            status=status or ended,
            **fields,
        )

    @property
    def winner(self) -> Candidate | None:
        """The candidate picked, if any."""
        return self.candidates[self.pick] if self.pick is not None else None

    @property
    def answer(self) -> str | None:
        """The picked candidate's answer, if any."""
        winner = self.winner
        return winner.answer if winner is not None else None

    def score(self, index: int) -> float | None:
        """The judge's score of candidate `index` (None: it gave none)."""
        return self.scores[index] if index < len(self.scores) else None

    def rows(self) -> list[list[str]]:
        """One row per candidate: pick mark, index, run, label, model, status, score, answer
        or error (what `table` shows)."""
        rows = []
        for c in self.candidates:
            score = self.score(c.index)
            rows.append(
                [
                    "*" if c.index == self.pick else "",
                    str(c.index),
                    c.run_id,
                    c.label,
                    c.model,
                    c.status,
                    "" if score is None else f"{score:g}",
                    (c.answer or "") if c.finished else f"error: {c.error or c.status}",
                ]
            )
        return rows

    def table(self, width: int | None = None, *, styled: bool = False) -> str:
        """The candidates as a table, the pick marked with `*`."""
        return render_table(CANDIDATE_COLUMNS, self.rows(), width=width, styled=styled)

    def to_dict(self) -> dict[str, Any]:
        """The judgement as plain data (what `agentsm best-of --json` prints)."""
        return {
            "judgement_id": self.judgement_id,
            "parent_id": self.parent_id,
            "at": self.at,
            "task": self.task,
            "judge": self.judge,
            "status": self.status,
            "pick": self.pick,
            "picked_run_id": self.winner.run_id if self.winner is not None else None,
            "answer": self.answer,
            "reason": self.reason,
            "refused": self.refused,
            "prompt": self.prompt,
            "judge_answer": self.judge_answer,
            "candidates": [
                {**c.model_dump(mode="json"), "score": self.score(c.index)} for c in self.candidates
            ],
        }

    def __repr__(self) -> str:
        if self.pick is not None:
            outcome = f"pick={self.pick} ({self.candidates[self.pick].run_id})"
        else:
            outcome = f"no pick: {self.refused!r}"
        lines = [
            f"BestOf(judgement={self.judgement_id!r}, parent={self.parent_id!r} at seq "
            f"{self.at}, judge={self.judge!r}, {outcome}"
            + (f", reason={self.reason!r}" if self.reason else "")
            + ")"
        ]
        lines += [f"  {line}" for line in self.table(100).splitlines()]
        return "\n".join(lines)


CANDIDATE_COLUMNS = (
    Column(""),
    Column("#", "right"),
    Column("run"),
    Column("label", drop=2),
    Column("model", drop=1),
    Column("status"),
    Column("score", "right"),
    Column("answer / error", flexible=True),
)


def load_best_of(db: StoreLike, judgement_id: str) -> BestOf:
    """A recorded judgement read back from the log (an id or a unique prefix)."""
    with opened(db) as store:
        recording = Recording.load(store, judgement_id)
    return BestOf.of(
        recording.run_id, [e.fact for e in recording.entries], recording.run.shown_status
    )


def judgements(db: StoreLike, run_id: str) -> list[BestOf]:
    """The best-of-N judgements of a run (its children that judged branches of it), oldest
    first."""
    with opened(db) as store:
        parent = store.run(store.resolve(run_id))
        found = [
            r
            for r in store.runs(task=parent.task)
            if r.parent_id == parent.run_id and r.info.get("judgement")
        ]
        return [load_best_of(store, r.run_id) for r in sorted(found, key=lambda r: r.created_at)]


def family_notes(store: EventStore, records: Sequence[RunRecord]) -> dict[str, str]:
    """What a listing of these runs should say of best-of-N: for a judgement, "best of N:
    picked RUN" (or why none was); for a picked candidate, "picked by JUDGEMENT"."""
    notes: dict[str, str] = {}
    for r in records:
        if not r.info.get("judgement"):
            continue
        try:
            judged = load_best_of(store, r.run_id)
        except (BestOfError, IndexError):
            continue
        winner = judged.winner
        if winner is not None:
            notes[r.run_id] = f"best of {len(judged.candidates)}: picked {winner.run_id}"
            notes[winner.run_id] = f"★ picked by {r.run_id}"
        else:
            notes[r.run_id] = f"best of {len(judged.candidates)}: no pick"
    return notes


def judgement_lines(store: EventStore, record: RunRecord) -> list[str]:
    """What `agentsm show` says of a run's place in best-of-N: the judgements of its branches
    (each candidate, the pick marked), or, for a candidate, the judgement that judged it."""
    lines = []
    if record.info.get("judgement"):
        judged = load_best_of(store, record.run_id)
        winner = judged.winner
        outcome = f"picked #{winner.index} {winner.run_id}" if winner else "no pick"
        return [
            f"best-of judgement of {len(judged.candidates)} branches of {judged.parent_id} at "
            f"seq {judged.at}: {outcome}"
        ]
    if record.parent_id:
        for judged in judgements(store, record.parent_id):
            for c in judged.candidates:
                if c.run_id == record.run_id:
                    verdict = "picked" if c.index == judged.pick else "not picked"
                    lines.append(
                        f"candidate #{c.index} of best-of judgement {judged.judgement_id}: "
                        f"{verdict}"
                    )
    for judged in judgements(store, record.run_id):
        lines.append(
            f"best of {len(judged.candidates)} at seq {judged.at} (judgement "
            f"{judged.judgement_id}, judge {judged.judge}):"
        )
        for c in judged.candidates:
            mark = "  ★ picked" if c.index == judged.pick else ""
            lines.append(f"  #{c.index} {c.run_id} {c.label} {c.status}{mark}")
        if judged.pick is None:
            lines.append(f"  no pick: {judged.refused or judged.status}")
    return lines
