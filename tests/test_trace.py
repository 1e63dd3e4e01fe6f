"""Trace, the read view over a run's log, and streamed text from a provider."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

from agentsm import AgentBuilder, LlmResponse, TextDelta, Trace
from agentsm.llm import emit_text

from .scenarios import SCENARIOS


def test_trace_views() -> None:
    engine = SCENARIOS["parallel"]().build()
    engine.run()
    trace = engine.trace()
    assert isinstance(trace, Trace) and len(trace) == len(trace.entries())
    data = json.loads(trace.to_json())
    assert [d["seq"] for d in data] == [e.seq for e in trace]
    assert data[0]["fact"]["kind"] == "RunStarted" and data[0]["fact"]["task"] == "parallel"
    executed = [d for d in data if d["event"] == "ToolExecuted"]
    assert all("duration_ms" in d["metrics"] for d in executed)
    assert {e.state for e in trace.for_state("ParallelActing")} == {"ParallelActing"}
    out = io.StringIO()
    trace.print(file=out)
    assert "ParallelActing --ToolFailure--> Observing" in out.getvalue()


class StreamingLlm:
    """A provider that streams its answer in fragments."""

    async def call(self, memory: Any, tools: Any, model: str) -> LlmResponse:
        for part in ("The answer ", "arrives ", "in pieces, as streamed."):
            emit_text(part)
            await asyncio.sleep(0)
        return LlmResponse.final_answer("The answer arrives in pieces, as streamed.")


def test_stream_passes_text_deltas_as_they_arrive() -> None:
    engine = AgentBuilder("stream it").llm(StreamingLlm()).build()

    async def collect() -> list[Any]:
        return [o async for o in engine.stream()]

    outputs = asyncio.run(collect())
    deltas = [o.text for o in outputs if isinstance(o, TextDelta)]
    assert deltas == ["The answer ", "arrives ", "in pieces, as streamed."]
    assert engine.memory.final_answer == "".join(deltas)
    emit_text("outside a run: ignored")
