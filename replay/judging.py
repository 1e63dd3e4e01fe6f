"""The judge of best-of-N and the judgement run that records its pick.

A judgement is a run of its own in the store, a child of the parent run at the branch point,
whose log says everything the pick depended on: RunStarted (the parent's task, the judge's
prompt and model), CandidatesGathered (the candidate runs and how each ended), for an LLM judge
JudgeAsked (the whole prompt, committed before the call) and JudgeAnswered, then
CandidatePicked or PickRefused, and RunFinished. The parent and the candidates, finished runs,
are never written to. A judgement replays offline: the prompt is built again and compared, the
recorded answer served back and read again (`replay_judgement`).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import math
import re
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentsm import AgentConfig, LlmCaller, LlmResponse, ToolRegistry
from agentsm import facts as f
from agentsm._sync import run_sync
from agentsm.catalog import summary_of
from agentsm.facts import FACTS, JUDGING, Candidate
from agentsm.llm.base import llm_settings
from agentsm.memory import fold, initial_memory
from agentsm.recorder import encode_meta
from agentsm.tables import Column, render_table
from agentsm.trace import TraceEntry, read_events
from eventstore import EventStore, NewEvent, RunRecord, SQLiteEventStore

from .errors import BestOfError, ChoiceRefused
from .recording import Recording
from .report import ReplayReport, compare_runs
from .source import StoreLike, open_store

__all__ = [
    "JUDGE_SYSTEM_PROMPT",
    "BestOf",
    "Judge",
    "LlmJudge",
    "Verdict",
    "family_notes",
    "judge_candidates",
    "judge_prompt",
    "judgement_lines",
    "judgement_start",
    "judgements",
    "load_best_of",
    "replay_judgement",
]

JUDGE_SYSTEM_PROMPT = (
    "You judge candidate answers to a task and pick the one that answers it best: correct, "
    "complete and to the point. Reply with one JSON object and nothing else: "
    '{"best": <candidate number>, "scores": {"<candidate number>": <0 to 10>, ...}, '
    '"reason": "<one sentence>"}.'
)
"""What an `LlmJudge` is told, unless it is given its own system prompt."""


@dataclass(frozen=True)
class Verdict:
    """What a function judge returns when an index or a list of scores says too little: the
    pick (a candidate's index), scores by candidate index, and a reason, all optional but one
    of pick and scores."""

    pick: int | None = None
    scores: Sequence[float | None] = ()
    reason: str = ""


FunctionJudge = Callable[[tuple[Candidate, ...]], Any]
"""`judge(candidates)` returning a candidate's index, one score per candidate (the best
finished one wins), or a `Verdict`; it may be async."""


@dataclass(frozen=True)
class LlmJudge:
    """An LLM that judges: it is sent the task and the finished candidates' answers (numbered
    from 1, their index + 1) and answers with the best one's number, scores and a reason."""

    llm: LlmCaller
    model: str = ""
    system_prompt: str = JUDGE_SYSTEM_PROMPT

    def __repr__(self) -> str:
        return f"LlmJudge({type(self.llm).__name__}, model={self.model or '(default)'!r})"


Judge = FunctionJudge | LlmJudge | LlmCaller
"""A function of the candidates, an `LlmJudge`, or any LLM caller (judging as an `LlmJudge`
with its default model)."""


def as_judge(judge: object) -> FunctionJudge | LlmJudge:
    """The judge as given, an LLM caller made an `LlmJudge`; anything else is refused."""
    if isinstance(judge, LlmJudge):
        return judge
    if callable(getattr(judge, "call", None)):
        return LlmJudge(judge)  # type: ignore[arg-type]
    if callable(judge):
        return judge
    raise BestOfError(
        f"judge={judge!r} is not a judge: give a function of the candidates (returning an "
        "index, scores or a Verdict), an LlmJudge(llm, model=...), or an LLM caller."
    )


def judge_name(judge: FunctionJudge | LlmJudge) -> str:
    """How the judgement names its judge: "llm MODEL" or "function module.name"."""
    if isinstance(judge, LlmJudge):
        return f"llm {judge.model or '(default)'}"
    module = getattr(judge, "__module__", None) or ""
    name = getattr(judge, "__qualname__", None) or type(judge).__name__
    return f"function {module}.{name}" if module else f"function {name}"


def judge_prompt(task: str, candidates: Sequence[Candidate]) -> str:
    """The user message an LLM judge gets: the task, then each finished candidate's answer
    under its number (index + 1); candidates that failed are left out, they cannot win."""
    parts = [f"Task:\n{task}"]
    for c in candidates:
        if c.finished:
            label = f" ({c.label})" if c.label else ""
            parts.append(f"Candidate {c.index + 1}{label}:\n{c.answer}")
    numbers = ", ".join(str(c.index + 1) for c in candidates if c.finished)
    parts.append(
        f"Which candidate ({numbers}) answers the task best? Reply with JSON only: "
        '{"best": <number>, "scores": {"<number>": <0 to 10>}, "reason": "<one sentence>"}'
    )
    return "\n\n".join(parts)


class _Refusal(Exception):
    """No pick: a code (PickRefused.reason) and a sentence."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        super().__init__(message)


def read_answer(text: str, count: int) -> Verdict:
    """An LLM judge's answer as a verdict (its numbers made indexes): a JSON object with
    "best" (and "scores", "reason"), or a number alone."""
    found = re.search(r"\{.*\}", text, re.DOTALL)
    if found is not None:
        try:
            data = json.loads(found.group(0))
        except ValueError:
            data = None
        if isinstance(data, dict):
            best = data.get("best", data.get("pick"))
            number = _integer(best)
            scores: list[float | None] = [None] * count
            given = data.get("scores")
            items = given.items() if isinstance(given, dict) else enumerate(given or (), 1)
            for key, value in items if isinstance(given, dict | list) else ():
                n = _integer(key)
                if n is not None and 1 <= n <= count and _number(value) is not None:
                    scores[n - 1] = _number(value)
            reason = data.get("reason")
            return Verdict(
                None if number is None else number - 1,
                tuple(scores) if any(s is not None for s in scores) else (),
                reason if isinstance(reason, str) else "",
            )
    alone = re.fullmatch(r"\s*(?:candidate\s*)?#?(\d+)\s*\.?\s*", text, re.IGNORECASE)
    if alone is not None:
        return Verdict(int(alone.group(1)) - 1)
    raise _Refusal(
        "bad_choice",
        f"the judge's answer names no candidate: {text[:200]!r}; it should be JSON such as "
        '{"best": 2, "reason": "..."}',
    )


def _integer(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("#").isdigit():
        return int(value.strip().lstrip("#"))
    return None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _verdict_of(returned: object, count: int) -> Verdict:
    """What a function judge returned, as a verdict; anything else is refused."""
    if isinstance(returned, Verdict):
        scores = tuple(returned.scores)
    elif isinstance(returned, int) and not isinstance(returned, bool):
        return Verdict(returned)
    elif isinstance(returned, Sequence) and not isinstance(returned, str | bytes):
        scores = tuple(returned)
        returned = Verdict(scores=scores)
    else:
        raise _Refusal(
            "bad_choice",
            f"the judge returned {returned!r}: return a candidate's index, one score per "
            "candidate, or a Verdict(pick=..., scores=..., reason=...)",
        )
    if scores and len(scores) != count:
        raise _Refusal(
            "bad_choice",
            f"the judge gave {len(scores)} scores for {count} candidates: give one per "
            "candidate (None for a candidate it does not score)",
        )
    bad = [s for s in scores if s is not None and _number(s) is None]
    if bad:
        raise _Refusal(
            "bad_choice", f"the judge's scores must be finite numbers (or None), not {bad[0]!r}"
        )
    return Verdict(returned.pick, tuple(_number(s) for s in scores), returned.reason)


def _choose(verdict: Verdict, candidates: Sequence[Candidate]) -> f.CandidatePicked:
    """The pick a verdict makes: its index, else the best-scored finished candidate; a choice
    of a candidate that failed, or of none there is, is refused."""
    pick = verdict.pick
    if pick is None:
        scored = [
            (s, c.index)
            for s, c in zip(verdict.scores, candidates, strict=True)
            if s is not None and c.finished
        ]
        if not scored:
            raise _Refusal(
                "bad_choice", "the judge scored no candidate that finished: nothing to pick"
            )
        pick = max(scored, key=lambda sc: (sc[0], -sc[1]))[1]
    if not 0 <= pick < len(candidates):
        raise _Refusal(
            "bad_choice",
            f"the judge picked candidate {pick}, and there is none: the candidates are "
            f"0..{len(candidates) - 1} ({_finished(candidates)})",
        )
    chosen = candidates[pick]
    if not chosen.finished:
        raise _Refusal(
            "bad_choice",
            f"the judge picked candidate {pick} (run {chosen.run_id}), which did not finish "
            f"({chosen.status}: {chosen.error or 'no answer'}); a judge must pick one that "
            f"did: {_finished(candidates)}",
        )
    return f.CandidatePicked(
        index=pick,
        run_id=chosen.run_id,
        answer=chosen.answer or "",
        label=chosen.label,
        scores=tuple(verdict.scores),
        reason=verdict.reason,
    )


def _finished(candidates: Sequence[Candidate]) -> str:
    done = [str(c.index) for c in candidates if c.finished]
    return f"finished: {', '.join(done)}" if done else "none finished"


class _Writer:
    """Appends a judgement's facts to its run: created with the first ones, status running."""

    def __init__(self, store: EventStore, run_id: str, clock: Callable[[], float]) -> None:
        self.store, self.run_id, self.clock = store, run_id, clock
        self.facts: list[f.Fact] = []
        self.seq = 0

    def _events(self, facts: Sequence[f.Fact]) -> list[NewEvent]:
        return [
            NewEvent(
                x.kind,
                FACTS.encode(x),
                encode_meta(JUDGING, 0),
                self.clock(),
                FACTS.version(x.kind),
            )
            for x in facts
        ]

    def create(self, facts: Sequence[f.Fact], *, parent_id: str, at: int) -> None:
        self.facts = list(facts)
        self.store.create_run(
            self.run_id,
            self.facts[0].task if isinstance(self.facts[0], f.RunStarted) else "",
            parent_id=parent_id,
            branch_seq=at,
            info={"judgement": True},
            created_at=self.clock(),
            events=self._events(facts),
            status="running",
            summary=summary_of(fold(self.facts)),
        )
        self.seq = len(facts)

    def append(self, facts: Sequence[f.Fact], status: str) -> None:
        self.facts += facts
        self.seq = self.store.append(
            self.run_id,
            self.seq,
            self._events(facts),
            status=status,
            durable=True,
            summary=summary_of(fold(self.facts)),
        )


def judgement_start(
    definition: f.RunStarted, config: AgentConfig, judge: FunctionJudge | LlmJudge
) -> f.RunStarted:
    """A judgement's definition: the parent's task, the config at the branch point (with the
    judging model), the judge's system prompt and LLM settings, no tools."""
    if not isinstance(judge, LlmJudge):
        return f.RunStarted(
            task=definition.task,
            task_type=definition.task_type,
            system_prompt="",
            config=config,
            tools=(),
        )
    if judge.model:
        config = config.model_copy(
            update={"models": {**config.models, definition.task_type: judge.model}}
        )
    return f.RunStarted(
        task=definition.task,
        task_type=definition.task_type,
        system_prompt=judge.system_prompt,
        config=config,
        tools=(),
        llm=llm_settings(judge.llm),
    )


async def judge_candidates(
    store: EventStore,
    started: f.RunStarted,
    parent_id: str,
    at: int,
    candidates: Sequence[Candidate],
    judge: FunctionJudge | LlmJudge,
    *,
    name: str | None = None,
    judgement_id: str | None = None,
    clock: Callable[[], float] = time.time,
) -> BestOf:
    """Record a judgement of `candidates` (branches of `parent_id` at seq `at`) as a run of
    its own, starting with `started` (see `judgement_start`), and return it. A judge whose
    choice is refused (a candidate that did not finish, one there is not, an answer naming
    none, a judge that failed) raises `ChoiceRefused`, the judgement recorded first and given
    as `.result`. When no candidate finished, no judge is asked and there is no pick."""
    candidates = tuple(candidates)
    llm_judge = judge if isinstance(judge, LlmJudge) else None
    writer = _Writer(store, judgement_id or uuid.uuid4().hex[:12], clock)
    gathered = f.CandidatesGathered(
        parent_id=parent_id,
        parent_seq=at,
        candidates=candidates,
        judge=name or judge_name(judge),
    )
    first: list[f.Fact] = [started, gathered]
    finished = [c for c in candidates if c.finished]
    asked = None
    if llm_judge is not None and finished:
        asked = f.JudgeAsked(
            model=llm_judge.model,
            system_prompt=llm_judge.system_prompt,
            prompt=judge_prompt(started.task, candidates),
        )
        first.append(asked)
    writer.create(first, parent_id=parent_id, at=at)  # committed before the judge is asked
    later: list[f.Fact] = []
    outcome: f.CandidatePicked | f.PickRefused
    try:
        if not finished:
            raise _Refusal("no_finished_candidate", "no candidate finished: nothing to judge")
        if llm_judge is not None and asked is not None:
            answer = await _ask(llm_judge, asked, started.config)
            later.append(answer)
            verdict = read_answer(answer.response.content or "", len(candidates))
        else:
            verdict = await _call(judge, candidates)  # type: ignore[arg-type]
        outcome = _choose(verdict, candidates)
    except _Refusal as e:
        outcome = f.PickRefused(reason=e.code, message=str(e))
    if isinstance(outcome, f.CandidatePicked):
        closing = f.RunFinished(status="done", final_answer=outcome.answer)
    else:
        closing = f.RunFinished(status="failed", error=outcome.message)
    writer.append([*later, outcome, closing], closing.status)
    result = BestOf.of(writer.run_id, writer.facts, closing.status)
    if isinstance(outcome, f.PickRefused) and outcome.reason != "no_finished_candidate":
        raise ChoiceRefused(writer.run_id, outcome.message, result)
    return result


async def _ask(judge: LlmJudge, asked: f.JudgeAsked, config: AgentConfig) -> f.JudgeAnswered:
    """Send the judge its prompt (as the task of a conversation with its system prompt); a
    call that fails or answers with no LlmResponse is refused, its error named."""
    shown = f.RunStarted(
        task=asked.prompt,
        task_type="judge",
        system_prompt=asked.system_prompt,
        config=config,
        tools=(),
    )
    try:
        async with asyncio.timeout(config.llm_deadline):
            response = await judge.llm.call(initial_memory(shown), ToolRegistry(), asked.model)
    except _Refusal:
        raise
    except Exception as e:
        raise _Refusal("judge_error", f"the judging LLM failed: {type(e).__name__}: {e}") from e
    if not isinstance(response, LlmResponse):
        raise _Refusal(
            "judge_error", f"the judging LLM returned {type(response).__name__}, not LlmResponse"
        )
    return f.JudgeAnswered(response=response)


async def _call(judge: FunctionJudge, candidates: tuple[Candidate, ...]) -> Verdict:
    """Call a function judge (awaited if async); what it raises is refused, named."""
    try:
        returned = judge(candidates)
        if inspect.isawaitable(returned):
            returned = await returned
    except _Refusal:
        raise
    except Exception as e:
        raise _Refusal("judge_error", f"the judge raised {type(e).__name__}: {e}") from e
    return _verdict_of(returned, len(candidates))


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
    recording = Recording.load(open_store(db), judgement_id)
    return BestOf.of(
        recording.run_id, [e.fact for e in recording.entries], recording.run.shown_status
    )


def judgements(db: StoreLike, run_id: str) -> list[BestOf]:
    """The best-of-N judgements of a run (its children that judged branches of it), oldest
    first."""
    store = open_store(db)
    parent = store.run(store.resolve(run_id))
    found = [
        r
        for r in store.runs(task=parent.task)
        if r.parent_id == parent.run_id and r.info.get("judgement")
    ]
    return [load_best_of(store, r.run_id) for r in sorted(found, key=lambda r: r.created_at)]


class _RecordedAnswer:
    """The judging LLM of a judgement that replays: its recorded answer, or its recorded
    failure, served back."""

    def __init__(self, answer: f.JudgeAnswered | None, refusal: f.PickRefused | None) -> None:
        self.answer, self.refusal = answer, refusal

    async def call(self, memory: Any, tools: ToolRegistry, model: str) -> LlmResponse:
        if self.answer is not None:
            return self.answer.response
        message = self.refusal.message if self.refusal is not None else "no answer recorded"
        raise _Refusal("judge_error", message)


def replay_judgement(
    db: StoreLike, judgement_id: str, judge: FunctionJudge | None = None
) -> ReplayReport:
    """Judge a recorded judgement's candidates again with the current code, in a scratch
    store, and compare every fact: an LLM judge's prompt is built again and its recorded answer
    served back and read again; a function judge's recorded verdict is served back (or
    `judge`, the function, is called again)."""
    recording = Recording.load(open_store(db), judgement_id)
    facts = [e.fact for e in recording.entries]
    started, gathered = facts[0], facts[1]
    assert isinstance(started, f.RunStarted) and isinstance(gathered, f.CandidatesGathered)
    asked = next((x for x in facts if isinstance(x, f.JudgeAsked)), None)
    answered = next((x for x in facts if isinstance(x, f.JudgeAnswered)), None)
    outcome = next((x for x in facts if isinstance(x, f.CandidatePicked | f.PickRefused)), None)
    again: FunctionJudge | LlmJudge
    if gathered.judge.startswith("llm "):
        refusal = outcome if isinstance(outcome, f.PickRefused) else None
        again = LlmJudge(
            _RecordedAnswer(answered, refusal),
            model=asked.model if asked is not None else "",
            system_prompt=started.system_prompt,
        )
    elif judge is not None:
        again = judge
    else:
        again = _served(outcome)
    scratch = SQLiteEventStore(":memory:")
    with contextlib.suppress(ChoiceRefused):  # a refusal replays as a refusal
        run_sync(
            judge_candidates(
                scratch,
                started,
                gathered.parent_id,
                gathered.parent_seq,
                gathered.candidates,
                again,
                name=gathered.judge,
                judgement_id=recording.run_id,
            )
        )
    replayed = [TraceEntry.from_stored(e) for e in read_events(scratch, recording.run_id)]
    return compare_runs(recording.run_id, recording.entries, replayed)


def _served(outcome: f.CandidatePicked | f.PickRefused | None) -> FunctionJudge:
    """A function judge's recorded verdict as a judge that gives it again."""

    def served(candidates: tuple[Candidate, ...]) -> Verdict:
        if isinstance(outcome, f.CandidatePicked):
            return Verdict(outcome.index, outcome.scores, outcome.reason)
        code = outcome.reason if outcome is not None else "judge_error"
        raise _Refusal(code, outcome.message if outcome is not None else "no outcome recorded")

    return served


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
