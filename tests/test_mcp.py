"""MCP tools against a real MCP server process (tests/mcp_server.py, written with the SDK's server
API), over stdio and over streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentsm import (
    AgentBuilder,
    AgentEngine,
    AgentFailed,
    BuildError,
    HumanInputRequired,
    LlmResponse,
    McpServer,
    McpServerUnavailable,
    MockLlmCaller,
    ToolCall,
    ToolStarted,
)
from agentsm import facts as f
from agentsm.testing import Mutation, run_recorded
from agentsm.trace import Trace
from eventstore import SQLiteEventStore
from replay import branch_run, replay_run, resume_run

SERVER = Path(__file__).resolve().with_name("mcp_server.py")
ROOT = SERVER.parent.parent

Make = Callable[[str], AgentBuilder]


class HttpServer:
    """tests/mcp_server.py --http as a subprocess: started, its port read (printed once the
    socket listens, so no waiting is needed), always stopped."""

    def __init__(self, *flags: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(SERVER), "--http", *flags], stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.strip().isdigit():
            self.stop()
            raise RuntimeError(f"the MCP test server did not start (said {line!r})")
        self.url = f"http://127.0.0.1:{int(line)}/mcp"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


@pytest.fixture
def http_server() -> Iterator[HttpServer]:
    server = HttpServer()
    try:
        yield server
    finally:
        server.stop()


def stdio(task: str, script: Path = SERVER, env: dict[str, str] | None = None) -> AgentBuilder:
    return AgentBuilder(task).mcp_server_stdio(sys.executable, [str(script)], env, name="calc")


def script() -> list[LlmResponse]:
    """Add, then count and divide by zero side by side, count again, answer."""
    return [
        LlmResponse.tool_call("add", {"a": 2, "b": 3}),
        LlmResponse.tool_calls(
            [ToolCall(name="count", args={}), ToolCall(name="divide", args={"a": 1, "b": 0})]
        ),
        LlmResponse.tool_call("count", {}),
        LlmResponse.final_answer("2 + 3 = 5; dividing by zero failed; the server counted 2."),
    ]


def executed(db: Path, run_id: str) -> list[f.ToolExecuted]:
    store = SQLiteEventStore(db)
    try:
        return [e.fact for e in Trace.load(store, run_id) if isinstance(e.fact, f.ToolExecuted)]
    finally:
        store.close()


def record(make: Make, db: Path) -> str:
    engine = make("Use the calculator.").llm(MockLlmCaller(script())).store(db).build()
    engine.run()
    return engine.run_id


@pytest.fixture(params=["stdio", "http"])
def transport(request: pytest.FixtureRequest) -> Iterator[Make]:
    if request.param == "stdio":
        yield stdio
        return
    server = HttpServer()
    try:
        yield lambda task: AgentBuilder(task).mcp_server_http(server.url, name="calc")
    finally:
        server.stop()


def test_the_server_tools_become_registry_tools_with_their_schemas(transport: Make) -> None:
    engine = transport("t").llm(MockLlmCaller([])).build()
    assert engine.tools.names() == ["add", "shout", "divide", "count", "pid", "wait", "crash"]
    add = engine.tools.get("add")
    assert add is not None and add.description == "Add two integers."
    assert add.schema["properties"]["a"]["type"] == "integer"
    assert add.schema["required"] == ["a", "b"]
    recorded = {s.name: s for s in engine.definition.tools}
    assert recorded["add"].input_schema == add.schema
    (spec,) = engine.definition.mcp_servers
    assert spec.name == "calc" and spec.tools == (
        "add",
        "shout",
        "divide",
        "count",
        "pid",
        "wait",
        "crash",
    )
    assert spec.transport in ("stdio", "http")


def test_a_run_calls_the_server_and_records_every_result(transport: Make, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id = record(transport, db)
    results = [(x.call.name, x.observation, x.success) for x in executed(db, run_id)]
    assert results == [
        ("add", "SUCCESS: 5", True),
        ("count", "SUCCESS: 1", True),
        (
            "divide",
            "ERROR: McpToolError: Error executing tool divide: " + "cannot divide by zero",
            False,
        ),
        ("count", "SUCCESS: 2", True),  # one server session for the whole run
    ]


def test_replay_serves_recorded_results_with_the_http_server_stopped(
    http_server: HttpServer, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"

    def make(task: str) -> AgentBuilder:
        return AgentBuilder(task).mcp_server_http(http_server.url, name="calc")

    run_id = record(make, db)
    http_server.stop()
    assert replay_run(db, run_id).identical  # the recorded definition: no server at all
    report = replay_run(db, run_id, make)  # the user's builder: the recorded tool list stands in
    assert report.identical, str(report)


def test_replay_needs_no_stdio_server(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    copy = tmp_path / "server.py"
    shutil.copy(SERVER, copy)
    run_id = record(lambda task: stdio(task, copy), db)
    copy.unlink()  # the server cannot start any more
    with pytest.raises(McpServerUnavailable):
        stdio("t", copy).llm(MockLlmCaller([])).build()  # a live run needs it
    assert replay_run(db, run_id).identical
    report = replay_run(db, run_id, lambda task: stdio(task, copy))
    assert report.identical, str(report)


def test_the_property_kit_reruns_a_recorded_mcp_run_without_the_server(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    copy = tmp_path / "server.py"
    shutil.copy(SERVER, copy)
    run_id = record(lambda task: stdio(task, copy), db)
    copy.unlink()
    for mutations in ([], [Mutation("tool_error", at=0, value="the calculator broke")]):
        run = run_recorded(db, run_id, mutations, lambda task: stdio(task, copy))
        run.assert_invariants()
    first = next(e.fact for e in run.trace if isinstance(e.fact, f.ToolExecuted))
    assert first.observation == "ERROR: RuntimeError: the calculator broke"


def test_the_cli_replays_an_mcp_run_without_the_server(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    copy = tmp_path / "server.py"
    shutil.copy(SERVER, copy)
    run_id = record(lambda task: stdio(task, copy), db)
    copy.unlink()
    done = subprocess.run(
        [sys.executable, "-m", "replay", "--db", str(db), "replay", run_id],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert done.returncode == 0 and "identical" in done.stdout, done.stdout + done.stderr


def test_a_server_offering_other_tools_diverges_at_the_first_fact(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    plain = {"AGENTSM_MCP_VARIANT": "plain"}
    run_id = record(lambda task: stdio(task, env=plain), db)
    changed = {"AGENTSM_MCP_VARIANT": "changed"}  # env values are not recorded: same definition
    report = replay_run(db, run_id, lambda task: stdio(task, env=changed))
    assert not report.identical
    change = report.definition_change
    assert change is not None and change.seq == 1
    assert "tools" in change.fields and "mcp_servers" in change.fields
    assert "multiply" in change.diff and "Add two integers (exactly)." in change.diff
    divergence = report.divergence  # the LLM is offered the other tools from its first request
    assert divergence is not None and divergence.expected is not None
    assert divergence.expected.event == "LlmRequested" and "multiply" in divergence.diff


def test_a_run_waiting_for_approval_resumes_with_the_server(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    llm = [
        LlmResponse.tool_call("add", {"a": 20, "b": 22}),
        LlmResponse.final_answer("The answer is 42, as the calculator said."),
    ]
    engine = stdio("add").require_approval("add").llm(MockLlmCaller(llm)).store(db).build()
    with pytest.raises(HumanInputRequired):
        engine.run()  # stopped before anything ran: no server process is left behind

    def make(task: str) -> AgentBuilder:
        return stdio(task).llm(MockLlmCaller(llm[1:])).on_approval(lambda request: True)

    assert resume_run(db, engine.run_id, make).startswith("The answer is 42")
    assert [x.observation for x in executed(db, engine.run_id)] == ["SUCCESS: 42"]
    assert replay_run(db, engine.run_id).identical


def test_a_resumed_run_offers_its_recorded_tools_whatever_the_prefix_is_now(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"

    def agent(task: str, prefix: str) -> AgentBuilder:
        return AgentBuilder(task).mcp_server_stdio(
            sys.executable, [str(SERVER)], name="calc", prefix=prefix
        )

    llm = [
        LlmResponse.tool_call("calc_shout", {"text": "resumed"}),
        LlmResponse.final_answer("The server shouted RESUMED back."),
    ]
    engine = agent("shout", "calc_").require_approval("calc_shout").llm(MockLlmCaller(llm))
    waiting = engine.store(db).build()
    with pytest.raises(HumanInputRequired):
        waiting.run()

    def make(task: str) -> AgentBuilder:
        return agent(task, "").llm(MockLlmCaller(llm[1:])).on_approval(lambda request: True)

    resume_run(db, waiting.run_id, make)
    assert [x.observation for x in executed(db, waiting.run_id)] == ["SUCCESS: RESUMED"]


def test_a_branch_runs_new_calls_on_the_server(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id = record(stdio, db)
    store = SQLiteEventStore(db)
    first = next(e.seq for e in Trace.load(store, run_id) if e.event == "Transitioned")
    store.close()
    new = branch_run(
        db,
        run_id,
        at=first,
        llm=MockLlmCaller([LlmResponse.tool_call("shout", {"text": "hi"}), *script()[3:]]),
        builder=stdio,
        live_tools=True,
    ).run_id
    assert [x.observation for x in executed(db, new)] == ["SUCCESS: HI"]


def test_a_server_that_dies_mid_call_fails_that_call_and_the_next_call_restarts_it() -> None:
    llm = MockLlmCaller(
        [
            LlmResponse.tool_call("count", {}),
            LlmResponse.tool_call("crash", {}),
            LlmResponse.tool_call("count", {}),
            LlmResponse.final_answer("The server crashed once and came back."),
        ]
    )
    engine = stdio("crash").llm(llm).build()
    engine.run()
    observations = [entry.observation for entry in engine.memory.history]
    assert observations[0] == "SUCCESS: 1" and observations[2] == "SUCCESS: 1"  # a new process
    assert observations[1].startswith("ERROR: ") and "Connection closed" in observations[1]


@pytest.mark.parametrize(
    "declare",
    [
        lambda b, port: b.mcp_server_stdio(sys.executable, [str(SERVER), "--crash"], name="calc"),
        lambda b, port: b.mcp_server_stdio("/nonexistent/mcp-server", name="calc"),
        lambda b, port: b.mcp_server_http(f"http://127.0.0.1:{port}/mcp", name="calc"),
    ],
    ids=["exits-at-start", "no-such-command", "unreachable-url"],
)
def test_a_server_that_cannot_be_reached_is_one_clear_error(
    declare: Callable[[AgentBuilder, int], AgentBuilder], tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    with socket.socket() as bound:  # bound, never listening: connections to it are refused
        bound.bind(("127.0.0.1", 0))
        builder = declare(AgentBuilder("t"), bound.getsockname()[1])
        with pytest.raises(McpServerUnavailable) as raised:
            builder.llm(MockLlmCaller([])).store(db).build()
    message = str(raised.value)
    assert message.startswith("MCP server 'calc' (") and "could not be reached" in message
    assert isinstance(raised.value, BuildError) and raised.value.server == "calc"
    store = SQLiteEventStore(db, create=True)
    assert store.runs() == []  # nothing was recorded
    store.close()


def test_a_whole_command_line_given_as_the_command_says_to_split_it() -> None:
    builder = AgentBuilder("t").mcp_server_stdio("/nonexistent/mcp-server --port 'a b'")
    with pytest.raises(McpServerUnavailable) as raised:
        builder.llm(MockLlmCaller([])).store(":memory:").build()
    assert (
        "its arguments go apart: mcp_server_stdio('/nonexistent/mcp-server', ['--port', 'a b'])"
        in str(raised.value)
    )


def test_a_tool_name_the_agent_has_already_is_refused_unless_prefixed() -> None:
    def add(a: int, b: int) -> int:
        """Local addition."""
        return a + b

    with pytest.raises(BuildError, match=r"offers a tool named 'add'.*prefix='calc_'"):
        stdio("t").tool(add).llm(MockLlmCaller([])).build()
    engine = (
        AgentBuilder("t")
        .tool(add)
        .mcp_server_stdio(sys.executable, [str(SERVER)], name="calc", prefix="calc_")
        .llm(MockLlmCaller([]))
        .build()
    )
    assert engine.tools.names()[:3] == ["add", "calc_add", "calc_shout"]
    assert engine.tools.execute("calc_add", {"a": 1, "b": 2}).observation == "SUCCESS: 3"
    with pytest.raises(BuildError, match="Two MCP servers are named 'calc'"):
        stdio("t").mcp_server_stdio(sys.executable, [str(SERVER)], name="calc")


def test_the_server_process_ends_with_the_run_even_inside_a_running_loop() -> None:
    builder = stdio("pids").llm(
        MockLlmCaller(
            [LlmResponse.tool_call("pid", {}), LlmResponse.final_answer("pid noted, done now.")] * 2
        )
    )
    first = builder.build()

    async def in_a_notebook() -> str:  # run() inside a running loop: a helper thread's loop
        return first.run()

    asyncio.run(in_a_notebook())
    second = builder.build()
    second.run()  # the same builder's servers, another loop: no client bound to a dead one

    async def built_in_a_notebook() -> AgentEngine:  # the tools are listed on a helper loop
        return stdio("fails").llm(MockLlmCaller([LlmResponse.tool_call("pid", {})])).build()

    failing = asyncio.run(built_in_a_notebook())
    with pytest.raises(AgentFailed):  # the LLM runs out after the call: the run ends in Error
        failing.run()
    pids = [
        int(e.fact.observation.removeprefix("SUCCESS: "))
        for engine in (first, second, failing)
        for e in engine.trace()
        if isinstance(e.fact, f.ToolExecuted)
    ]
    assert len(set(pids)) == 3
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # stopped and reaped when its run returned


def test_a_run_stopped_from_outside_stops_its_server_process() -> None:
    llm = MockLlmCaller(
        [LlmResponse.tool_call("pid", {}), LlmResponse.tool_call("wait", {"seconds": 600})]
    )
    engine = stdio("stop me").llm(llm).build()

    async def watch() -> None:
        async with contextlib.aclosing(engine.stream()) as outputs:
            async for output in outputs:
                if isinstance(output, ToolStarted) and output.call.name == "wait":
                    break  # leaving the stream cancels the run, as Ctrl-C would

    asyncio.run(watch())
    assert engine.store.run(engine.run_id).status == "stopped"
    (first,) = [e.fact for e in engine.trace() if isinstance(e.fact, f.ToolExecuted)]
    with pytest.raises(ProcessLookupError):
        os.kill(int(first.observation.removeprefix("SUCCESS: ")), 0)


def test_a_recorded_server_is_never_contacted() -> None:
    engine = stdio("t").llm(MockLlmCaller([])).build()
    spec = engine.definition.mcp_servers[0]
    recorded = McpServer.recorded(spec, engine.definition.tools)
    assert "recorded" in repr(recorded) and "calc" in repr(recorded)
    outcome = (
        AgentBuilder("t")
        .mcp_server(recorded)
        .llm(MockLlmCaller([]))
        .build()
        .tools.execute("add", {"a": 1, "b": 2})
    )
    assert not outcome.success and "only its recorded results" in outcome.observation


def test_a_stdio_server_starts_where_sys_stderr_is_not_a_file() -> None:
    # as in a Jupyter kernel whose stderr is a stream of its own, or output redirected to a
    # StringIO: the server's stderr goes to the process's own, and the run uses the server
    script = f"""
import contextlib, io, sys
from agentsm import AgentBuilder, LlmResponse, MockLlmCaller

script = [LlmResponse.tool_call("add", {{"a": 2, "b": 3}}),
          LlmResponse.final_answer("2 + 3 = 5, says the server.")]
with contextlib.redirect_stderr(io.StringIO()):
    engine = (AgentBuilder("2 + 3").mcp_server_stdio(sys.executable, [{str(SERVER)!r}])
              .llm(MockLlmCaller(script)).build())
    engine.run()
print(engine.memory.history[0].observation)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "SUCCESS: 5"
