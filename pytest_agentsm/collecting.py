"""The plugin at work once `--agentsm-replay` is given: its options checked, the user's agent
loaded, one collector per source added to the session, the logs closed at its end."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Generator
from datetime import datetime

import pytest

from agentsm import AgentBuilder, BuildError
from replay.cli.listing import STATUSES
from replay.source import Builder, load_object

from .items import RecordedLog
from .sources import Filters, RecordedSource

__all__ = ["RecordedRuns", "parse_since"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class RecordedRuns:
    """Adds the recorded runs of each source to the session's collection. Given no paths to
    collect, pytest collects the recorded runs alone; given paths, those tests as well."""

    def __init__(
        self, sources: list[RecordedSource], filters: Filters, builder: Builder | None
    ) -> None:
        self.sources = sources
        self.filters = filters
        self.builder = builder

    @classmethod
    def from_config(cls, config: pytest.Config) -> RecordedRuns:
        """The plugin for the command line's options; a value that cannot be used stops the
        run with a usage error naming it."""
        given: list[str] = config.getoption("agentsm_replay")
        sources = [RecordedSource(text) for text in dict.fromkeys(given)]
        for source in sources:
            if problem := source.problem():
                raise pytest.UsageError(problem)
        status = config.getoption("agentsm_status")
        if status is not None and status not in STATUSES:
            raise pytest.UsageError(
                f"--agentsm-status {status!r}: use one of {', '.join(STATUSES)}."
            )
        filters = Filters(
            status=status,
            task=config.getoption("agentsm_task"),
            since=parse_since(config.getoption("agentsm_since")),
        )
        spec = config.getoption("agentsm_builder") or os.environ.get("AGENTSM_BUILDER")
        builder = _load_builder(spec) if spec else None
        if config.args_source != pytest.Config.ArgsSource.ARGS:
            config.args = []  # no paths given: the recorded runs are the tests
        return cls(sources, filters, builder)

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(
        self, collector: pytest.Collector
    ) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
        report = yield
        if isinstance(collector, pytest.Session) and report.passed:
            report.result.extend(self._logs(collector))
        return report

    def _logs(self, session: pytest.Session) -> list[RecordedLog]:
        return [
            RecordedLog.from_parent(
                session,
                name=source.label,
                nodeid=source.label,
                path=source.path.resolve() if source.path is not None else session.path,
                source=source,
                filters=self.filters,
                builder=self.builder,
            )
            for source in self.sources
        ]

    def pytest_sessionfinish(self) -> None:
        for source in self.sources:
            source.close()

    def __repr__(self) -> str:
        return f"RecordedRuns({[s.label for s in self.sources]!r})"


def parse_since(text: str | None, now: float | None = None) -> float | None:
    """`--agentsm-since`: an epoch time in seconds, a date or time (`2026-11-22`,
    `2026-11-22T08:00`), or a duration back from now (`90s`, `30m`, `2h`, `1d`, `1w`)."""
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text)
    if match:
        return (now or time.time()) - float(match[1]) * _UNITS[match[2]]
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise pytest.UsageError(
            f"--agentsm-since {text!r}: give a date (2026-11-22), a time (2026-11-22T08:00), "
            "an epoch time in seconds, or a duration (30m, 2h, 1d, 1w)."
        ) from None


def _load_builder(spec: str) -> Builder:
    """The user's agent factory, imported now so that a wrong name stops the run at once."""
    try:
        attr, factory = load_object(spec, "--agentsm-builder", "factory")
    except BuildError as e:
        raise pytest.UsageError(str(e)) from None

    def checked(task: str) -> AgentBuilder:
        made = factory(task)
        if not isinstance(made, AgentBuilder):
            raise BuildError(
                f"--agentsm-builder {spec!r}: {attr}(task) returned {type(made).__name__}, not "
                "an AgentBuilder; make it return AgentBuilder(task)... without calling .build()."
            )
        return made

    return checked
