"""AgentMemory, the agent's world-state, and the fold: the reducers are the only code changing it.

Memory is never stored: `fold(facts)` rebuilds it from a run's log, and `apply(memory, fact)`
advances it by one fact. Each reducer (in `reducers`) is a small pure function returning a new
frozen value, found by the type of its fact (`reducing`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import chain
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, field_serializer

from . import facts as f
from . import reducers  # noqa: F401 - registers the reducer of each kind of fact
from .custom import Parts
from .digests import digest, history_digest
from .facts import FACTS
from .frozen import FrozenDict, same_json
from .history import History
from .images import Image
from .messages import add_entry, earlier, flush_turn, image_part, with_images
from .places import as_stored, committed_entries, in_full, result_places
from .reading import CHUNK, SHARED, bulk_reading, parsed_meta, row_chunks
from .reducing import keeps_memory, reduce_fact, reducer_of
from .skills import with_skill_index
from .text import plural
from .types import (
    AgentConfig,
    HistoryEntry,
    ReasoningPart,
    State,
    TokenBudget,
    TokenUsage,
    ToolCall,
    ToolResult,
    as_state,
)

if TYPE_CHECKING:
    from eventstore import EventStore

__all__ = [
    "AgentMemory",
    "apply",
    "as_stored",
    "committed_entries",
    "fold",
    "fold_log",
    "fold_with_state",
    "in_full",
    "initial_memory",
    "result_places",
    "scan",
]


class AgentMemory(BaseModel):
    """The agent's entire world-state, a projection of the log (frozen: handlers record facts).

    `planned_calls` are the calls Planning chose and Observing clears; `results` their outcomes;
    `rejected` the calls Planning refused, shown to the LLM until Observing commits them;
    `decisions` the human's verdicts on them; `awaiting` the positions (in `planned_calls`) of
    the calls waiting for a decision; `started` the positions recorded as started and not (yet)
    as executed, oldest first; `refused_answers` the (answer, reason) pairs Planning did not
    accept, shown to the LLM until Observing commits the next step. Calls are tracked by their
    position, never by the id the LLM gave: ids repeat across responses, even within one.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    task: str
    task_type: str = "default"
    system_prompt: str = ""
    step: int = 0
    retry_count: int = 0
    confidence_score: float = 1.0
    total_usage: TokenUsage = TokenUsage()
    budget: TokenBudget | None = None
    planned_calls: tuple[ToolCall, ...] = ()
    parallel: bool = False
    planned_text: str | None = None
    planned_reasoning: tuple[ReasoningPart, ...] = ()
    results: tuple[ToolResult, ...] = ()
    awaiting: tuple[int, ...] = ()
    approval_reason: str = "approval"
    decisions: tuple[f.Decision, ...] = ()
    started: tuple[int, ...] = ()
    rejected: tuple[HistoryEntry, ...] = ()
    refused_answers: tuple[tuple[str, str], ...] = ()
    history: History = History()
    history_digest: str = ""
    final_answer: str | None = None
    error: str | None = None
    config: AgentConfig = AgentConfig()
    blacklisted_tools: frozenset[str] = frozenset()
    approval_required: frozenset[str] = frozenset()
    patches: frozenset[str] = frozenset()
    context_mark: tuple[int, int] | None = None
    """With a context window: the provider's count of the last planning request and the
    estimate of its messages then, which `agentsm.window` counts the next request from."""
    context_full: int | None = None
    """The tokens of a request found too large for the context window since the last step
    started (None: none); Reflecting compacts then, and Planning fails if it still does not fit."""
    parts: Parts = FrozenDict()
    """The user-declared parts of memory (`AgentBuilder.fact`), by name: read-only JSON values
    (arrays as tuples) that only the reducers of the user's own facts change."""
    own_calls: tuple[ToolCall, ...] = ()
    """The calls handlers ran this step that are not planned (their own), in the order they
    started: they take the places after the planned calls (see `call_at`)."""
    offered_calls: tuple[ToolCall, ...] = ()
    offered_text: str | None = None
    offered_reasoning: tuple[ReasoningPart, ...] = ()
    """The calls, text and reasoning of the step's plan response: a plan of them names them,
    without writing them again (`ToolCallsPlanned.calls` None)."""
    carried: int = 0
    """For a turn of a thread: how many entries at the head of `history` come from the turns
    before it (the conversation so far); the LLM is sent them before the task, the task being
    this turn's user message. 0 for any other run."""
    steered: tuple[HistoryEntry, ...] = ()
    """Messages a person sent the run (`Steered`) while a step's calls were under way: the LLM
    is sent them after everything else; Observing puts them into history after the step's
    entries. A message sent between steps goes into history at once."""
    question_tools: frozenset[str] = frozenset()
    """The tools whose calls are questions to a person (`AgentBuilder.ask_human`)."""
    asked: tuple[tuple[str, str | None], ...] = ()
    """The questions handlers asked a person (`ctx.ask`), in order, each with its answer
    (None: not answered yet)."""
    images: tuple[Image, ...] = ()
    """The images that come with the task (`RunStarted.images`), sent with it."""
    user_messages: int = 1
    """How many messages from the user the run has: its task, then each message sent while
    it went on (`Steered`)."""
    checked_messages: int = 0
    """How many of those the input guards have checked (`InputChecked`), oldest first."""

    def part(self, name: str) -> Any:
        """The value of the user-declared part `name` (see `AgentBuilder.fact`)."""
        try:
            return self.parts[name]
        except KeyError:
            known = ", ".join(map(repr, sorted(self.parts))) or "none"
            raise KeyError(
                f"This run has no part {name!r} (its parts: {known}); declare it by registering "
                f"a fact with AgentBuilder.fact(..., part={name!r}, initial=...)."
            ) from None

    @field_serializer(
        "blacklisted_tools", "approval_required", "patches", "question_tools", when_used="json"
    )
    def _sorted(self, names: frozenset[str]) -> list[str]:
        """Sets as sorted lists in JSON: their own order changes from one process to the next."""
        return sorted(names)

    # -- the specification's names for the tool-call lifecycle -------------------------------

    @property
    def current_tool_call(self) -> ToolCall | None:
        """The first planned call (the only one, outside parallel batches)."""
        return self.planned_calls[0] if self.planned_calls else None

    @property
    def pending_tool_calls(self) -> tuple[ToolCall, ...]:
        """Every planned call, in the LLM's order."""
        return self.planned_calls

    @property
    def last_observation(self) -> str | None:
        """The observation of the latest result not yet committed to history."""
        return self.results[-1].observation if self.results else None

    @property
    def parallel_results(self) -> tuple[ToolResult, ...]:
        """Results of the planned calls so far."""
        return self.results

    @property
    def pending_approval(self) -> tuple[str, ...]:
        """The ids of the calls waiting for a human decision, in the LLM's order."""
        return tuple(c.id for c in self.awaiting_approval())

    @property
    def in_flight(self) -> tuple[str, ...]:
        """The ids of the calls recorded as started and not (yet) as executed."""
        return tuple(self.planned_calls[i].id for i in sorted(self.started))

    def awaiting_approval(self) -> tuple[ToolCall, ...]:
        """Planned calls that wait for a human decision, in the LLM's order."""
        return tuple(self.planned_calls[i] for i in sorted(self.awaiting))

    def unfinished(self) -> tuple[int, ...]:
        """Positions of the planned calls that have no result yet (neither run nor rejected)."""
        done = {r.index for r in self.results}
        return tuple(i for i in range(len(self.planned_calls)) if i not in done)

    def unfinished_calls(self) -> tuple[ToolCall, ...]:
        """Planned calls that have no result yet (neither run nor rejected)."""
        return tuple(self.planned_calls[i] for i in self.unfinished())

    def interrupted(self) -> tuple[int, ...]:
        """Positions of unfinished calls that were started: the process stopped while they ran."""
        return tuple(i for i in self.unfinished() if i in self.started)

    def _unfinished_alike(self, call: ToolCall) -> list[int]:
        """Positions of the planned calls equal to `call` (as JSON: 1 is not true) that have
        no result yet."""
        done = {r.index for r in self.results}
        return [
            i
            for i, planned in enumerate(self.planned_calls)
            if i not in done and (planned is call or same_json(planned, call))
        ]

    def next_place(self) -> int:
        """The place a handler's own call (not a planned one) takes in this step: after the
        planned calls and the own calls started before it."""
        return len(self.planned_calls) + len(self.own_calls)

    def start_position(self, call: ToolCall) -> int | None:
        """The planned position a call about to start takes, None when it is not a planned
        call: the first planned call equal to it with no result that has not started, else
        the oldest started one (run again after a stop)."""
        same = self._unfinished_alike(call)
        fresh = next((i for i in same if i not in self.started), None)
        if fresh is not None:
            return fresh
        return next((i for i in self.started if i in same), None)

    def result_position(self, call: ToolCall) -> int | None:
        """The planned position a result for `call` belongs to, None when it is not a planned
        call: the oldest started call equal to it with no result, else the first such call."""
        same = self._unfinished_alike(call)
        return next((i for i in self.started if i in same), same[0] if same else None)

    def call_at(self, index: int) -> ToolCall | None:
        """The call at place `index` of this step: a planned call, else (past the plan) a
        handler's own; None when there is none."""
        planned = len(self.planned_calls)
        if 0 <= index < planned:
            return self.planned_calls[index]
        own = index - planned
        return self.own_calls[own] if 0 <= own < len(self.own_calls) else None

    def decision_targets(self, decisions: Iterable[f.Decision]) -> tuple[int | None, ...]:
        """The position each decision applies to, in order: its `index` when it names a waiting
        call, else the first waiting call with its id not taken by an earlier one (None when it
        matches no waiting call)."""
        left = sorted(self.awaiting)
        targets: list[int | None] = []
        for d in decisions:
            if d.index is not None:
                target = d.index if d.index in left else None
            else:
                target = next((i for i in left if self.planned_calls[i].id == d.call_id), None)
            if target is not None:
                left.remove(target)
            targets.append(target)
        return tuple(targets)

    # -- what the LLM is sent ----------------------------------------------------------------

    def build_messages(self) -> list[dict[str, Any]]:
        """A provider-neutral conversation: system prompt, task, then each step's tool calls
        (one assistant turn with call ids) and their results; `[SUMMARY]` as readable context.
        In a turn of a thread, the conversation before it comes first (after the system
        prompt): each earlier user message, the tool calls of its turn, and its answer, as
        plain user and assistant messages; then the task, this turn's message.

        An assistant turn whose response came with reasoning has it under `reasoning`, a list
        of `ReasoningPart`s as JSON (kind, text, provider, native), in the order returned: a
        caller sends back the `native` form of the parts its own provider made.

        A user message (the task, an earlier message of a thread) or a tool result with images
        has them under `images`, in order, each as `{"media_type", "url"}` or `{"media_type",
        "digest", "data"}`, `data` being the bytes where they were found (the engine finds
        them before each LLM call: `images_sent`)."""
        messages: list[dict[str, Any]] = []
        if self.system_prompt:
            messages.append({"role": "system", "content": self.system_prompt})
        turn: list[HistoryEntry] = []
        carried = self.carried
        if carried:
            for entry in self.history[:carried]:
                said = entry.said
                if said is None:
                    add_entry(entry, turn, messages)
                    continue
                flush_turn(turn, messages)
                messages.append(with_images({"role": said, "content": earlier(entry)}, entry))
            flush_turn(turn, messages)
        task: dict[str, Any] = {"role": "user", "content": self.task}
        if self.images:
            task["images"] = [image_part(i) for i in self.images]
        messages.append(task)
        later = self.history[carried:] if carried else self.history
        for entry in (*later, *self.rejected):
            add_entry(entry, turn, messages)
        flush_turn(turn, messages)
        for answer, reason in self.refused_answers:
            messages.append({"role": "assistant", "content": answer or "(empty answer)"})
            messages.append(
                {
                    "role": "user",
                    "content": f"That answer was not accepted: {reason}. Please answer fully.",
                }
            )
        for entry in self.steered:
            messages.append({"role": "user", "content": entry.observation})
        return messages

    def messages_digest(self) -> str:
        """A digest of what `build_messages()` gives, in constant time per step."""
        rejected = [e.model_dump(mode="json") for e in self.rejected]
        refused = [list(pair) for pair in self.refused_answers]
        shown: list[Any] = [self.system_prompt, self.task, self.history_digest, rejected, refused]
        if self.carried:  # where the task stands among the entries (a thread's turn only)
            shown.append(self.carried)
        if self.steered:  # messages sent while the step's calls ran (a steered run only)
            shown.append([e.observation for e in self.steered])
        if self.images:  # the task's images (a run with images only)
            shown.append({"images": [i.model_dump(mode="json") for i in self.images]})
        return digest(shown)

    def images_sent(self) -> list[Image]:
        """The images `build_messages()` sends: the task's, then those of history (a tool's,
        an earlier message's), in order."""
        found = list(self.images)
        history = self.history
        if isinstance(history, History):
            found.extend(history.images())
        else:
            for entry in history:
                found.extend(entry.images)
        return found

    @classmethod
    def rebuild(cls, store: EventStore, run_id: str) -> tuple[AgentMemory, str]:
        """Memory and state of a run, rebuilt from its log alone."""
        return fold_log(store, run_id)

    def __repr__(self) -> str:
        entries = plural(len(self.history), "entry", "entries")
        return (
            f"AgentMemory(task={self.task[:40]!r}, step={self.step}, "
            f"history={entries}, final_answer={self.final_answer!r:.50}, "
            f"error={self.error!r}, usage={plural(self.total_usage.total_tokens, 'token')}"
            + (f", parts={sorted(self.parts)})" if self.parts else ")")
        )


def apply(memory: AgentMemory, fact: Any) -> AgentMemory:
    """Memory after one more fact. Facts that change nothing return memory as it is."""
    reduced: AgentMemory = reducer_of(type(fact))(fact, memory)
    return reduced


def initial_memory(fact: f.RunStarted) -> AgentMemory:
    """The memory a run starts with, from its RunStarted fact (a thread's turn starts with
    the conversation before it as history)."""
    carried: dict[str, Any] = {}
    if fact.conversation:
        carried = {
            "history": History(fact.conversation),
            "history_digest": history_digest("", fact.conversation),
            "carried": len(fact.conversation),
        }
    if fact.questions:
        carried["question_tools"] = frozenset(fact.questions)
    if fact.images:
        carried["images"] = fact.images
    return AgentMemory(
        **carried,
        task=fact.task,
        task_type=fact.task_type,
        system_prompt=with_skill_index(fact.system_prompt, fact.skills),
        config=fact.config,
        budget=fact.budget,
        blacklisted_tools=frozenset(fact.blacklisted_tools),
        approval_required=frozenset(fact.approval_required),
        parts=fact.parts or FrozenDict(),
    )


@reduce_fact.register(f.RunStarted)
def _(fact: f.RunStarted, memory: AgentMemory) -> AgentMemory:
    """A RunStarted starts memory afresh (registered here, where memory is made)."""
    return initial_memory(fact)


def _begin(facts: Iterator[Any]) -> tuple[f.RunStarted, AgentMemory]:
    """The run's first fact, which must be RunStarted, and the memory it starts."""
    first = next(facts, None)
    if not isinstance(first, f.RunStarted):
        raise ValueError(
            f"A run's log must begin with RunStarted, not {first!r}; this is not a complete run."
        )
    return first, initial_memory(first)


def scan(
    facts: Iterable[Any], memory: AgentMemory | None = None, state: str = State.Idle
) -> Iterator[tuple[Any, AgentMemory, str]]:
    """Each fact with the memory and state right after it, in one pass (`fold` keeps only the
    last). Without `memory` the first fact must be RunStarted; with it, the facts continue
    from that memory and state."""
    iterator = iter(facts)
    if memory is None:
        first, memory = _begin(iterator)
        yield first, memory, state
    for fact in iterator:
        memory = apply(memory, fact)
        if isinstance(fact, f.Transitioned):
            state = as_state(fact.to_state)
        yield fact, memory, state


def fold(facts: Iterable[Any]) -> AgentMemory:
    """Memory after every fact of a run, in order; the first fact must be RunStarted."""
    return fold_with_state(facts)[0]


def fold_with_state(facts: Iterable[Any]) -> tuple[AgentMemory, str]:
    """Memory and current state after every fact of a run."""
    iterator = iter(facts)
    _, memory = _begin(iterator)
    state: str = State.Idle
    for fact in iterator:
        memory = apply(memory, fact)
        if isinstance(fact, f.Transitioned):
            state = as_state(fact.to_state)
    return memory, state


def fold_log(store: EventStore, run_id: str) -> tuple[AgentMemory, str]:
    """Memory and state of a run folded from its log, decoding only what the fold needs:
    facts that leave memory as it is are not decoded (only checked to be of a kind and
    version this code reads), a transition gives its target, and a short payload met before
    is decoded once."""
    with bulk_reading():  # a fold makes no cycles: the collector would look for them in vain
        return _fold_rows(run_id, chain.from_iterable(row_chunks(store, run_id)))


def _fold_rows(
    run_id: str, rows: Iterator[tuple[int, str, int, str, Any, float, str | None]]
) -> tuple[AgentMemory, str]:
    """`fold_log` of the run's checked rows."""
    first = next(rows, None)
    if first is None:
        raise ValueError(f"Run {run_id} has no facts; this is not a complete run.")
    seq, kind, version, payload, meta, _, _ = first
    envelope = parsed_meta(meta)
    started = FACTS.decode(
        payload,
        kind,
        version,
        run_id=run_id,
        seq=seq,
        custom=seq > 1 or envelope.get("custom") is True,
        meta=envelope,
    )
    if not isinstance(started, f.RunStarted):
        raise ValueError(
            f"A run's log must begin with RunStarted, not {started!r}; this is not a complete run."
        )
    memory = initial_memory(started)
    state: str = State.Idle
    memo: dict[tuple[str, int, str], Any] = {}
    targets: dict[tuple[int, str], str] = {}
    ways: dict[str, int] = {}  # per kind, how the fold takes its facts (`_way`)
    decode, versions, reducer = FACTS.decode, FACTS.versions, reducer_of
    for seq, kind, version, payload, meta, _, _ in rows:
        way = ways.get(kind)
        if way is None:
            way = ways[kind] = _way(kind)
        if way == _MOVE:
            target = targets.get((version, payload))
            if target is None:
                moved = decode(
                    payload, kind, version, run_id=run_id, seq=seq, meta=parsed_meta(meta)
                )
                target = targets[(version, payload)] = as_state(moved.to_state)
            state = target
            continue
        if way == _LEAVE:
            if version > versions[kind]:
                decode(payload, kind, version, run_id=run_id, seq=seq)  # raises
            continue
        # past RunStarted, a kind this process does not know is a user's own (UnknownFact)
        if way == _ENVELOPED:
            fact = decode(
                payload,
                kind,
                version,
                run_id=run_id,
                seq=seq,
                custom=True,
                meta=parsed_meta(meta),
            )
        elif len(payload) <= SHARED:
            key = (kind, version, payload)
            fact = memo.get(key)
            if fact is None:
                if len(memo) >= CHUNK:
                    memo.clear()
                fact = memo[key] = decode(
                    payload, kind, version, run_id=run_id, seq=seq, custom=True
                )
        else:
            fact = decode(payload, kind, version, run_id=run_id, seq=seq, custom=True)
        memory = reducer(type(fact))(fact, memory)  # `apply`
    return memory, state


_MOVE, _LEAVE, _ENVELOPED, _DECODE = range(4)


def _way(kind: str) -> int:
    """How `fold_log` takes a fact of `kind` after the first: a transition by its target, a
    kind that leaves memory as it is undecoded, one that takes fields from its envelope
    decoded with it, any other decoded (once per short payload)."""
    if kind == "Transitioned":
        return _MOVE
    model = FACTS.models.get(kind)
    if model is not None and keeps_memory(model):
        return _LEAVE
    return _ENVELOPED if FACTS.enveloped(kind) else _DECODE
