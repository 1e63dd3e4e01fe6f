"""Time travel: a run's memory and state at any sequence number."""

from __future__ import annotations

from agentsm import AgentMemory
from agentsm.memory import fold_with_state

from .errors import SeqOutOfRange
from .recording import Recording
from .source import StoreLike, open_store

__all__ = ["memory_at"]


def memory_at(db: StoreLike, run_id: str, seq: int) -> tuple[AgentMemory, str]:
    """Memory and state right after fact `seq` of the run (folding the log up to it)."""
    recording = Recording.load(open_store(db), run_id)
    last = recording.entries[-1].seq if recording.entries else 0
    if not 1 <= seq <= last:
        raise SeqOutOfRange(recording.run_id, seq, last)
    return fold_with_state(e.fact for e in recording.entries if e.seq <= seq)
