"""What one trial is: the backend, the fleet, the faults, and how long the agent's effects take."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
AGENT = "replay.torture.agent:make_agent"
"""The workers' agent: a module path, so that an installed agentsm can run the harness."""


@dataclass(frozen=True)
class Options:
    """One trial: the backend, the fleet, the faults, and how long the agent's effects take."""

    db: Literal["sqlite", "postgres"] = "sqlite"
    runs: int = 20
    workers: int = 3
    faults: int = 12
    seed: int = 1
    lease: float = 1.0
    pause: float = 0.3
    writes: int = 2
    drain: float = 60.0
    builder: str = AGENT
    postgres_url: str = POSTGRES_URL
    keep: bool = False
