"""Context limits: how many tokens the next request takes, and how history is cut to fit.

The count of a request is the provider's count of the last planning request (the
`input_tokens`, plus cache reads and writes, of its recorded `LlmResponded`: counted
generously, since Anthropic leaves cached tokens out of `input_tokens`) plus an estimate of
what changed since; without a provider count, the estimate of the whole request. The
estimate is the length of the messages and tool schemas as compact JSON divided by
`CHARS_PER_TOKEN` (4), rounded up: a rough, deterministic rule, which reads nothing but memory,
so a replay counts the same.

When a request would not fit (`AgentConfig.context_limit()`), Planning records
`ContextLimitReached` and Reflecting cuts history in tiers, as the phi-core peer does, each
only if the one before was not enough:

1. old tool outputs (all but the last step's) keep their first `tool_output_max_lines` lines;
2. the oldest steps are dropped, a note saying which ones taking their place (a `[SUMMARY]`
   at the head of history is kept);
3. every output left is cut to the most characters that fit.

In a turn of a thread, the conversation before it (`AgentMemory.carried`) is cut the same
way, oldest first: its tool outputs in tier 1 (its messages and answers are not tool
outputs), whole earlier turns (message, calls, answer) in tier 2, and everything in tier 3.
The turn's own last step is kept from tiers 1 and 2, or, before it has one, the last turn.

The cut is recorded as one `ContextCompacted` fact and applied by its reducer (`compacted`), so
a fold, a replay and a branch reproduce it exactly. `cut_lines` and `cut_chars` are part of
what the fact means: a change to them needs a new version of `ContextCompacted` (an upcaster).
Nothing is cut when even tier 3 cannot make the request fit: Planning then fails the run
cleanly, saying so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .history import History
from .types import SUMMARY_TOOL, HistoryEntry, TokenUsage, ToolCall, ToolSchema

if TYPE_CHECKING:
    from .facts import ContextCompacted
    from .memory import AgentMemory

__all__ = [
    "CHARS_PER_TOKEN",
    "ContextEstimate",
    "carried_after",
    "compacted",
    "compaction",
    "cut_chars",
    "cut_lines",
    "estimate_request",
    "estimate_tokens",
    "message_tokens",
    "prompt_tokens",
    "schema_tokens",
]

CHARS_PER_TOKEN = 4
"""About four characters of English text or JSON per token: the usual rule of thumb."""


def estimate_tokens(text: str) -> int:
    """The estimated tokens of a text: its length / `CHARS_PER_TOKEN`, rounded up."""
    return -(-len(text) // CHARS_PER_TOKEN)


def _json(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def message_tokens(memory: AgentMemory) -> int:
    """The estimated tokens of the messages `memory.build_messages()` gives."""
    return estimate_tokens(_json(memory.build_messages()))


def schema_tokens(tools: Iterable[ToolSchema]) -> int:
    """The estimated tokens of the tool schemas sent with a request."""
    return estimate_tokens(_json([t.model_dump(mode="json") for t in tools]))


def prompt_tokens(usage: TokenUsage | None) -> int | None:
    """The provider's count of a request from a call's usage (None when it gave none)."""
    if usage is None:
        return None
    total = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    return total or None


@dataclass(frozen=True)
class ContextEstimate:
    """The size of the next request: `tokens` in all, of which `provider` tokens is the
    provider's count of the last planning request (None: no count, all estimated)."""

    tokens: int
    limit: int | None
    provider: int | None = None

    @property
    def fits(self) -> bool:
        """True when the request fits the limit (or there is none)."""
        return self.limit is None or self.tokens <= self.limit

    def __repr__(self) -> str:
        of = f" of {self.limit}" if self.limit is not None else ""
        counted = f", {self.provider} counted by the provider" if self.provider else ""
        return f"ContextEstimate({self.tokens} tokens{of}{counted})"


def estimate_request(
    memory: AgentMemory, tools: Sequence[ToolSchema], limit: int | None = None
) -> ContextEstimate:
    """The size of the planning request `memory` leads to, with these tools: the provider's
    count of the last planning request plus the estimated change since, else the estimate."""
    messages = message_tokens(memory)
    mark = memory.context_mark
    if mark is not None:
        counted, estimated_then = mark
        return ContextEstimate(max(0, counted + messages - estimated_then), limit, counted)
    return ContextEstimate(messages + schema_tokens(tools), limit)


# -- the cuts ---------------------------------------------------------------------------------


def cut_lines(text: str, max_lines: int) -> str:
    """The text's first `max_lines` lines, and a line saying how many more were cut."""
    lines = text.split("\n")
    marker = _LINES_CUT.match(lines[-1])
    earlier = int(marker.group(1)) if marker else 0  # lines an earlier cut took already
    body = lines[:-1] if marker else lines
    if len(body) <= max_lines:
        return text  # short enough, or cut already
    cut = len(body) - max_lines + earlier
    return "\n".join([*body[:max_lines], f"[... {cut} more lines cut to fit the context window]"])


_LINES_CUT = re.compile(r"^\[\.\.\. (\d+) more lines cut to fit the context window\]$")


def cut_chars(text: str, max_chars: int) -> str:
    """The text's first `max_chars` characters, and a note saying how many more were cut."""
    if len(text) <= max_chars:
        return text
    return (
        f"{text[:max_chars]}[... {len(text) - max_chars} more characters cut to fit the "
        "context window]"
    )


def _note(dropped: Sequence[HistoryEntry], conversation: bool = False) -> HistoryEntry:
    first, last = dropped[0].step, dropped[-1].step
    if conversation:  # earlier turns of a thread: their messages are not tool calls
        turns = sum(1 for e in dropped if e.said == "user")
        calls = sum(1 for e in dropped if not e.is_summary and e.said is None)
        return HistoryEntry(
            step=first,
            tool=ToolCall(name=SUMMARY_TOOL, args={}, id=f"compacted-conversation-{turns}"),
            observation=(
                f"The {turns} earliest exchange(s) of this conversation and their {calls} tool "
                "call(s) were dropped to fit the context window; they are no longer shown."
            ),
            success=True,
        )
    calls = sum(1 for e in dropped if not e.is_summary)
    steps = f"step {first}" if first == last else f"steps {first}-{last}"
    return HistoryEntry(
        step=first,
        tool=ToolCall(name=SUMMARY_TOOL, args={}, id=f"compacted-{first}-{last}"),
        observation=(
            f"The {calls} tool call(s) of {steps} were dropped to fit the context window; "
            "their results are no longer shown."
        ),
        success=True,
    )


def carried_after(cut: ContextCompacted, carried: int) -> int:
    """How many entries at the head of history come from earlier turns of the thread after
    `cut`, given `carried` before it: a note that takes the place of some of them counts as
    one of them (it is sent before the task)."""
    if cut.dropped is None:
        return carried
    start, end = cut.dropped
    if start >= carried:
        return carried
    note = 1 if cut.note is not None else 0
    if end <= carried:
        return carried - (end - start) + note
    return start + note


def compacted(history: Sequence[HistoryEntry], cut: ContextCompacted) -> History:
    """History after a `ContextCompacted` fact: its cuts, in their order (the reducer)."""
    entries = list(history)
    if cut.max_lines is not None:
        for i in cut.truncated:
            if 0 <= i < len(entries):
                e = entries[i]
                entries[i] = e.model_copy(
                    update={"observation": cut_lines(e.observation, cut.max_lines)}
                )
    if cut.dropped is not None:
        start, end = cut.dropped
        entries[start:end] = [cut.note] if cut.note is not None else []
    if cut.max_chars is not None:
        limit = cut.max_chars
        entries = [
            e
            if len(e.observation) <= limit
            else e.model_copy(update={"observation": cut_chars(e.observation, limit)})
            for e in entries
        ]
    return History(entries)


def _steps(entries: Sequence[HistoryEntry], start: int, end: int, carried: int = 0) -> list[int]:
    """The positions in [start, end) where a new step begins, and `end`; among the first
    `carried` entries (earlier turns of a thread), where a new turn begins."""
    bounds = [
        i
        for i in range(start, end)
        if i == start
        or (entries[i].said == "user" if i < carried else entries[i].step != entries[i - 1].step)
        or i == carried
    ]
    return [*bounds, end]


def _recent(history: Sequence[HistoryEntry], carried: int) -> int:
    """Where the entries kept from tiers 1 and 2 begin: the last step's; in a thread's turn
    with no entry of its own yet, the last earlier turn's."""
    last_step = history[-1].step
    if not carried:
        return next(i for i in range(len(history)) if history[i].step == last_step)
    if carried < len(history):
        recent = len(history) - 1
        while recent > carried and history[recent - 1].step == last_step:
            recent -= 1
        return recent
    return max((i for i in range(carried) if history[i].said == "user"), default=0)


def compaction(
    memory: AgentMemory, tools: Sequence[ToolSchema], limit: int
) -> ContextCompacted | None:
    """The least cut (by tiers) after which the planning request fits `limit`, as the fact
    to record; None when it fits already, history is empty, or even the last tier cannot make
    it fit."""
    from .facts import ContextCompacted

    history = memory.history
    carried = memory.carried
    before = estimate_request(memory, tools, limit).tokens
    if not history or before <= limit:
        return None

    def size(cut: ContextCompacted) -> int:
        update: dict[str, object] = {"history": compacted(history, cut)}
        if carried:
            update["carried"] = carried_after(cut, carried)
        return estimate_request(memory.model_copy(update=update), tools, limit).tokens

    recent = _recent(history, carried)
    head = 1 if history[0].is_summary and recent > 0 else 0
    max_lines = memory.config.tool_output_max_lines
    truncated = tuple(
        i
        for i in range(head, recent)
        if not history[i].is_summary
        and not (i < carried and history[i].said)
        and cut_lines(history[i].observation, max_lines) != history[i].observation
    )
    cut = ContextCompacted(
        tokens_before=before,
        tokens_after=before,
        limit=limit,
        max_lines=max_lines if truncated else None,
        truncated=truncated,
    )
    after = size(cut)
    if after > limit:  # tier 2: drop the oldest steps, as few as will do
        for end in _steps(history, head, recent, carried)[1:]:
            note = _note(history[head:end], conversation=head < carried)
            cut = cut.model_copy(update={"dropped": (head, end), "note": note})
            after = size(cut)
            if after <= limit:
                break
    if after > limit:  # tier 3: cut every output left to the most characters that fit
        longest = max(len(e.observation) for e in compacted(history, cut))
        low, high = -1, longest  # size(low) is unknown, size(high) is over the limit
        while high - low > 1:
            middle = (low + high) // 2
            if size(cut.model_copy(update={"max_chars": middle})) <= limit:
                low = middle
            else:
                high = middle
        if low < 0:
            return None
        cut = cut.model_copy(update={"max_chars": low})
        after = size(cut)
    if not truncated and cut.dropped is None and cut.max_chars is None:
        return None
    return cut.model_copy(update={"tokens_after": after})
