"""The catalog entry of an imported run, taken from its facts: an export's run line is checked
against what the run's (hash-checked) facts say, and a line that says otherwise is refused.

The facts decide the task, the status of a run they close (done, failed, aborted), the parent
and branch point, the info, and the summary (steps, tokens, model, the start of the answer and
of the error, and the cost where this process has the model's price). They do not decide:

- `created_at`: when the source entered the run in its catalog (a branch is entered after the
  facts it copies were recorded, and clocks are injectable), taken from the line;
- the status of a run that stopped mid-way (running, waiting, stopped, queued...): what its
  driver knew, taken from the line if it is such a status (a run whose facts do not close it
  is never imported as done, failed or aborted);
- the cost: priced here from the facts' tokens (`agentsm.catalog.PRICES`), whatever the
  line says (prices change between releases); none for a model this process has no price for.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from agentsm.catalog import CatalogFacts, catalog_of
from agentsm.facts import Fact
from eventstore import RunSummary

__all__ = ["MIDWAY", "Entry", "vouched"]

MIDWAY = frozenset(
    {"created", "queued", "running", "waiting", "ready", "stopped", "interrupted", "imported"}
)
"""The statuses of a run that stopped before a closing fact (taken from the line)."""

_SUMMARY = ("answer", "error", "model", "cost", "steps", "input_tokens", "output_tokens")
"""The summary's fields in the order a disagreement is named."""


@dataclass(frozen=True)
class Entry:
    """What an import writes in the catalog for one run."""

    task: str
    parent_id: str | None
    branch_seq: int | None
    info: dict[str, Any]
    status: str | None
    created_at: float | None
    summary: RunSummary

    def __repr__(self) -> str:
        return f"Entry(task={self.task!r}, status={self.status!r}, {self.summary!r})"


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:40] + "…")
    return json.dumps(value, sort_keys=True)


def _disagree(field: str, line: Any, facts: Any) -> ValueError:
    return ValueError(
        f"the export's header says {field} {_shown(line)} but its facts say {_shown(facts)}"
    )


def _summary(line: dict[str, Any] | None, candidates: Sequence[RunSummary]) -> RunSummary:
    """The line's summary where it is one the facts make, else `ValueError` naming the first
    field that differs; without one, the summary the facts make (as `backfill` writes it)."""
    if line is None:
        return candidates[-1]
    said = RunSummary(**line)
    facts = next((c for c in candidates if c.model == said.model), candidates[0])
    if facts.model == said.model:  # the cost is priced here, from the facts' tokens: a line
        said = replace(said, cost=facts.cost)  # priced by another release's table is not a lie
    for name in _SUMMARY:
        if getattr(said, name) != getattr(facts, name):
            prices = " (at the prices of agentsm.catalog.PRICES here)" if name == "cost" else ""
            error = _disagree(name, getattr(said, name), getattr(facts, name))
            raise ValueError(f"{error}{prices}")
    return said


def vouched(item: dict[str, Any], facts: Sequence[Fact], *, stated: bool) -> Entry:
    """The catalog entry of a run whose export line is `item` and whose facts (all of them,
    checked) are `facts`; `ValueError` naming the field, what the line says and what the
    facts say where they disagree. `stated`: the line states how many facts follow; an export
    made before lines did may be cut off, so its run is imported with status "imported" and
    the summary of the facts it holds (its line's status and summary are not compared)."""
    said = catalog_of(facts)
    for name, line, fact in (
        ("task", item.get("task"), said.task),
        ("parent_id", item.get("parent_id"), said.parent_id),
        ("branch_seq", item.get("branch_seq"), said.branch_seq),
        ("info", item.get("info") or {}, said.info),
    ):
        if line != fact:
            raise _disagree(name, line, fact)
    created = item.get("created_at")
    if created is not None and (isinstance(created, bool) or not isinstance(created, int | float)):
        raise ValueError(f"a run's created_at must be a number (seconds), not {_shown(created)}")
    if not stated:  # its facts may stop short of the run its line describes: neither is used
        return Entry(*_fixed(said), "imported", created, said.summaries[-1])
    status = item.get("status")
    if said.status is not None and status != said.status:
        raise _disagree("status", status, said.status)
    if said.status is None and status not in MIDWAY:
        raise ValueError(
            f"the export's header says status {_shown(status)} but its facts say the run did "
            f"not finish (its last fact is {facts[-1].kind})"
        )
    summary = _summary(item.get("summary"), said.summaries)
    return Entry(*_fixed(said), status, created, summary)


def _fixed(said: CatalogFacts) -> tuple[str, str | None, int | None, dict[str, Any]]:
    return said.task, said.parent_id, said.branch_seq, said.info
