"""A torture harness for `agentsm worker` fleets: runs submitted to W worker processes that are
killed (SIGKILL, then replaced), paused past their lease (SIGSTOP, later SIGCONT) and, on
PostgreSQL, cut from the server (`pg_terminate_backend`), at points a seeded RNG picks; then the
fleet drains and the log, the catalog and the tools' ledger are checked.

The workers' agent is `replay.torture.agent:make_agent`, so an installed agentsm runs it:

    python -m replay.torture --db sqlite|postgres --runs N --workers W --faults F --seed S \
        --lease SECONDS

It prints its figures and every violation, and exits 1 on any. `torture(Options(...))` runs a
trial from Python and returns its `Report`.
"""

from .faults import Fault, plan
from .monitor import Sample
from .options import Options
from .report import INVARIANTS, Report, Violation
from .trial import torture

__all__ = ["INVARIANTS", "Fault", "Options", "Report", "Sample", "Violation", "plan", "torture"]
