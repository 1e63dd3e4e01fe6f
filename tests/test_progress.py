"""A tool reports how it is going (`ctx.progress`) and hands over part of its result
(`ctx.partial`), from sync and async tools alike: `engine.stream()` yields them in order
before the call's result, the log keeps only how many there were (measurements, not facts),
and a replay is identical whether the tool reported or not."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agentsm import (
    AgentBuilder,
    AgentEngine,
    AgentOutput,
    LlmResponse,
    MockLlmCaller,
    ToolCall,
    ToolContext,
    ToolFinished,
    ToolPartial,
    ToolProgress,
    ToolStarted,
    tool,
)
from agentsm.trace import Trace
from eventstore import SQLiteEventStore
from replay import assert_replays, replay_run
from replay.cli import cli
from replay.tail import follow

ANSWER = "Both reports were fetched and read."


def fetcher(reporting: bool) -> Any:
    """A sync tool that reports each page (or stays silent) and returns the same result."""

    @tool(idempotent=True)
    def fetch(pages: int, ctx: ToolContext) -> str:
        """Fetch the report's pages."""
        for page in range(1, pages + 1):
            if reporting:
                ctx.progress(f"page {page} of {pages}")
                ctx.partial({"page": page})
        return f"{pages} pages"

    return fetch


def summarizer(reporting: bool) -> Any:
    """An async tool, reporting (or not) between its awaits."""

    @tool(idempotent=True)
    async def summarize(text: str, ctx: ToolContext) -> str:
        """Summarize a text."""
        for word in text.split():
            if reporting:
                ctx.progress(f"read {word}")
            await asyncio.sleep(0)
        return f"summary of {text}"

    return summarize


def script() -> list[LlmResponse]:
    return [  # ids given: two runs of the script record the same facts
        LlmResponse.tool_calls([ToolCall(name="fetch", args={"pages": 3}, id="c1")]),
        LlmResponse.tool_calls([ToolCall(name="summarize", args={"text": "sales up"}, id="c2")]),
        LlmResponse.final_answer(ANSWER),
    ]


def agent(reporting: bool, task: str = "read the reports") -> AgentBuilder:
    return (
        AgentBuilder(task)
        .llm(MockLlmCaller(script()))
        .tool(fetcher(reporting))
        .tool(summarizer(reporting))
    )


def streamed(engine: AgentEngine) -> list[AgentOutput]:
    async def collect() -> list[AgentOutput]:
        return [out async for out in engine.stream()]

    return asyncio.run(collect())


def tool_outputs(outputs: list[AgentOutput]) -> list[tuple[str, str, Any]]:
    shown: list[tuple[str, str, Any]] = []
    for out in outputs:
        if isinstance(out, ToolStarted):
            shown.append(("started", out.call.name, None))
        elif isinstance(out, ToolProgress):
            shown.append(("progress", out.call.name, out.text))
        elif isinstance(out, ToolPartial):
            shown.append(("partial", out.call.name, out.value))
        elif isinstance(out, ToolFinished):
            shown.append(("finished", out.call.name, out.observation))
    return shown


def facts_of(store: SQLiteEventStore, run_id: str) -> list[Any]:
    return [e.fact for e in Trace.load(store, run_id).entries()]


def test_reports_stream_in_order_before_the_result_and_the_facts_do_not_change(
    tmp_path: Path,
) -> None:
    store = SQLiteEventStore(tmp_path / "log.db")
    loud = agent(True).store(store).run_id("loud").build()
    assert tool_outputs(streamed(loud)) == [
        ("started", "fetch", None),
        ("progress", "fetch", "page 1 of 3"),
        ("partial", "fetch", {"page": 1}),
        ("progress", "fetch", "page 2 of 3"),
        ("partial", "fetch", {"page": 2}),
        ("progress", "fetch", "page 3 of 3"),
        ("partial", "fetch", {"page": 3}),
        ("finished", "fetch", "SUCCESS: 3 pages"),
        ("started", "summarize", None),
        ("progress", "summarize", "read sales"),
        ("progress", "summarize", "read up"),
        ("finished", "summarize", "SUCCESS: summary of sales up"),
    ]
    quiet = agent(False).store(store).run_id("quiet").build()
    assert quiet.run() == ANSWER
    # what the run records is the same, reports or none: only the measurements count them
    assert facts_of(store, "loud") == facts_of(store, "quiet")
    results = [e for e in Trace.load(store, "loud").entries() if e.event == "ToolExecuted"]
    assert [(e.metrics.get("progress"), e.metrics.get("partials")) for e in results] == [
        (3, 3),
        (2, None),
    ]
    assert results[0].data.endswith("(3 progress reports, 3 partial results)")
    assert all(
        "progress" not in e.metrics
        for e in Trace.load(store, "quiet").entries()
        if e.event == "ToolExecuted"
    )
    # replayed with the tools served, or run again, with reports or without: identical
    for run_id in ("loud", "quiet"):
        for reporting in (True, False):
            assert_replays(store, run_id, lambda task, r=reporting: agent(r, task))
            report = replay_run(
                store, run_id, lambda task, r=reporting: agent(r, task), execute_tools=True
            )
            assert report.identical, report
    assert_replays(store, "loud")  # with the recorded definition alone
    store.close()


def test_parallel_calls_each_report_under_their_own_call_before_their_results() -> None:
    calls = [
        ToolCall(name="fetch", args={"pages": 2}),
        ToolCall(name="summarize", args={"text": "a b"}),
    ]
    engine = (
        AgentBuilder("both at once")
        .llm(MockLlmCaller([LlmResponse.tool_calls(calls), LlmResponse.final_answer(ANSWER)]))
        .tool(fetcher(True))
        .tool(summarizer(True))
        .build()
    )
    shown = tool_outputs(streamed(engine))
    for name, reports in (("fetch", 4), ("summarize", 2)):
        mine = [kind for kind, who, _ in shown if who == name]
        assert mine == ["started", *mine[1 : 1 + reports], "finished"]
        assert set(mine[1:-1]) <= {"progress", "partial"} and len(mine) == reports + 2
    texts = [value for kind, who, value in shown if kind == "progress" and who == "fetch"]
    assert texts == ["page 1 of 2", "page 2 of 2"]  # each call's own order is kept


def test_a_report_from_a_thread_the_tool_started_reaches_the_stream_first() -> None:
    @tool
    def crawl(ctx: ToolContext) -> str:
        """Crawl with helper threads."""
        helpers = [threading.Thread(target=ctx.progress, args=(f"site {n}",)) for n in range(3)]
        for helper in helpers:
            helper.start()
        for helper in helpers:
            helper.join()
        return "crawled"

    engine = (
        AgentBuilder("crawl")
        .llm(MockLlmCaller([LlmResponse.tool_call("crawl", {}), LlmResponse.final_answer(ANSWER)]))
        .tool(crawl)
        .build()
    )
    shown = tool_outputs(streamed(engine))
    assert shown[0] == ("started", "crawl", None) and shown[-1][0] == "finished"
    assert sorted(value for _, _, value in shown[1:-1]) == ["site 0", "site 1", "site 2"]
    assert engine.trace().entries()[-1].fact.kind == "RunFinished"


def test_reports_of_a_call_abandoned_at_its_timeout_are_dropped() -> None:
    release, reported = threading.Event(), threading.Event()

    @tool(idempotent=True, timeout=0.05)
    def slow(ctx: ToolContext) -> str:
        """Never in time."""
        release.wait(10)
        ctx.progress("too late")
        reported.set()
        return "late"

    engine = (
        AgentBuilder("slow")
        .llm(MockLlmCaller([LlmResponse.tool_call("slow", {}), LlmResponse.final_answer(ANSWER)]))
        .tool(slow)
        .build()
    )
    outputs = streamed(engine)
    release.set()
    assert reported.wait(10)
    assert not any(isinstance(out, ToolProgress) for out in outputs)
    timed_out = [e for e in engine.trace().entries() if e.event == "ToolExecuted"][0]
    assert "TimeoutError" in timed_out.fact.observation and "progress" not in timed_out.metrics


def test_a_tool_tested_alone_gets_its_reports_through_on_report() -> None:
    seen: list[tuple[str, Any]] = []
    fetch = fetcher(True)
    ctx = ToolContext("", "", "fetch", on_report=lambda kind, value: seen.append((kind, value)))
    assert fetch(pages=1, ctx=ctx) == "1 pages"
    assert seen == [("progress", "page 1 of 1"), ("partial", {"page": 1})]
    fetch(pages=2, ctx=ToolContext("", "", "fetch"))  # no listener: nothing to do
    with pytest.raises(TypeError, match=r"ctx.partial\(value\)"):
        ctx.progress(42)  # type: ignore[arg-type]
    assert repr(ToolProgress(ToolCall(name="fetch"), "page 1 of 3")) == (
        "ToolProgress('fetch', 'page 1 of 3')"
    )
    assert repr(ToolPartial(ToolCall(name="fetch"), {"page": 1})) == (
        "ToolPartial('fetch', {'page': 1})"
    )


def test_show_tail_and_the_viewer_say_how_many_reports_a_call_made(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    store = SQLiteEventStore(db)
    agent(True).store(store).run_id("r1").build().run()

    async def tailed() -> list[str]:
        return [fact.entry.data async for fact in follow(store, "r1")]

    lines = asyncio.run(tailed())
    assert "fetch -> SUCCESS: 3 pages (3 progress reports, 3 partial results)" in lines
    store.close()
    shown = CliRunner().invoke(cli, ["--db", str(db), "show", "r1"])
    assert shown.exit_code == 0, shown.output
    assert "(2 progress reports)" in shown.output
    pytest.importorskip("fastapi", reason="the web viewer needs the ui extra")
    from fastapi.testclient import TestClient

    from replay.ui import Viewer, create_app

    with (
        TestClient(create_app(Viewer(str(db))), base_url="http://127.0.0.1") as api,
        api.stream("GET", "/api/runs/r1/live") as live,
    ):
        said = [json.loads(line[5:]) for line in live.iter_lines() if line.startswith('data: {"')]
    results = [fact for fact in said if fact["kind"] == "ToolExecuted"]
    assert [fact["summary"] for fact in results] == [
        "fetch -> SUCCESS: 3 pages (3 progress reports, 3 partial results)",
        "summarize -> SUCCESS: summary of sales up (2 progress reports)",
    ]
    assert [fact["metrics"].get("partials") for fact in results] == [3, None]
