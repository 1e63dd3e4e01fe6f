"""The lease tokens a store holds, and the runs it lost: a fence no later write gets past.

A store that claims a run gets a token; every write it makes to the run carries it, and the
database accepts a write only while the run's row names that token. Once one write is refused
because another driver holds the run, the store remembers the loss: every later write to that
run (an append, a status, a release) is refused here, before it reaches the database, until this
store claims the run again. A token is never dropped and replaced by none, which the database
would take for "nobody drives this run" and accept.
"""

from __future__ import annotations

import threading

from .errors import LeaseLost

__all__ = ["Tokens", "lost_lease"]


def lost_lease(run_id: str, holder: str) -> LeaseLost:
    """The error of a write refused because `holder` (a driver, or "no process") has the run."""
    return LeaseLost(
        run_id,
        f"Run {run_id!r} is driven by {holder} now, not by this store: its lease was taken "
        "over (it ran out while this process was stalled, or a resume forced it). Nothing "
        "was written, and this driver writes nothing more to the run; what it committed "
        "before stays.",
    )


class Tokens:
    """The runs one store drives, by lease token, and the runs it lost (thread-safe)."""

    def __init__(self) -> None:
        self._held: dict[str, str] = {}
        self._lost: dict[str, LeaseLost] = {}
        self._lock = threading.Lock()

    def hold(self, run_id: str, token: str) -> None:
        """A claim was committed: the run is this store's, whatever it lost before."""
        with self._lock:
            self._held[run_id] = token
            self._lost.pop(run_id, None)

    def get(self, run_id: str) -> str | None:
        """The token of a run this store drives (None: it does not drive it)."""
        return self._held.get(run_id)

    def for_write(self, run_id: str) -> str | None:
        """The token a write to the run must carry: raises `LeaseLost` once the run was lost."""
        lost = self._lost.get(run_id)
        if lost is not None:
            raise lost
        return self._held.get(run_id)

    def lose(self, run_id: str, error: LeaseLost) -> LeaseLost:
        """Another driver has the run: fence it (every later write raises `error`)."""
        with self._lock:
            self._held.pop(run_id, None)
            self._lost[run_id] = error
        return error

    def is_lost(self, run_id: str) -> bool:
        return run_id in self._lost

    def hand_back(self, run_id: str) -> str | None:
        """The run was handed back by this store (released): forget its token, return it."""
        with self._lock:
            return self._held.pop(run_id, None)

    def held(self) -> list[tuple[str, str]]:
        """The runs held now and their tokens (a copy, for renewal)."""
        with self._lock:
            return list(self._held.items())

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._held

    def __repr__(self) -> str:
        return f"Tokens(held={len(self._held)}, lost={len(self._lost)})"
