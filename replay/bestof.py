"""Best of N: branch a recorded run N times from one point, each branch with another LLM,
model, config or answer, drive the branches together on one event loop, and let a judge (a
function or an LLM) pick one. Every branch is a run of the store (RunBranched names what it
changed) and the pick is a judgement run of its own (see `replay.judging`)."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentsm import AgentConfig, LlmCaller, LlmResponse
from agentsm._sync import run_sync
from agentsm.facts import Candidate
from agentsm.llm.base import llm_settings
from eventstore import EventStore

from .branching import Branch, judged, start_branch
from .branchnotes import UnusedChange
from .errors import BestOfError
from .judgement import BestOf, load_best_of
from .judges import FunctionJudge, Judge, LlmJudge, as_judge
from .judging import judge_candidates, judgement_start
from .recording import Recording
from .source import Builder, StoreLike, agent_of, opened, recorded_builder
from .timetravel import memory_at

__all__ = ["Variant", "abest_of", "best_of", "judge_again"]


@dataclass(frozen=True)
class Variant:
    """One way to go on from the branch point: `llm` answers every later call, `model` is the
    model it is asked for, `config` replaces the configuration (an AgentConfig, or a mapping of
    the fields to change), `answer` is the next LLM response (a final answer's text, or an
    LlmResponse). Nothing given: the parent's recorded responses answer where the branch's
    requests are the same, as in `branch_run` (a branch that needs a live LLM stops)."""

    llm: LlmCaller | None = None
    model: str | None = None
    config: AgentConfig | Mapping[str, Any] | None = None
    answer: str | LlmResponse | None = None
    label: str = ""

    def __repr__(self) -> str:
        given = [
            f"{name}={value!r}"
            for name, value in (
                ("label", self.label),
                ("model", self.model),
                ("llm", type(self.llm).__name__ if self.llm is not None else None),
                ("config", self.config),
                ("answer", self.answer),
            )
            if value
        ]
        return f"Variant({', '.join(given)})"


def best_of(
    db: StoreLike,
    run_id: str,
    at: int,
    variants: Sequence[Variant],
    judge: Judge,
    *,
    builder: Builder | None = None,
    llm: LlmCaller | None = None,
    live_tools: bool = False,
    judgement_id: str | None = None,
) -> BestOf:
    """Branch run `run_id` at seq `at` once per variant, run the branches concurrently, and
    let `judge` pick one (see `abest_of`); works inside a running event loop too."""
    return run_sync(
        abest_of(
            db,
            run_id,
            at,
            variants,
            judge,
            builder=builder,
            llm=llm,
            live_tools=live_tools,
            judgement_id=judgement_id,
        )
    )


async def abest_of(
    db: StoreLike,
    run_id: str,
    at: int,
    variants: Sequence[Variant],
    judge: Judge,
    *,
    builder: Builder | None = None,
    llm: LlmCaller | None = None,
    live_tools: bool = False,
    judgement_id: str | None = None,
) -> BestOf:
    """Best of N for async code. Each variant becomes a branch of the run at `at` (as
    `branch_run` makes them: the parent's recorded results for the same requests at the same
    places, the builder's tools for other calls with `live_tools`, else the branch stops);
    the branches' engines run together (`asyncio.gather`). A branch that fails (an LLM error,
    max steps, a crash) or stops (it needed a live effect) is a candidate that lost. Then `judge` (a
    function of the candidates, an `LlmJudge`, or an LLM caller) picks among those that
    finished, in a judgement run of its own that records the candidates, the judge's prompt
    and answer, and the pick. A variant's LLM: its own `llm`, else `llm`, else (when it names
    a model) the builder's. A choice of a candidate that did not finish is refused
    (`ChoiceRefused`); when none finished, the judgement has no pick."""
    if not variants:
        raise BestOfError("best_of needs at least one Variant: give one per way to go on.")
    chosen = as_judge(judge)
    with opened(db) as store:
        return await _best_of(
            store, run_id, at, variants, chosen, builder, llm, live_tools, judgement_id
        )


async def _best_of(
    store: EventStore,
    run_id: str,
    at: int,
    variants: Sequence[Variant],
    chosen: FunctionJudge | LlmJudge,
    builder: Builder | None,
    llm: LlmCaller | None,
    live_tools: bool,
    judgement_id: str | None,
) -> BestOf:
    """`abest_of` on an open store."""
    parent = Recording.load(store, run_id)
    if judged(parent):
        raise BestOfError(
            f"Run {parent.run_id} is a best-of judgement, not an agent run: give its parent "
            f"{parent.run.parent_id} or one of its candidates."
        )
    definition = parent.definition
    point = parent.branch_point(at)
    recorded, _ = memory_at(store, parent.run_id, point)
    base = recorded.config
    if builder is None:
        recorded_builder(definition, parent.run_id)  # refuses a run that needs the user's agent
    agent = agent_of(store, definition, builder) if builder is not None else None
    plans = [  # a sub-agent run's LLM is its child agent's, even given its parent's builder
        _plan(i, v, base, definition.task_type, llm, agent, definition.task)
        for i, v in enumerate(variants)
    ]
    branches = [
        start_branch(
            store,
            parent.run_id,
            point,
            llm_response=plan.answer,
            config=plan.config,
            llm=plan.llm,
            builder=builder,
            live_tools=live_tools,
            also_changed=("model",) if plan.model_changed else (),
        )
        for plan in plans
    ]
    ended = await asyncio.gather(*(b.drive() for b in branches), return_exceptions=True)
    for branch in branches:
        for note in branch.unused():
            warnings.warn(UnusedChange(note), stacklevel=4)
    candidates = [
        _candidate(i, b, plan.label, plan.llm, outcome)
        for i, (b, plan, outcome) in enumerate(zip(branches, plans, ended, strict=True))
    ]
    start = judgement_start(definition, base, chosen)
    return await judge_candidates(
        store,
        start,
        parent.run_id,
        point,
        candidates,
        chosen,
        judgement_id=judgement_id,
        redactor=agent(definition.task).build_redactor() if agent is not None else None,
    )


def judge_again(
    db: StoreLike,
    judgement_id: str,
    judge: Judge,
    *,
    new_judgement_id: str | None = None,
    builder: Builder | None = None,
) -> BestOf:
    """Judge a recorded judgement's candidates again with another judge, as a new judgement
    run (the first stays as it was recorded); its facts pass the redaction hooks of
    `builder`'s agent, when given (what it reads of the log is redacted already)."""
    with opened(db) as store:
        earlier = load_best_of(store, judgement_id)
        chosen = as_judge(judge)
        parent = Recording.load(store, earlier.parent_id)
        config = memory_at(store, parent.run_id, earlier.at)[0].config
        start = judgement_start(parent.definition, config, chosen)
        agent = agent_of(store, parent.definition, builder) if builder is not None else None
        return run_sync(
            judge_candidates(
                store,
                start,
                parent.run_id,
                earlier.at,
                earlier.candidates,
                chosen,
                judgement_id=new_judgement_id,
                redactor=agent(parent.definition.task).build_redactor() if agent else None,
            )
        )


@dataclass(frozen=True)
class _Plan:
    """What one variant asks of its branch."""

    label: str
    config: AgentConfig | None
    llm: LlmCaller | None
    answer: LlmResponse | None
    model_changed: bool


def _plan(
    index: int,
    variant: Variant,
    base: AgentConfig,
    task_type: str,
    shared: LlmCaller | None,
    builder: Builder | None,
    task: str,
) -> _Plan:
    if not isinstance(variant, Variant):
        raise BestOfError(f"variants[{index}] is {variant!r}, not a Variant(llm=, model=, ...).")
    config: AgentConfig | None
    if isinstance(variant.config, AgentConfig):
        config = variant.config
    elif variant.config is not None:
        unknown = sorted(set(variant.config) - set(AgentConfig.model_fields))
        if unknown:
            raise BestOfError(
                f"variants[{index}].config: no field {', '.join(map(repr, unknown))}; the "
                f"fields are {', '.join(AgentConfig.model_fields)}."
            )
        config = AgentConfig.model_validate({**base.model_dump(), **variant.config})
    else:
        config = None
    model_changed = bool(variant.model) and variant.model != (config or base).model_for(task_type)
    if variant.model:
        now = config or base
        config = now.model_copy(update={"models": {**now.models, task_type: variant.model}})
    llm = variant.llm or shared
    if llm is None and variant.model and builder is not None:
        llm = builder(task).llm_caller
    if llm is None and variant.model:
        raise BestOfError(
            f"variants[{index}] asks for model {variant.model!r} but no LLM would answer it "
            "(the parent's recorded responses would): give Variant(llm=...), best_of(llm=...), "
            "or a builder whose agent has .llm(...)."
        )
    answer = variant.answer
    response = LlmResponse.final_answer(answer) if isinstance(answer, str) else answer
    kind = "answer" if answer is not None else "variant"
    label = variant.label or variant.model or f"{kind} {index}"
    return _Plan(label, config, llm, response, model_changed)


def _candidate(
    index: int, branch: Branch, label: str, llm: LlmCaller | None, outcome: object
) -> Candidate:
    """How a branch ended, as the judge sees it."""
    memory = branch.engine.memory
    record = branch.engine.store.run(branch.run_id)
    error = memory.error
    if isinstance(outcome, BaseException) and not error:
        error = f"{type(outcome).__name__}: {outcome}"
    return Candidate(
        index=index,
        run_id=branch.run_id,
        label=label,
        model=memory.config.model_for(memory.task_type),
        changes=branch.changes,
        status=record.status,
        answer=memory.final_answer if record.status == "done" else None,
        error=error,
        steps=memory.step,
        tokens=memory.total_usage.total_tokens,
        llm=llm_settings(llm) if llm is not None else {},
    )
