"""The user's messages in a run's memory, by number: 0 is the task, then each message sent
while the run went on (`Steered`), wherever it is now (in history, or waiting with
`AgentMemory.steered` for the step's results). The input guards check them in that order
(`InputChecked`), and a guard's replacement text is put where the message is."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from .history import History
from .types import USER_MESSAGE

if TYPE_CHECKING:
    from .memory import AgentMemory

__all__ = ["message_text", "with_message"]

Place = tuple[Literal["history", "steered"], int]


def _place(memory: AgentMemory, number: int) -> Place | None:
    """Where message `number` (1 or more) is: its index in history (after what a thread's turn
    carries) or among the messages waiting for the step's results; None when it is not there
    any more (history was compressed or compacted since)."""
    sent: list[Place] = [
        ("history", i)
        for i in range(memory.carried, len(memory.history))
        if memory.history[i].tool.name == USER_MESSAGE
    ]
    sent += [("steered", i) for i in range(len(memory.steered))]
    back = memory.user_messages - number
    return sent[-back] if 0 < back <= len(sent) else None


def message_text(memory: AgentMemory, number: int) -> str | None:
    """The text of the user's message `number` (0: the task), None when it is gone."""
    if number == 0:
        return memory.task
    place = _place(memory, number)
    if place is None:
        return None
    where, i = place
    return (memory.history[i] if where == "history" else memory.steered[i]).observation


def with_message(memory: AgentMemory, number: int, text: str) -> dict[str, Any]:
    """The memory update that puts `text` in place of the user's message `number` (nothing
    when the message is gone)."""
    if number == 0:
        return {"task": text}
    place = _place(memory, number)
    if place is None:
        return {}
    where, i = place
    if where == "steered":
        steered = list(memory.steered)
        steered[i] = steered[i].model_copy(update={"observation": text})
        return {"steered": tuple(steered)}
    entries = list(memory.history)
    entries[i] = entries[i].model_copy(update={"observation": text})
    return {"history": History(entries)}
