"""Recording a best-of-N judgement as a run of its own, and replaying it.

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
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from agentsm import AgentConfig, LlmResponse, ToolRegistry
from agentsm import facts as f
from agentsm._sync import run_sync
from agentsm.catalog import summary_of
from agentsm.codec import clean_text
from agentsm.errors import UnrecordableFact
from agentsm.facts import FACTS, JUDGING, Candidate
from agentsm.llm.base import llm_settings
from agentsm.memory import fold, initial_memory
from agentsm.recorder import encode_meta
from agentsm.redaction import Redactor
from agentsm.trace import TraceEntry, read_events
from eventstore import EventStore, NewEvent

from .errors import ChoiceRefused
from .judgement import BestOf
from .judges import (
    FunctionJudge,
    LlmJudge,
    Refusal,
    Verdict,
    choose,
    judge_name,
    judge_prompt,
    read_answer,
    verdict_of,
)
from .recording import Recording
from .report import ReplayReport
from .scratch import ScratchStore
from .source import StoreLike, opened

__all__ = ["judge_candidates", "judgement_start", "replay_judgement"]

PickOutcome = TypeVar("PickOutcome", bound=f.Fact)


class _Writer:
    """Appends a judgement's facts to its run: created with the first ones, status running;
    each fact through the parent agent's redaction hooks first, as an agent's are."""

    def __init__(
        self,
        store: EventStore,
        run_id: str,
        clock: Callable[[], float],
        redactor: Redactor | None = None,
    ) -> None:
        self.store, self.run_id, self.clock = store, run_id, clock
        self.redactor = redactor
        self.facts: list[f.Fact] = []
        self.seq = 0

    def _redacted(self, facts: Sequence[f.Fact]) -> list[f.Fact]:
        if not self.redactor:
            return list(facts)
        return [self.redactor.fact(x) for x in facts]

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
        facts = self._redacted(facts)
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
            claim=True,  # driven from here: no worker takes it while it is judged
            summary=summary_of(fold(self.facts)),
        )
        self.seq = len(facts)

    def append(self, facts: Sequence[f.Fact], status: str) -> None:
        facts = self._redacted(facts)
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
    redactor: Redactor | None = None,
) -> BestOf:
    """Record a judgement of `candidates` (branches of `parent_id` at seq `at`) as a run of
    its own, starting with `started` (see `judgement_start`), and return it. A judge whose
    choice is refused (a candidate that did not finish, one there is not, an answer naming
    none, a judge that failed) raises `ChoiceRefused`, the judgement recorded first and given
    as `.result`. When no candidate finished, no judge is asked and there is no pick. Every
    fact passes `redactor` (the parent agent's hooks, `AgentBuilder.build_redactor`) first."""
    candidates = tuple(candidates)
    llm_judge = judge if isinstance(judge, LlmJudge) else None
    writer = _Writer(store, judgement_id or uuid.uuid4().hex[:12], clock, redactor)
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
    if asked is not None and isinstance(writer.facts[-1], f.JudgeAsked):
        asked = writer.facts[-1]  # the judge is sent the prompt as recorded
    later: list[f.Fact] = []
    outcome: f.CandidatePicked | f.PickRefused
    try:
        if not finished:
            raise Refusal("no_finished_candidate", "no candidate finished: nothing to judge")
        if llm_judge is not None and asked is not None:
            answer = await _ask(llm_judge, asked, started.config)
            later.append(answer)
            verdict = read_answer(answer.response.content or "", len(candidates))
        else:
            verdict = await _call(judge, candidates)  # type: ignore[arg-type]
        outcome = _recordable(choose(verdict, candidates))
        for fact in later:
            _recordable(fact)
    except Refusal as e:
        later = [x for x in later if _problem(x) is None]
        outcome = f.PickRefused(reason=e.code, message=clean_text(str(e)))
    if isinstance(outcome, f.CandidatePicked):
        closing = f.RunFinished(status="done", final_answer=outcome.answer)
    else:
        closing = f.RunFinished(status="failed", error=outcome.message)
    writer.append([*later, outcome, closing], closing.status)
    result = BestOf.of(writer.run_id, writer.facts, closing.status)
    if isinstance(outcome, f.PickRefused) and outcome.reason != "no_finished_candidate":
        raise ChoiceRefused(writer.run_id, outcome.message, result)
    return result


def _problem(fact: f.Fact) -> str | None:
    """Why a fact could not be recorded as it is (a lone surrogate, a NaN), or None."""
    try:
        FACTS.encode(fact)
    except UnrecordableFact as e:
        return str(e)
    return None


def _recordable(fact: PickOutcome) -> PickOutcome:
    """The fact, if it can be recorded; what the judge gave that cannot is refused as data."""
    problem = _problem(fact)
    if problem is not None:
        raise Refusal("judge_error", f"what the judge gave cannot be recorded: {problem}")
    return fact


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
    except Refusal:
        raise
    except Exception as e:
        raise Refusal("judge_error", f"the judging LLM failed: {type(e).__name__}: {e}") from e
    if not isinstance(response, LlmResponse):
        raise Refusal(
            "judge_error", f"the judging LLM returned {type(response).__name__}, not LlmResponse"
        )
    return f.JudgeAnswered(response=response)


async def _call(judge: FunctionJudge, candidates: tuple[Candidate, ...]) -> Verdict:
    """Call a function judge (awaited if async); what it raises is refused, named."""
    try:
        returned = judge(candidates)
        if inspect.isawaitable(returned):
            returned = await returned
    except Refusal:
        raise
    except Exception as e:
        raise Refusal("judge_error", f"the judge raised {type(e).__name__}: {e}") from e
    return verdict_of(returned, len(candidates))


class _RecordedAnswer:
    """The judging LLM of a judgement that replays: its recorded answer, or its recorded
    failure, served back."""

    def __init__(self, answer: f.JudgeAnswered | None, refusal: f.PickRefused | None) -> None:
        self.answer, self.refusal = answer, refusal

    async def call(self, memory: Any, tools: ToolRegistry, model: str) -> LlmResponse:
        if self.answer is not None:
            return self.answer.response
        message = self.refusal.message if self.refusal is not None else "no answer recorded"
        raise Refusal("judge_error", message)


def replay_judgement(
    db: StoreLike, judgement_id: str, judge: FunctionJudge | None = None
) -> ReplayReport:
    """Judge a recorded judgement's candidates again with the current code, in a scratch
    store, and compare every fact: an LLM judge's prompt is built again and its recorded answer
    served back and read again; a function judge's recorded verdict is served back (or
    `judge`, the function, is called again)."""
    with opened(db) as store:
        recording = Recording.load(store, judgement_id)
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
    scratch = ScratchStore()  # the replayed facts are compared, never kept
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
    return recording.compare(
        [TraceEntry.from_stored(e) for e in read_events(scratch, recording.run_id)]
    )


def _served(outcome: f.CandidatePicked | f.PickRefused | None) -> FunctionJudge:
    """A function judge's recorded verdict as a judge that gives it again."""

    def served(candidates: tuple[Candidate, ...]) -> Verdict:
        if isinstance(outcome, f.CandidatePicked):
            return Verdict(outcome.index, outcome.scores, outcome.reason)
        code = outcome.reason if outcome is not None else "judge_error"
        raise Refusal(code, outcome.message if outcome is not None else "no outcome recorded")

    return served
