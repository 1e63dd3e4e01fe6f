"""replay: take a recorded run offline and re-run it, inspect it at any point, branch it,
resume it; and the `agentsm` command line around all that."""

from .branching import branch_run
from .branchnotes import UnusedChange
from .copying import CopyReport, copy_runs
from .diffing import RunDiff, diff_runs
from .effects import (
    RecordedDecisions,
    RecordedLlm,
    RecordedTools,
    RecordedValues,
    ReplayDiverged,
    ReplayedCrash,
)
from .errors import (
    BuilderRequired,
    CopyRefused,
    ImportRefused,
    ReplayError,
    SeqOutOfRange,
    UsageError,
)
from .recording import Recording
from .replaying import assert_replays, replay_run
from .report import Divergence, ReplayReport
from .resuming import decide, pending_requests, resume_run
from .timetravel import memory_at
from .transfer import export_run, import_runs

__all__ = [
    "BuilderRequired",
    "CopyRefused",
    "CopyReport",
    "Divergence",
    "ImportRefused",
    "RecordedDecisions",
    "RecordedLlm",
    "RecordedTools",
    "RecordedValues",
    "Recording",
    "ReplayDiverged",
    "ReplayError",
    "ReplayReport",
    "ReplayedCrash",
    "RunDiff",
    "SeqOutOfRange",
    "UnusedChange",
    "UsageError",
    "assert_replays",
    "branch_run",
    "copy_runs",
    "decide",
    "diff_runs",
    "export_run",
    "import_runs",
    "memory_at",
    "pending_requests",
    "replay_run",
    "resume_run",
]
