"""The pytest nodes: a recorded log collects one item per run; an item replays its run with the
user's agent and fails with the replay's report."""

from __future__ import annotations

import re
from typing import Any

import pytest
from _pytest._code.code import (
    ExceptionInfo,
    ReprExceptionInfo,
    ReprFileLocation,
    ReprTracebackNative,
    TerminalRepr,
)

from agentsm import AgentError
from eventstore import RunRecord, StoreError
from replay import ReplayReport, replay_run
from replay.source import Builder

from .sources import Filters, RecordedSource, Unreadable

__all__ = ["RecordedLog", "RecordedRun", "ReplayChanged"]

_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f]+")


class ReplayChanged(AssertionError):
    """A recorded run that did not replay identical: its report says how."""

    def __init__(self, report: ReplayReport) -> None:
        super().__init__(str(report))
        self.report = report


class RecordedLog(pytest.Collector):
    """The runs of one `--agentsm-replay` source that pass the filters."""

    def __init__(
        self,
        *,
        source: RecordedSource,
        filters: Filters,
        builder: Builder | None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.source = source
        self.filters = filters
        self.builder = builder

    def collect(self) -> list[pytest.Item]:
        try:
            records = self.source.runs(self.filters)
        except Unreadable as e:
            raise self.CollectError(str(e)) from e
        return [
            RecordedRun.from_parent(self, name=_item_name(r), record=r, builder=self.builder)
            for r in records
        ]


class RecordedRun(pytest.Item):
    """One recorded run, replayed with the user's agent against its recorded effects."""

    parent: RecordedLog

    def __init__(self, *, record: RunRecord, builder: Builder | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.run_id = record.run_id
        self.task = record.task
        self.status = record.status
        self.builder = builder

    def runtest(self) -> None:
        self.user_properties.append(("agentsm_run_id", self.run_id))
        report = replay_run(self.parent.source.store(), self.run_id, self.builder)
        if not report.identical:
            raise ReplayChanged(report)

    def repr_failure(
        self, excinfo: ExceptionInfo[BaseException], style: Any = None
    ) -> str | TerminalRepr:
        """The replay's report, or the one-line message of an agentsm or store error (a run
        that needs the builder, a log changed after it was recorded), without a traceback;
        any other error (in the user's builder) as pytest shows errors."""
        error = excinfo.value
        if isinstance(error, ReplayChanged):
            return _text_repr(str(error.report), str(self.path))
        if isinstance(error, AgentError | StoreError):
            text = f"run {self.run_id}: {type(error).__name__}: {error}"
            return _text_repr(text, str(self.path))
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"recorded run {self.run_id} ({self.status}): {self.task}"

    def __repr__(self) -> str:
        return f"<RecordedRun {self.run_id} {self.task!r}>"


def _text_repr(text: str, path: str) -> ReprExceptionInfo:
    """`text` as a failure: printed as it is, its first line the one-line message (the short
    summary, JUnit XML's failure message); a repr that `pytest -n` sends between processes."""
    headline = text.splitlines()[0] if text else ""
    return ReprExceptionInfo(
        reprtraceback=ReprTracebackNative([text + "\n"]),
        reprcrash=ReprFileLocation(path, 0, headline),
    )


def _item_name(record: RunRecord, width: int = 50) -> str:
    """`RUN_ID[task]`: the task on one line, cut to `width` characters."""
    task = " ".join(_UNPRINTABLE.sub(" ", record.task).split()).replace("::", ":")
    if len(task) > width:
        task = task[: width - 1].rstrip() + "…"
    return f"{record.run_id}[{task}]"
