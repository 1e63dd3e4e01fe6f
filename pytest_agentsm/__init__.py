"""Recorded runs as pytest tests: `pytest --agentsm-replay LOG --agentsm-builder module:factory`.

pytest loads this plugin (entry point `pytest11`) in every run of an environment where agentsm
is installed, so it lives apart from `agentsm` and `replay`, as hypothesis keeps
`_hypothesis_pytestplugin`: it adds its options and nothing else, and imports the replay
machinery (`pytest_agentsm.collecting`) only when `--agentsm-replay` is given.
"""

from __future__ import annotations

import pytest

__all__ = ["pytest_addoption", "pytest_configure"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("agentsm", "agentsm: recorded runs as tests")
    group.addoption(
        "--agentsm-replay",
        action="append",
        default=[],
        metavar="LOG",
        help="replay every recorded run of LOG as a test: a SQLite log, a postgresql:// URL, or "
        "a file or folder of `agentsm export` files (*.jsonl); may be given more than once",
    )
    group.addoption(
        "--agentsm-builder",
        metavar="MODULE:FACTORY",
        help="your agent: module:factory or path/to/file.py:factory, factory(task) returns an "
        "AgentBuilder (default: $AGENTSM_BUILDER; without either, each run replays its "
        "recorded definition)",
    )
    group.addoption(
        "--agentsm-status",
        metavar="STATUS",
        help="only runs of this status (done, failed, aborted, waiting, ...; error: failed or "
        "aborted)",
    )
    group.addoption(
        "--agentsm-task", metavar="TEXT", help="only runs whose task contains TEXT (any case)"
    )
    group.addoption(
        "--agentsm-since",
        metavar="WHEN",
        help="only runs with facts since WHEN: a date (2026-11-22), a time "
        "(2026-11-22T08:00), an epoch time in seconds, or a duration back from now (2h, 1d)",
    )


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("agentsm_replay"):
        return  # a plain pytest run: nothing imported, nothing registered
    from .collecting import RecordedRuns

    config.pluginmanager.register(RecordedRuns.from_config(config), "agentsm-recorded-runs")
