"""What the run catalog keeps of a run (its `RunSummary`), computed from memory in one place.

The recorder writes `summary_of(memory, ...)` with each commit that changes it, so a listing
reads the catalog and never folds a log. Runs logged before the catalog kept summaries are
folded once by `backfill`, which the command line runs when it opens a log it may write.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from eventstore import EventStore, RunSummary, StoreError
from eventstore.records import SUMMARY_TEXT

from . import facts as f
from .errors import UnreadableFact
from .facts import Fact
from .memory import AgentMemory, fold
from .reading import decode

__all__ = [
    "PRICES",
    "CatalogFacts",
    "backfill",
    "catalog_of",
    "cost_of",
    "summary_of",
    "summary_of_facts",
]

PRICES: dict[str, tuple[float, ...]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
    "claude-3-5-haiku": (0.80, 4.00, 0.08, 1.00),
    "claude-3-5-sonnet": (3.00, 15.00, 0.30, 3.75),
    "claude-haiku-4-5": (1.00, 5.00, 0.10, 1.25),
    "claude-sonnet-4": (3.00, 15.00, 0.30, 3.75),
    "claude-opus-4": (15.00, 75.00, 1.50, 18.75),
    "claude-opus-4-5": (5.00, 25.00, 0.50, 6.25),
    "claude-opus-4-6": (5.00, 25.00, 0.50, 6.25),
    "gemini-2.5-pro": (1.25, 10.00),
    "gemini-2.5-flash": (0.30, 2.50),
    "nova-micro": (0.035, 0.14),
    "nova-lite": (0.06, 0.24),
    "nova-pro": (0.80, 3.20),
}
"""USD per million tokens, by model name prefix (the longest prefix that matches wins, so
dated names like `gpt-4o-2024-08-06` are priced): input, output, and, where the provider
counts prompt-cache reads and writes apart from the input (Anthropic), cache reads and cache
writes (5-minute writes). Add your own models' prices here; a model not listed gets no cost
(None), never a guessed one, and cache tokens of a model without their prices are not
priced. A model id as Amazon Bedrock names it (`us.anthropic.claude-sonnet-4-...-v1:0`,
`amazon.nova-micro-v1:0`) is priced by the model's own name."""

_HOSTED = re.compile(r"^(?:(?:us|eu|apac|jp|au|global|us-gov)\.)?(?:anthropic|amazon)\.")
"""The region and vendor parts of a Bedrock model id, before the model's own name."""


def cost_of(
    model: str | None,
    input_tokens: int,
    output_tokens: int,
    cache_read_tokens: int = 0,
    cache_write_tokens: int = 0,
) -> float | None:
    """The USD cost of these tokens on `model`, or None when its price is not in `PRICES`."""
    if not model:
        return None
    model = _HOSTED.sub("", model)
    known = [name for name in PRICES if model.startswith(name)]
    if not known:
        return None
    per_in, per_out, *cached = PRICES[max(known, key=len)]
    total = input_tokens * per_in + output_tokens * per_out
    if len(cached) == 2:
        total += cache_read_tokens * cached[0] + cache_write_tokens * cached[1]
    return round(total / 1_000_000, 8)


def _start(text: str | None) -> str | None:
    return text[:SUMMARY_TEXT] if text is not None else None


def summary_of(memory: AgentMemory, model: str | None = None) -> RunSummary:
    """What the catalog keeps of a run whose memory is `memory`: steps, tokens, cost where the
    price is known, the model (`model`, else the one the config names for the task type), the
    start of the final answer and of the error."""
    name = model or memory.config.model_for(memory.task_type) or None
    usage = memory.total_usage
    return RunSummary(
        steps=memory.step,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cost=cost_of(
            name,
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
        ),
        model=name,
        answer=_start(memory.final_answer),
        error=_start(memory.error),
    )


def summary_of_facts(facts: Iterable[Fact]) -> RunSummary:
    """The summary of a run from its facts (a fold): what `summary_of` gave when it was
    recorded, for runs logged before the catalog kept summaries."""
    recorded = list(facts)
    models = [x.model for x in recorded if isinstance(x, f.LlmRequested) and x.model]
    return summary_of(fold(recorded), models[-1] if models else None)


@runtime_checkable
class _Summarized(Protocol):
    """A store whose catalog says which runs have no summary and takes one (SQLite and
    PostgreSQL)."""

    read_only: bool

    def unsummarized(self) -> list[str]: ...

    def set_summary(self, run_id: str, summary: RunSummary) -> None: ...


@dataclass(frozen=True)
class CatalogFacts:
    """What a run's facts say of its catalog entry (`catalog_of`): all of it but the times, and
    the status of a run that stopped mid-way (running, waiting, stopped, queued...), which
    only its driver knew."""

    task: str
    status: str | None
    """"done" or "failed" (its RunFinished), "aborted" (its last fact is RunAborted); None
    for a run whose facts do not close it."""
    parent_id: str | None
    branch_seq: int | None
    info: dict[str, Any] = field(default_factory=dict)
    summaries: tuple[RunSummary, ...] = ()
    """The summary as its recorder writes it (the model its config names), then as `backfill`
    writes it (the model it last asked): a catalog holds one or the other."""

    def __repr__(self) -> str:
        parent = f", parent_id={self.parent_id!r}@{self.branch_seq}" if self.parent_id else ""
        return f"CatalogFacts(task={self.task!r}, status={self.status!r}{parent})"


def catalog_of(facts: Sequence[Fact]) -> CatalogFacts:
    """The catalog entry a run's facts (all of them, in order) make: the task of its
    RunStarted; its status if a closing fact ends it; its parent and branch point (the last
    RunBranched of a branch, the CandidatesGathered of a best-of judgement, the parent call of
    a sub-agent run, the turn before a thread's turn); its info (a sub-agent run's tool and
    parent, even in a branch of one; a judgement's mark; a thread's turn, even in a branch of
    one); and its summary. `ValueError` if it does not begin with RunStarted."""
    first = facts[0] if facts else None
    if not isinstance(first, f.RunStarted):
        raise ValueError("a run's facts must begin with RunStarted")
    last = facts[-1]
    status = (
        last.status
        if isinstance(last, f.RunFinished)
        else "aborted"
        if isinstance(last, f.RunAborted)
        else None
    )
    info: dict[str, Any] = {}
    parent: tuple[str | None, int | None] = (None, None)
    call = first.parent_call
    if call is not None:
        info = {"subagent": {"parent": call.run_id, "tool": call.tool}}
        parent = (call.run_id, call.seq)
    turn = first.thread
    if turn is not None:  # a turn of a thread: after the turn before it, at its end
        info = turn.info()
        parent = (turn.previous, turn.previous_seq)
    gathered = facts[1] if len(facts) > 1 else None
    if isinstance(gathered, f.CandidatesGathered):
        info = {"judgement": True}
        parent = (gathered.parent_id, gathered.parent_seq)
    branched = [x for x in facts if isinstance(x, f.RunBranched)]
    if branched:
        parent = (branched[-1].parent_id, branched[-1].parent_seq)
    memory = fold(facts)
    models = [x.model for x in facts if isinstance(x, f.LlmRequested) and x.model]
    summaries = (summary_of(memory), summary_of(memory, models[-1] if models else None))
    return CatalogFacts(first.task, status, *parent, info, summaries)


def backfill(store: EventStore) -> int:
    """Fold, once, every run of a log (SQLite or PostgreSQL) that has facts but no summary in
    the catalog (logged by an older release, or imported), write its summary, and return how
    many were written. A run whose facts cannot be decoded gets an empty summary (it is not
    tried again; `agentsm show` names what cannot be read). A store opened read-only, or one
    with no catalog to fill (a scratch store), is left as it is."""
    if not isinstance(store, _Summarized) or store.read_only:
        return 0
    written = 0
    for run_id in store.unsummarized():
        try:
            summary = summary_of_facts(decode(e) for e in store.read(run_id))
        except (UnreadableFact, StoreError):
            summary = RunSummary()
        store.set_summary(run_id, summary)
        written += 1
    return written
