"""Who held each run when: the catalog sampled every few milliseconds during a trial."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from eventstore import StoreError

from ..source import open_store


@dataclass(frozen=True)
class Sample:
    """A run's catalog row as the monitor saw it (kept when it changed)."""

    at: float
    status: str
    pid: int | None
    last_seq: int
    leased: bool


class Monitor(threading.Thread):
    """Samples the catalog every few milliseconds: each run's status, driver and last seq as
    they change (who held a run when each of its facts was committed)."""

    def __init__(self, url: str) -> None:
        super().__init__(name="torture monitor", daemon=True)
        self.url = url
        self.timelines: dict[str, list[Sample]] = {}
        self.halt = threading.Event()
        self.drivers: set[int] = set()
        """Every pid seen driving a run."""

    def __repr__(self) -> str:
        lines = list(self.timelines.values())  # copied at once: the thread may be adding
        state = "sampling" if self.is_alive() else "stopped"
        return (
            f"<Monitor {state}: {len(lines)} runs, {sum(map(len, lines))} samples, "
            f"drivers {sorted(set(self.drivers))}>"
        )

    def run(self) -> None:
        store = open_store(self.url)
        try:
            while not self.halt.wait(0.005):
                try:
                    records = store.runs()
                except StoreError:
                    continue
                for r in records:
                    s = Sample(
                        time.time(),
                        r.status,
                        r.driver.pid if r.driver else None,
                        r.last_seq,
                        r.lease_until is not None,
                    )
                    if s.pid is not None:
                        self.drivers.add(s.pid)
                    line = self.timelines.setdefault(r.run_id, [])
                    if not line or (
                        line[-1].status,
                        line[-1].pid,
                        line[-1].last_seq,
                        line[-1].leased,
                    ) != (s.status, s.pid, s.last_seq, s.leased):
                        line.append(s)
        finally:
            store.close()
