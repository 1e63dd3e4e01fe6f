"""What the run catalog keeps of a run (its `RunSummary`), computed from memory in one place.

The recorder writes `summary_of(memory, ...)` with each commit that changes it, so a listing
reads the catalog and never folds a log. Runs logged before the catalog kept summaries are
folded once by `backfill`, which the command line runs when it opens a log it may write.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from eventstore import EventStore, RunSummary, StoreError
from eventstore.records import SUMMARY_TEXT

from . import facts as f
from .errors import UnreadableFact
from .facts import Fact
from .memory import AgentMemory, fold
from .trace import decode

__all__ = ["PRICES", "backfill", "cost_of", "summary_of", "summary_of_facts"]

PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
    "claude-3-5-haiku": (0.80, 4.00),
    "claude-3-5-sonnet": (3.00, 15.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-opus-4": (15.00, 75.00),
}
"""USD per million input and output tokens, by model name prefix (the longest prefix that
matches wins, so dated names like `gpt-4o-2024-08-06` are priced). Add your own models' prices
here; a model not listed gets no cost (None), never a guessed one."""


def cost_of(model: str | None, input_tokens: int, output_tokens: int) -> float | None:
    """The USD cost of these tokens on `model`, or None when its price is not in `PRICES`."""
    if not model:
        return None
    known = [name for name in PRICES if model.startswith(name)]
    if not known:
        return None
    per_in, per_out = PRICES[max(known, key=len)]
    return round((input_tokens * per_in + output_tokens * per_out) / 1_000_000, 8)


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
        cost=cost_of(name, usage.input_tokens, usage.output_tokens),
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
