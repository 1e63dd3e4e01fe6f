"""replay: take a recorded run offline and re-run it, inspect it at any point, branch it,
resume it; and the `agentsm` command line around all that."""

from .effects import RecordedDecisions, RecordedLlm, RecordedTools
from .recording import Recording
from .replaying import assert_replays, replay_run
from .report import Divergence, ReplayReport

__all__ = [
    "Divergence",
    "RecordedDecisions",
    "RecordedLlm",
    "RecordedTools",
    "Recording",
    "ReplayReport",
    "assert_replays",
    "replay_run",
]
