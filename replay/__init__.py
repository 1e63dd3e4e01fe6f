"""replay: take a recorded run offline and re-run it, inspect it at any point, branch it,
resume it; best of N (branches run together, one picked by a judge); workers that drive
queued, decided and orphaned runs; a live tail; and the `agentsm` command line around all
that. (OpenTelemetry export is `replay.otel`, with the `otel` extra.)

Every exported name is imported on first use: `agentsm --help` needs none of them."""

from typing import TYPE_CHECKING

from eventstore.lazy import exports

if TYPE_CHECKING:
    from agentsm.facts import Candidate

    from .bestof import Variant, abest_of, best_of, judge_again
    from .branching import BranchResult, branch_run
    from .branchnotes import UnusedChange
    from .branchsources import BranchEffect, LiveNeeded
    from .copying import CopyReport, copy_runs
    from .diffing import RunDiff, diff_runs
    from .effects import (
        RecordedDecisions,
        RecordedLlm,
        RecordedMessages,
        RecordedTools,
        RecordedValues,
        ReplayDiverged,
        ReplayedCrash,
    )
    from .errors import (
        BestOfError,
        BuilderRequired,
        ChoiceRefused,
        CopyRefused,
        ExportRefused,
        ImportRefused,
        ReplayError,
        SeqOutOfRange,
        UnknownThread,
        UsageError,
    )
    from .judgement import BestOf, judgements, load_best_of
    from .judges import LlmJudge, Verdict
    from .judging import replay_judgement
    from .outside import answer, request_stop, steer
    from .recording import Recording
    from .replaying import assert_replays, replay_run
    from .report import Divergence, ReplayReport
    from .resuming import decide, pending_requests, resume_run
    from .tail import LiveFact, follow
    from .threads import ThreadBranched, ThreadReplay, branch_thread, replay_thread
    from .timetravel import Moment, memory_at, moments
    from .transfer import export_run, import_runs
    from .worker import Worker, WorkResult

__all__ = [
    "BestOf",
    "BestOfError",
    "BranchEffect",
    "BranchResult",
    "BuilderRequired",
    "Candidate",
    "ChoiceRefused",
    "CopyRefused",
    "CopyReport",
    "Divergence",
    "ExportRefused",
    "ImportRefused",
    "LiveFact",
    "LiveNeeded",
    "LlmJudge",
    "Moment",
    "RecordedDecisions",
    "RecordedLlm",
    "RecordedMessages",
    "RecordedTools",
    "RecordedValues",
    "Recording",
    "ReplayDiverged",
    "ReplayError",
    "ReplayReport",
    "ReplayedCrash",
    "RunDiff",
    "SeqOutOfRange",
    "ThreadBranched",
    "ThreadReplay",
    "UnknownThread",
    "UnusedChange",
    "UsageError",
    "Variant",
    "Verdict",
    "WorkResult",
    "Worker",
    "abest_of",
    "answer",
    "assert_replays",
    "best_of",
    "branch_run",
    "branch_thread",
    "copy_runs",
    "decide",
    "diff_runs",
    "export_run",
    "follow",
    "import_runs",
    "judge_again",
    "judgements",
    "load_best_of",
    "memory_at",
    "moments",
    "pending_requests",
    "replay_judgement",
    "replay_run",
    "replay_thread",
    "request_stop",
    "resume_run",
    "steer",
]

_LAZY: dict[str, tuple[str, ...]] = {
    "agentsm.facts": ("Candidate",),
    ".bestof": ("Variant", "abest_of", "best_of", "judge_again"),
    ".branching": ("BranchResult", "branch_run"),
    ".branchnotes": ("UnusedChange",),
    ".branchsources": ("BranchEffect", "LiveNeeded"),
    ".copying": ("CopyReport", "copy_runs"),
    ".diffing": ("RunDiff", "diff_runs"),
    ".effects": (
        "RecordedDecisions",
        "RecordedLlm",
        "RecordedMessages",
        "RecordedTools",
        "RecordedValues",
        "ReplayDiverged",
        "ReplayedCrash",
    ),
    ".errors": (
        "BestOfError",
        "BuilderRequired",
        "ChoiceRefused",
        "CopyRefused",
        "ExportRefused",
        "ImportRefused",
        "ReplayError",
        "SeqOutOfRange",
        "UnknownThread",
        "UsageError",
    ),
    ".judgement": ("BestOf", "judgements", "load_best_of"),
    ".judges": ("LlmJudge", "Verdict"),
    ".judging": ("replay_judgement",),
    ".outside": ("answer", "request_stop", "steer"),
    ".recording": ("Recording",),
    ".replaying": ("assert_replays", "replay_run"),
    ".report": ("Divergence", "ReplayReport"),
    ".resuming": ("decide", "pending_requests", "resume_run"),
    ".tail": ("LiveFact", "follow"),
    ".threads": ("ThreadBranched", "ThreadReplay", "branch_thread", "replay_thread"),
    ".timetravel": ("Moment", "memory_at", "moments"),
    ".transfer": ("export_run", "import_runs"),
    ".worker": ("Worker", "WorkResult"),
}
"""Where each exported name lives, by module."""

__getattr__, __dir__ = exports(__name__, globals(), _LAZY)
