"""The recorded facts: the log schema of a run. Each fact says, in the past tense, what happened.

Facts are frozen pydantic models in one union discriminated on `kind`. Measurements (durations,
latencies, timestamps) are not facts: they live in the envelope, which replay does not compare.
`OWNERS` says which state may record which fact; the engine refuses anything else.

Each kind has a `version`. A change to a kind's fields raises its version and registers an
upcaster from the old one on `FACTS` (`@FACTS.register("Kind", old_version)`), so that every
log ever written stays readable. Users add kinds of their own with `AgentBuilder.fact` (see
`agentsm.custom`); a process that does not know a user's kind reads it as an `UnknownFact`.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from .codec import FactCodec, UnknownFact
from .frozen import JsonObject
from .images import Image
from .skills import Skill
from .types import (
    AgentConfig,
    HistoryEntry,
    LlmResponse,
    McpServerSpec,
    ParentCall,
    ReasoningPart,
    State,
    ThreadTurn,
    TokenBudget,
    TokenUsage,
    ToolCall,
    ToolSchema,
)

__all__ = [
    "FACTS",
    "FACT_ADAPTER",
    "JUDGING",
    "OWNERS",
    "AnswerRejected",
    "ApprovalRequested",
    "Candidate",
    "CandidatePicked",
    "CandidatesGathered",
    "ConfidenceLow",
    "ContextCompacted",
    "ContextLimitReached",
    "Decision",
    "Fact",
    "FinalAnswerProduced",
    "HistoryCompressed",
    "HookAborted",
    "HumanAnswered",
    "HumanDecided",
    "InputChecked",
    "JudgeAnswered",
    "JudgeAsked",
    "LlmFailed",
    "LlmRequested",
    "LlmResponded",
    "ObservationCommitted",
    "ObservationRewritten",
    "PatchMarked",
    "PickRefused",
    "QuestionAsked",
    "ReflectionSkipped",
    "RunAborted",
    "RunBranched",
    "RunFailed",
    "RunFinished",
    "RunStarted",
    "StepStarted",
    "Steered",
    "StopRequested",
    "ToolCallRewritten",
    "ToolCallStarted",
    "ToolCallVetoed",
    "ToolCallsPlanned",
    "ToolExecuted",
    "ToolsRejected",
    "Transitioned",
    "UnknownFact",
    "ValueDrawn",
]

Purpose = Literal["plan", "reflect"]


class _Fact(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    version: ClassVar[int] = 1
    """The version of this kind's fields; raised (with an upcaster) when they change."""
    enveloped: ClassVar[dict[str, str]] = {}
    """Fields the envelope's metadata holds too (field: metadata key): the payload leaves
    them out where they are equal, and decoding restores them from the metadata."""


class RunStarted(_Fact):
    """The run's definition: everything memory starts from, the tools' flags, and what of the
    agent lives only in the user's code (states with their own handler, a custom table, the
    redaction hooks by label), for which replay and branch need the user's builder."""

    kind: Literal["RunStarted"] = "RunStarted"
    task: str
    task_type: str
    system_prompt: str
    config: AgentConfig
    name: str | None = None
    """The agent's name (`AgentBuilder.name`), None when it was given none."""
    tools: tuple[ToolSchema, ...]
    blacklisted_tools: tuple[str, ...] = ()
    approval_required: tuple[str, ...] = ()
    budget: TokenBudget | None = None
    idempotent_tools: tuple[str, ...] = ()
    custom_handlers: tuple[str, ...] = ()
    custom_table: bool = False
    redactions: tuple[str, ...] = ()
    llm: dict[str, Any] = Field(default_factory=dict)
    """The LLM caller's request settings (provider, temperature, seed, ...), if it has any."""
    skills: tuple[Skill, ...] = ()
    """The skills offered to the LLM (`AgentBuilder.skills`): their index is appended to the
    system prompt in memory; their bodies are read through the `read_skill` tool."""
    parent_call: ParentCall | None = None
    """For a sub-agent run: the parent run's call that started it (None for any other run)."""
    custom_facts: JsonObject | None = None
    """The user's own fact kinds the agent registered, each with the part of memory it folds
    into (`AgentBuilder.fact`); None when it registered none."""
    parts: JsonObject | None = None
    """The initial value of each user-declared part of memory, by name."""
    mcp_servers: tuple[McpServerSpec, ...] = ()
    """The MCP servers whose tools the run offers (their schemas are in `tools`)."""
    thread: ThreadTurn | None = None
    """For a turn of a thread (`AgentBuilder.thread`): the thread, the turn and the run
    before it (None for any other run)."""
    conversation: tuple[HistoryEntry, ...] | None = None
    """For a turn of a thread: the history it starts from, what the turn before it ended
    with: the earlier user messages and answers (`HistoryEntry.message`, `.answer`), with
    their tool calls, summaries and notes in between, as they stood then. Its own log then
    holds all the turn needs: it folds, replays, branches and exports on its own."""
    questions: tuple[str, ...] | None = None
    """The tools whose calls are questions to a person (`AgentBuilder.ask_human`): such a
    call waits for an answer, which becomes its result; it never runs (None: none)."""
    images: tuple[Image, ...] | None = None
    """The images that come with the task (`AgentBuilder(task, images=...)`, a thread's
    message), by digest or URL; their bytes are in the store's blobs (None: none)."""


class StepStarted(_Fact):
    """Planning began step `step` (guard first, then increment)."""

    kind: Literal["StepStarted"] = "StepStarted"
    step: int


class LlmRequested(_Fact):
    """An LLM call is about to be made: the model, the tool set and a digest of the messages."""

    kind: Literal["LlmRequested"] = "LlmRequested"
    purpose: Purpose
    model: str
    messages_digest: str
    tools: tuple[str, ...]
    tools_digest: str


class LlmResponded(_Fact):
    """The LLM answered; its usage is summed into memory."""

    kind: Literal["LlmResponded"] = "LlmResponded"
    purpose: Purpose
    response: LlmResponse


class LlmFailed(_Fact):
    """The LLM call raised; the error class and message are kept."""

    kind: Literal["LlmFailed"] = "LlmFailed"
    purpose: Purpose
    error_type: str
    message: str


class ConfidenceLow(_Fact):
    """A response's confidence was under the threshold with retries left; it was discarded."""

    kind: Literal["ConfidenceLow"] = "ConfidenceLow"
    confidence: float
    threshold: float


class ToolsRejected(_Fact):
    """Planning refused calls (a blacklisted tool); the refusals are shown to the LLM."""

    kind: Literal["ToolsRejected"] = "ToolsRejected"
    entries: tuple[HistoryEntry, ...]


class ToolCallsPlanned(_Fact):
    """The calls Acting (or ParallelActing, when `parallel`) is to run, in the LLM's order.

    Calls the step's plan response holds are not written again: `calls` None stands for that
    response's calls, text and reasoning (`AgentMemory.offered_calls`, `offered_text`,
    `offered_reasoning`). Read through a `Trace` or a replay `Recording`, `calls`, `text` and
    `reasoning` are filled in (`in_full`)."""

    version: ClassVar[int] = 2
    kind: Literal["ToolCallsPlanned"] = "ToolCallsPlanned"
    calls: tuple[ToolCall, ...] | None = None
    parallel: bool
    text: str | None = None
    reasoning: tuple[ReasoningPart, ...] | None = None
    """The reasoning the model returned with these calls (None: none), sent back with them."""


class ApprovalRequested(_Fact):
    """These planned calls need a human decision before anything runs; `reason` is the question
    ("approval", or "outcome_unknown" for a call that was running when the process stopped)."""

    kind: Literal["ApprovalRequested"] = "ApprovalRequested"
    call_ids: tuple[str, ...]
    reason: Literal["approval", "outcome_unknown"] = "approval"
    indices: tuple[int, ...] | None = None
    """The calls' positions among the planned calls, recorded when their ids do not tell them
    apart (an LLM gave two calls of the step the same id)."""

    @classmethod
    def of(
        cls,
        planned: tuple[ToolCall, ...],
        positions: tuple[int, ...],
        reason: Literal["approval", "outcome_unknown"] = "approval",
    ) -> ApprovalRequested:
        """The request for the planned calls at `positions`."""
        ids = [c.id for c in planned]
        unique = len(set(ids)) == len(ids)
        return cls(
            call_ids=tuple(ids[i] for i in positions),
            reason=reason,
            indices=None if unique else positions,
        )


class Decision(BaseModel):
    """A human's verdict on one call: approved, rejected, modified with new arguments, or, for
    a question to a person (`AgentBuilder.ask_human`), answered with `answer`, which becomes
    the call's result. `index` is the call's position among the step's planned calls: ids are
    only labels (an LLM may repeat them), so a decision with an index applies to that call
    alone."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    call_id: str
    verdict: Literal["approved", "rejected", "modified", "answered"]
    args: JsonObject | None = None
    note: str = ""
    index: int | None = None
    answer: str | None = None


class HumanDecided(_Fact):
    """The human's decisions on the calls that waited for approval."""

    kind: Literal["HumanDecided"] = "HumanDecided"
    decisions: tuple[Decision, ...]


class QuestionAsked(_Fact):
    """A handler asked a person a question (`ctx.ask`): the run waits for the answer."""

    kind: Literal["QuestionAsked"] = "QuestionAsked"
    question: str


class HumanAnswered(_Fact):
    """A person answered the question a handler asked (`replay.answer`, `agentsm answer`, the
    viewer, or the approval callback): `ctx.ask` returns it when the handler asks again."""

    kind: Literal["HumanAnswered"] = "HumanAnswered"
    answer: str


class Steered(_Fact):
    """A person sent the run a message while it went on (`engine.steer`, `replay.steer`,
    `agentsm steer`), taken where the engine checks for messages, between two transitions: the
    LLM reads it as a user message after the latest entries, from its next call on."""

    kind: Literal["Steered"] = "Steered"
    text: str


class StopRequested(_Fact):
    """Someone asked the run to stop (`engine.request_stop`, `replay.request_stop`, `agentsm
    stop`, the viewer): it stopped here, between two transitions, with status stopped, and goes
    on from here when resumed."""

    kind: Literal["StopRequested"] = "StopRequested"
    reason: str = ""


class ToolCallStarted(_Fact):
    """A tool is about to run; committed before it runs, so a crash leaves it visible.

    The call is named by its place, not written again: `index` is its position among the
    step's planned calls. A call a handler runs that is not planned (its own) is written here
    once, in `call`, and takes the next place after the plan's calls (and the step's earlier
    own calls). A fact with `index` None (from a log written before version 2, or made by
    hand) has the whole call, and the reducer finds its place by the call. Read through a
    `Trace` or a replay `Recording`, `call` and `index` are both filled in (`in_full`)."""

    version: ClassVar[int] = 2
    kind: Literal["ToolCallStarted"] = "ToolCallStarted"
    index: int | None = None
    call: ToolCall | None = None


class ToolExecuted(_Fact):
    """A tool ran (or could not): its observation, "SUCCESS: ..." or "ERROR: {type}: ...".

    The call is named by its place (`index`, as in `ToolCallStarted`), not written again; a fact
    with `index` None (from before version 2, or made by hand) has the whole call. Read through
    a `Trace` or a replay `Recording`, `call` and `index` are both filled in."""

    version: ClassVar[int] = 2
    kind: Literal["ToolExecuted"] = "ToolExecuted"
    index: int | None = None
    call: ToolCall | None = None
    observation: str
    success: bool
    error_type: str | None = None
    usage: TokenUsage | None = None
    """Tokens the call spent that count into this run's usage (a sub-agent sharing the budget)."""
    images: tuple[Image, ...] | None = None
    """The images the tool returned with its observation, by digest or URL; their bytes are in
    the store's blobs (None: none)."""


class InputChecked(_Fact):
    """The input guards (`AgentBuilder.input_guard`) checked the run's next user message (the
    task first, then each message sent while it went on) before the planning LLM call that
    first sends it: they allowed it, replaced its text with `text` (what the LLM is sent from
    then on), or refused it for `reason`, which ends the run in Error."""

    kind: Literal["InputChecked"] = "InputChecked"
    verdict: Literal["allowed", "replaced", "refused"]
    text: str | None = None
    reason: str = ""


class HookAborted(_Fact):
    """A `before_turn` or `after_turn` hook ended the run for `reason` (before an LLM call, or
    once a step's results were in history or its final answer was given): it ends in Error."""

    kind: Literal["HookAborted"] = "HookAborted"
    hook: Literal["before_turn", "after_turn"]
    reason: str


class ToolCallVetoed(_Fact):
    """A `before_tool_call` hook refused the planned call at position `index` before it
    started: it does not run, and the LLM reads the refusal, with `reason`, as its result."""

    kind: Literal["ToolCallVetoed"] = "ToolCallVetoed"
    index: int
    reason: str


class ToolCallRewritten(_Fact):
    """A `before_tool_call` hook gave the planned call at position `index` other arguments
    before it started: it runs with `args`, and history shows them."""

    kind: Literal["ToolCallRewritten"] = "ToolCallRewritten"
    index: int
    args: JsonObject


class ObservationRewritten(_Fact):
    """An `after_tool_call` hook changed what the LLM reads of the call at position `index`
    (its `ToolExecuted` keeps what the tool returned): `observation` replaces it."""

    kind: Literal["ObservationRewritten"] = "ObservationRewritten"
    index: int
    observation: str


class ObservationCommitted(_Fact):
    """Observing moved the step's results (and refusals) into history: `entries` (None:
    none), then the results at the places `results` names, in that order (each result's call
    and observation, the plan's text on the first: `committed_entries`), which are not written
    again. Read through a `Trace` or a replay `Recording`, `entries` holds them all (`in_full`)."""

    version: ClassVar[int] = 2
    kind: Literal["ObservationCommitted"] = "ObservationCommitted"
    entries: tuple[HistoryEntry, ...] | None = None
    results: tuple[int, ...] | None = None


class HistoryCompressed(_Fact):
    """Reflecting replaced the history with one `[SUMMARY]` entry."""

    kind: Literal["HistoryCompressed"] = "HistoryCompressed"
    summary: HistoryEntry
    replaced: int


class ContextLimitReached(_Fact):
    """Planning found that the next request would not fit the context window: about `tokens`
    tokens (`provider` of them counted by the provider at the last call, the rest estimated)
    against `limit` (the window less the reserve for the answer). Reflecting compacts next."""

    kind: Literal["ContextLimitReached"] = "ContextLimitReached"
    tokens: int
    limit: int
    provider: int | None = None


class ContextCompacted(_Fact):
    """Reflecting cut history to fit the context window, in tiers, applied in this order:
    1. the observations at positions `truncated` keep their first `max_lines` lines;
    2. the entries at positions `dropped` (start, end) give way to the `note` entry;
    3. every observation left keeps at most `max_chars` characters.
    The reducer applies exactly these cuts (agentsm.window), so a fold reproduces them."""

    kind: Literal["ContextCompacted"] = "ContextCompacted"
    tokens_before: int
    tokens_after: int
    limit: int
    max_lines: int | None = None
    truncated: tuple[int, ...] = ()
    dropped: tuple[int, int] | None = None
    note: HistoryEntry | None = None
    max_chars: int | None = None


class ReflectionSkipped(_Fact):
    """Reflecting did not compress (empty history, failed call, no budget); history is kept."""

    kind: Literal["ReflectionSkipped"] = "ReflectionSkipped"
    reason: str


class AnswerRejected(_Fact):
    """A final answer was refused (shorter than `min_answer_length`)."""

    kind: Literal["AnswerRejected"] = "AnswerRejected"
    content: str
    reason: str


class FinalAnswerProduced(_Fact):
    """The LLM's final answer was accepted."""

    kind: Literal["FinalAnswerProduced"] = "FinalAnswerProduced"
    content: str


class RunFailed(_Fact):
    """The run cannot go on; `reason` is a code (max_steps, budget, llm_error, ...)."""

    kind: Literal["RunFailed"] = "RunFailed"
    reason: str
    message: str


class Transitioned(_Fact):
    """The engine moved from one state to the next through an event of the table. The state it
    left is the one that recorded the fact: the envelope holds it (`enveloped`), so the
    payload carries the event and the target only."""

    enveloped: ClassVar[dict[str, str]] = {"from_state": "state"}
    kind: Literal["Transitioned"] = "Transitioned"
    from_state: str
    event: str
    to_state: str


class RunFinished(_Fact):
    """The closing fact of a run, recorded by Done or Error."""

    kind: Literal["RunFinished"] = "RunFinished"
    status: Literal["done", "failed"]
    final_answer: str | None = None
    error: str | None = None


class RunBranched(_Fact):
    """This run continues another run's log from a branch point, with these changes."""

    kind: Literal["RunBranched"] = "RunBranched"
    parent_id: str
    parent_seq: int
    changes: tuple[str, ...] = ()
    config: AgentConfig | None = None
    tool_result: str | None = None
    """The observation the branch gave its next tool call, if it changed one: replay serves it
    even when it runs the tools again."""


DrawSource = Literal["now", "uuid", "random"]


class ValueDrawn(_Fact):
    """A handler read the clock, a fresh uuid or a random number through its context
    (`ctx.now()`, `ctx.uuid()`, `ctx.random()`); replay serves the value back by position."""

    kind: Literal["ValueDrawn"] = "ValueDrawn"
    source: DrawSource
    value: float | str


class PatchMarked(_Fact):
    """A handler took the new path of a deliberate change (`ctx.patched(change_id)`): from here
    on this run runs the new code, and its replays take that path too."""

    kind: Literal["PatchMarked"] = "PatchMarked"
    change_id: str


class RunAborted(_Fact):
    """A structural error stopped the engine; the run stays in its state."""

    kind: Literal["RunAborted"] = "RunAborted"
    error_type: str
    message: str


class Candidate(BaseModel):
    """One branch of a best-of-N judgement as the judge saw it: its run, its place among the
    variants (`index`, from 0), its label, model and changes, and how it ended."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    index: int
    run_id: str
    label: str = ""
    model: str = ""
    changes: tuple[str, ...] = ()
    status: str
    answer: str | None = None
    error: str | None = None
    steps: int = 0
    tokens: int = 0
    llm: JsonObject = Field(default_factory=dict)
    """The request settings of the LLM the variant brought (provider, temperature, ...)."""

    @property
    def finished(self) -> bool:
        """Whether it ended with an answer (status done): only such a candidate can win."""
        return self.status == "done" and self.answer is not None

    def __repr__(self) -> str:
        said = (self.answer if self.finished else self.error) or ""
        shown = said if len(said) <= 40 else said[:39] + "…"
        return (
            f"Candidate({self.index}, {self.run_id!r}, label={self.label!r}, "
            f"status={self.status!r}, {'answer' if self.finished else 'error'}={shown!r})"
        )


class CandidatesGathered(_Fact):
    """A best-of-N judgement began (the first fact after its RunStarted): the branches of
    `parent_id` from seq `parent_seq` that compete, how each ended, and who judges them."""

    kind: Literal["CandidatesGathered"] = "CandidatesGathered"
    parent_id: str
    parent_seq: int
    candidates: tuple[Candidate, ...]
    judge: str
    """"function module.name" or "llm MODEL"."""


class JudgeAsked(_Fact):
    """The judging LLM is about to be asked: the whole prompt it is sent (committed first)."""

    kind: Literal["JudgeAsked"] = "JudgeAsked"
    model: str
    system_prompt: str
    prompt: str


class JudgeAnswered(_Fact):
    """The judging LLM's response (its usage is summed into memory)."""

    kind: Literal["JudgeAnswered"] = "JudgeAnswered"
    response: LlmResponse


class CandidatePicked(_Fact):
    """The judgement's outcome: the candidate picked (its answer becomes this run's final
    answer), the judge's scores by candidate index (None where it gave none) and its reason."""

    kind: Literal["CandidatePicked"] = "CandidatePicked"
    index: int
    run_id: str
    answer: str
    label: str = ""
    scores: tuple[float | None, ...] = ()
    reason: str = ""


class PickRefused(_Fact):
    """No candidate was picked: `reason` is a code (no_finished_candidate, judge_error,
    bad_choice) and `message` says what the judge did."""

    kind: Literal["PickRefused"] = "PickRefused"
    reason: str
    message: str


Fact = Annotated[
    RunStarted
    | StepStarted
    | LlmRequested
    | LlmResponded
    | LlmFailed
    | ConfidenceLow
    | ToolsRejected
    | ToolCallsPlanned
    | ApprovalRequested
    | HumanDecided
    | QuestionAsked
    | HumanAnswered
    | Steered
    | StopRequested
    | ToolCallStarted
    | ToolExecuted
    | InputChecked
    | HookAborted
    | ToolCallVetoed
    | ToolCallRewritten
    | ObservationRewritten
    | ObservationCommitted
    | HistoryCompressed
    | ReflectionSkipped
    | ContextLimitReached
    | ContextCompacted
    | AnswerRejected
    | FinalAnswerProduced
    | RunFailed
    | Transitioned
    | RunFinished
    | RunBranched
    | PatchMarked
    | ValueDrawn
    | RunAborted
    | CandidatesGathered
    | JudgeAsked
    | JudgeAnswered
    | CandidatePicked
    | PickRefused,
    Field(discriminator="kind"),
]

FACTS = FactCodec(get_args(get_args(Fact)[0]))
"""Encodes facts (checking that each reads back as written) and decodes them, upcasting older
versions; upcasters are registered on it."""

FACT_ADAPTER: TypeAdapter[Fact] = FACTS.adapter


@FACTS.register("ToolCallStarted", 1)
@FACTS.register("ToolExecuted", 1)
def _call_named_in_full(old: dict[str, Any]) -> dict[str, Any]:
    """Version 1 wrote the whole call: its place (`index`) is left for the reducer to find."""
    return {k: v for k, v in old.items() if k != "index"}


@FACTS.register("ToolCallsPlanned", 1)
@FACTS.register("ObservationCommitted", 1)
def _written_in_full(old: dict[str, Any]) -> dict[str, Any]:
    """Version 1 wrote every call and entry in full, which version 2 still reads as such (it
    may name them instead: the plan response's calls, the step's results)."""
    return old


_P, _A, _PA = State.Planning, State.Acting, State.ParallelActing

JUDGING = "Judging"
"""The state name in the envelopes of a best-of-N judgement's facts (`replay.best_of`): no
state of the machine records them."""

OWNERS: dict[str, frozenset[str]] = {
    "RunStarted": frozenset({State.Idle}),
    "StepStarted": frozenset({_P}),
    "LlmRequested": frozenset({_P, State.Reflecting}),
    "LlmResponded": frozenset({_P, State.Reflecting}),
    "LlmFailed": frozenset({_P, State.Reflecting}),
    "ConfidenceLow": frozenset({_P}),
    "ToolsRejected": frozenset({_P}),
    "ToolCallsPlanned": frozenset({_P}),
    "ApprovalRequested": frozenset({_P, _A, _PA}),
    "AnswerRejected": frozenset({_P}),
    "FinalAnswerProduced": frozenset({_P}),
    "RunFailed": frozenset({_P, _A}),
    "HumanDecided": frozenset({State.WaitingForHuman}),
    "ToolCallStarted": frozenset({_A, _PA}),
    "ToolExecuted": frozenset({_A, _PA}),
    "InputChecked": frozenset({_P}),
    "HookAborted": frozenset({_P, State.Observing}),
    "ToolCallVetoed": frozenset({_A, _PA}),
    "ToolCallRewritten": frozenset({_A, _PA}),
    "ObservationRewritten": frozenset({_A, _PA}),
    "ObservationCommitted": frozenset({State.Observing}),
    "HistoryCompressed": frozenset({State.Reflecting}),
    "ReflectionSkipped": frozenset({State.Reflecting}),
    "ContextLimitReached": frozenset({_P}),
    "ContextCompacted": frozenset({State.Reflecting}),
    "RunFinished": frozenset({State.Done, State.Error}),
    "CandidatesGathered": frozenset({JUDGING}),
    "JudgeAsked": frozenset({JUDGING}),
    "JudgeAnswered": frozenset({JUDGING}),
    "CandidatePicked": frozenset({JUDGING}),
    "PickRefused": frozenset({JUDGING}),
}
"""Which built-in state may record which fact. Transitioned, RunBranched, RunAborted, Steered and
StopRequested are the engine's; QuestionAsked and HumanAnswered any state's (`ctx.ask`); the
judgement facts (CandidatesGathered ... PickRefused) are best-of-N's, recorded in a judgement
run of their own, never by a state of the machine.
Custom states (names outside `State`) are not restricted, unless their handler declares
`records`: then they record only what it lists. The user's own facts (`AgentBuilder.fact`) are
recorded only by states whose handler declares them (see `agentsm.custom`)."""
