"""Shared fixtures: no test may reach the network; a harness runs one handler in isolation."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentsm import (
    AgentConfig,
    AgentMemory,
    LlmCaller,
    MockLlmCaller,
    RunContext,
    State,
    TokenBudget,
    ToolRegistry,
)
from agentsm.facts import Fact, RunStarted
from agentsm.memory import initial_memory
from agentsm.recorder import Recorder
from agentsm.testing import load_profile
from agentsm.trace import Trace
from eventstore import EventStore, SQLiteEventStore

from .backends import HOW_TO_RUN, SKIPPED, Backend
from .stores import close_opened

load_profile()  # $AGENTSM_HYPOTHESIS_PROFILE: agentsm-fast (default) or agentsm-thorough


@pytest.fixture
def format1_logs(monkeypatch: pytest.MonkeyPatch) -> None:
    """New SQLite logs are made in format 1 (one row per fact), as earlier releases made them:
    for the tests that edit those rows with SQL, or check format 1's own schema."""
    monkeypatch.setattr("eventstore.sqlite.NEW_LOG_FORMAT", 1)


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Refuse connections to anything but the loopback interface."""
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else address
        if (
            isinstance(host, str)
            and host not in ("127.0.0.1", "localhost", "::1")
            and (self.family in (socket.AF_INET, socket.AF_INET6))
        ):
            raise RuntimeError(f"tests may not reach the network ({address!r})")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    yield


BACKENDS = ("sqlite-file", "sqlite-memory", "postgresql")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """Each store backend in turn; PostgreSQL in a schema of its own, dropped afterwards."""
    chosen = Backend(request.param, tmp_path, request)
    yield chosen
    chosen.close()


@pytest.fixture(params=("sqlite-file", "postgresql"))
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL (or path) of a new log on each backend that a second process can open too."""
    chosen = Backend(request.param, tmp_path, request)
    yield chosen.url
    chosen.close()


@pytest.fixture
def store(backend: Backend) -> EventStore:
    """A new store on each backend."""
    return backend.open()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """One line saying how to run the PostgreSQL tests when they were skipped."""
    if SKIPPED:
        terminalreporter.write_line(f"{len(SKIPPED)} {HOW_TO_RUN}")


class Harness:
    """One run in an in-memory store, for driving a single handler with a chosen memory."""

    def __init__(
        self,
        *,
        config: AgentConfig | None = None,
        tools: ToolRegistry | None = None,
        llm: LlmCaller | None = None,
        approval: Any = None,
        blacklist: tuple[str, ...] = (),
        approval_required: tuple[str, ...] = (),
        budget: TokenBudget | None = None,
        task: str = "test task",
        task_type: str = "default",
    ) -> None:
        self.store = SQLiteEventStore()
        self.store.create_run("run", task)
        self.tools = tools or ToolRegistry()
        self.llm = llm or MockLlmCaller()
        self.approval = approval
        self.outputs: list[Any] = []
        definition = RunStarted(
            task=task,
            task_type=task_type,
            system_prompt="",
            config=config or AgentConfig(),
            tools=tuple(self.tools.schemas()),
            blacklisted_tools=blacklist,
            approval_required=approval_required,
            budget=budget,
        )
        self.recorder = Recorder(self.store, "run", initial_memory(definition), 0, lambda: 0.0)
        self.recorder.record(definition, State.Idle)
        self.recorder.flush()

    @property
    def memory(self) -> AgentMemory:
        return self.recorder.memory

    def given(self, state: str, *facts: Fact) -> Harness:
        """Record facts as the state that owns them would."""
        for fact in facts:
            self.recorder.record(fact, state)
        self.recorder.flush()
        return self

    def handle(self, handler: Any) -> Any:
        """Run the handler once; its facts are committed; returns the event."""
        ctx = RunContext(
            run_id="run",
            state=handler.name,
            recorder=self.recorder,
            tools=self.tools,
            llm=self.llm,
            tool_runner=lambda c: self.tools.aexecute(c.name, c.args, timeout=5.0),
            approval=self.approval,
            emit=self.outputs.append,
        )
        event = asyncio.run(handler.handle(ctx))
        self.recorder.flush()
        return event

    def kinds(self) -> list[str]:
        """Kinds of every fact recorded after RunStarted."""
        return [e.event for e in Trace.load(self.store, "run")][1:]

    def facts(self, kind: str) -> list[Any]:
        return [e.fact for e in Trace.load(self.store, "run") if e.event == kind]


@pytest.fixture
def log_url(db_url: str) -> Iterator[str]:
    """A fresh, empty log on each backend (SQLite file, PostgreSQL), as its URL or path; the
    stores a test opens on it with `tests.stores.connect` are closed after it."""
    yield db_url
    close_opened()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "required_in_ci: skipped where a tool it needs is missing, but a failure under CI=true",
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Under CI=true, a test marked `required_in_ci` that skips (its tool is missing) fails:
    CI installs what these tests need, so a skip there means the install step broke."""
    outcome: Any = yield
    report = outcome.get_result()
    if (
        report.skipped
        and item.get_closest_marker("required_in_ci") is not None
        and os.environ.get("CI", "").lower() == "true"
    ):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true, where it must run: {reason}"
