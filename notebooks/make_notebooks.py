"""Write the notebooks and execute them top to bottom, saving their outputs.

    python notebooks/make_notebooks.py          # needs: pip install -e '.[notebooks]'

Each notebook runs in a scratch directory (its databases do not land in the repository); the
executed notebooks, outputs included, are written next to this script.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent


def md(text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_markdown_cell(text.strip())


def code(text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_code_cell(text.strip())


QUICKSTART = [
    md("""
# 1. Quickstart: an agent as an event-sourced state machine

Build an agent with tools on the scripted mock LLM, run it, read its trace, and rebuild its
memory from the SQLite log: memory is never stored, it is the fold of the recorded facts.
"""),
    code("""
%matplotlib inline
from agentsm import AgentBuilder, AgentMemory, LlmResponse, MockLlmCaller, State, ToolCall, tool
from eventstore import SQLiteEventStore


@tool
def search(query: str) -> str:
    \"\"\"Search a tiny offline encyclopedia.\"\"\"
    facts = {"capital of france": "Paris is the capital of France.",
             "population of paris": "About 2,102,650 people live in Paris.",
             "area of paris": "Paris covers 105.4 km²."}
    return facts.get(query.lower(), f"No results for {query!r}.")


@tool
def divide(a: float, b: float) -> float:
    \"\"\"Divide a by b.\"\"\"
    return round(a / b, 1)


llm = MockLlmCaller([
    LlmResponse.tool_call("search", {"query": "capital of France"}),
    LlmResponse.tool_calls([ToolCall(name="search", args={"query": "population of Paris"}),
                            ToolCall(name="search", args={"query": "area of Paris"})]),
    LlmResponse.tool_call("divide", {"a": 2102650, "b": 105.4}),
    LlmResponse.final_answer("Paris is the capital; about 19,949 people live on each km²."),
])
engine = (
    AgentBuilder("What is the capital of France, and how dense is it?")
    .system_prompt("You are a careful research assistant.")
    .llm(llm).tool(search).tool(divide)
    .store("quickstart.db")
    .build()
)
print(engine.run())
print(engine.current_state(), "after", engine.memory.step, "steps")
"""),
    md("Every fact of the run, in order. Each one names what happened, in the past tense:"),
    code("engine.trace().print()"),
    md("The memory at the end is a frozen value; its history is what the LLM sees next time:"),
    code("""
for entry in engine.memory.history:
    print(entry.step, entry.tool.name, entry.tool.args, "->", entry.observation)
engine.memory.build_messages()[:4]
"""),
    md("""
Open the database file again, as another process would, and fold the log. The rebuilt memory
equals the engine's, field for field:
"""),
    code("""
memory, state = AgentMemory.rebuild(SQLiteEventStore("quickstart.db"), engine.run_id)
print(state, memory == engine.memory)
"""),
    md("The machine itself, with the path this run took through it:"),
    code("""
from agentsm.pictures import path_of, state_diagram

state_diagram(engine.table, path_of(engine.trace().facts()), title="the quickstart run")
"""),
]

RECORD_REPLAY = [
    md("""
# 2. Record and replay

Record several runs into one database, replay them against their recordings, change a prompt
and a handler and see exactly where the runs diverge, and turn a recorded run into a test.
"""),
    code("""
from agentsm import AgentBuilder, LlmResponse, tool
from replay import assert_replays, replay_run


class PolicyLlm:
    \"\"\"A deterministic stand-in for a model: looks the city up, then answers.\"\"\"

    async def call(self, memory, tools, model):
        if not memory.history:
            return LlmResponse.tool_call("weather", {"city": memory.task.split()[-1].strip("?")})
        return LlmResponse.final_answer(f"Forecast: {memory.history[-1].observation[9:]}.")


@tool
def weather(city: str) -> str:
    \"\"\"Today's weather in a city.\"\"\"
    return {"Oslo": "3°C and snowing", "Rome": "18°C, clear"}.get(city, "unknown city")


def make_agent(task: str) -> AgentBuilder:
    return AgentBuilder(task).system_prompt("Answer with the forecast.").llm(PolicyLlm()).tool(weather)


run_ids = []
for task in ["What is the weather in Oslo?", "What is the weather in Rome?", "What is the weather in Lima?"]:
    engine = make_agent(task).store("weather.db").build()
    print(engine.run())
    run_ids.append(engine.run_id)
"""),
    md(
        "Replay serves each run's recorded LLM responses and tool results to the current agent and compares every fact:"
    ),
    code("""
for run_id in run_ids:
    print(replay_run("weather.db", run_id, builder=make_agent))
"""),
    md(
        "A changed prompt word is reported at the first fact it changes (`RunStarted` records the prompt):"
    ),
    code("""
report = replay_run("weather.db", run_ids[0], builder=lambda t: make_agent(t).system_prompt("Answer briefly."))
print(report)
"""),
    md(
        "A changed handler: this Observing handler asks for reflection after every step. The divergence names the transition where the behaviour changed:"
    ),
    code("""
from agentsm import Event
from agentsm.states import ObservingState


class ReflectAlways(ObservingState):
    async def handle(self, ctx):
        await super().handle(ctx)
        return Event.NeedsReflection


report = replay_run("weather.db", run_ids[1], builder=lambda t: make_agent(t).handler("Observing", ReflectAlways()))
print(report.divergence.headline())
print(report.divergence.diff)
"""),
    md("""
Recorded runs as regression tests: `assert_replays` raises with the divergence report.
In a test module:

```python
def test_recorded_weather_runs():
    for run in SQLiteEventStore("weather.db").runs():
        assert_replays("weather.db", run.run_id, make_agent)
```

and for a whole corpus from the shell: `agentsm --db weather.db replay --all --builder myagent:make_agent`.
"""),
    code("""
for run_id in run_ids:
    assert_replays("weather.db", run_id, make_agent)
print("all recorded runs replay identical")
"""),
]

TIME_TRAVEL = [
    md("""
# 3. Time travel and branching

Look at a run's memory at any point, branch the run at a point with another LLM answer or tool
result, and compare the branches: facts, tokens, outcome. A branch reuses a recorded LLM response
or tool result only where it makes the same request at the same place; elsewhere it goes live
where you allow it (`llm=`, `live_tools=True`), or stops there and says what it would need.
"""),
    code("""
%matplotlib inline
from agentsm import LlmResponse, TokenUsage
from replay import branch_run, diff_runs, memory_at
from replay.demo import demo_agent

engine = demo_agent().store("branches.db").build()
engine.run()
run_id = engine.run_id
for seq in (6, 20, 29, 45):
    memory, state = memory_at("branches.db", run_id, seq=seq)
    print(f"seq {seq:>2}: {state:<15} step={memory.step} history={len(memory.history)} "
          f"tokens={memory.total_usage.total_tokens} answer={memory.final_answer!r:.40}")
"""),
    md(
        "At seq 27 the LLM called a blacklisted tool. Branch just before that answer with another one:"
    ),
    code("""
short = branch_run("branches.db", run_id, at=26, llm_response=LlmResponse.final_answer(
    "Paris is the capital; about 2.1 million people live on its 105.4 km².",
    usage=TokenUsage(input_tokens=640, output_tokens=30)))
print(short)
print(diff_runs(engine.store, run_id, short.run_id))
"""),
    md("""
Seq 26 is inside a step, so the branch starts after seq 24, the last complete transition, and says
so. A second branch, earlier, where the population search returns something else. The recorded
area search is the same call at the same place, so its result is reused; the next LLM request
holds the new figure, and the recorded answer was given to another request: without a live LLM
the branch stops there, status `stopped`, and says what it needs.
"""),
    code("""
stopped = branch_run("branches.db", run_id, at=17, tool_result="About 11 million people live in greater Paris.")
print(stopped)
"""),
    md("""
Give it an LLM that reads what the tools said (a stand-in for a real model: yours is `llm=`), and
let the agent's tools run where the recording has no result for the call (`live_tools=True`, with
the builder that has them). The calculator now runs live on the new figure, and the answer is
made from it:
"""),
    code("""
import re


def number(text):
    value, million = re.search(r"(\\d[\\d,.]*)\\s*(million)?", text).groups()
    return float(value.replace(",", "")) * (1e6 if million else 1)


class Reader:
    \"\"\"Reads the figures the searches returned, divides them with the calculator, answers.\"\"\"

    async def call(self, memory, tools, model):
        said = {e.tool.args.get("query", e.tool.name): e.observation for e in memory.history}
        people, area = number(said["population of Paris"]), number(said["area of Paris"])
        if "calculator" not in said:
            return LlmResponse.tool_call("calculator", {"expression": f"{people:.0f} / {area}"})
        density = number(said["calculator"])
        return LlmResponse.final_answer(
            f"About {people:,.0f} people live on {area} km²: roughly {density:,.0f} per km².")


other = branch_run("branches.db", run_id, at=17, tool_result="About 11 million people live in greater Paris.",
                   llm=Reader(), builder=demo_agent, live_tools=True)
print(other)
print(diff_runs(engine.store, run_id, other.run_id))
"""),
    md("The family, and where each branch parted:"),
    code("""
from agentsm.pictures import family_tree

family_tree(engine.store, run_id, {short.run_id: "answered early", stopped.run_id: "needs a live LLM",
                                   other.run_id: "another population figure"})
"""),
    md(
        "And the original run's timeline: the state at every fact, tool calls, tokens per LLM call, durations:"
    ),
    code("""
from agentsm.pictures import timeline

timeline(engine.trace().entries(), title="the demo run")
"""),
]

PROPERTY = [
    md("""
# 4. Property-based testing of a custom machine

Add a `Verifying` state between Observing and Planning, check the table statically, then let
hypothesis drive the real engine through random LLM behaviour, tool outcomes and configs. Then
plant a bug in a handler and watch the kit catch it, shrink it, and print it as Python; and
seed generated runs with recorded ones.
"""),
    code("""
from agentsm import build_transition_table
from agentsm.testing import check_table


class VerifyingState:
    name = "Verifying"
    emits = frozenset({"Verified", "Doubtful"})

    async def handle(self, ctx):
        last = ctx.memory.history[-1] if ctx.memory.history else None
        return "Verified" if last is None or last.success else "Doubtful"


table = (build_transition_table()
         .without_rows(("Observing", "Continue"))
         .with_rows({("Observing", "Continue"): "Verifying",
                     ("Verifying", "Verified"): "Planning",
                     ("Verifying", "Doubtful"): "Planning"}))
print(check_table(table, {"Verifying": VerifyingState()}))
"""),
    md(
        "A mistake: `Doubtful` loops back into `Verifying` instead of going on. The report names it:"
    ),
    code("""
broken = table.with_rows({("Verifying", "Doubtful"): "Verifying"}).without_rows(("Verifying", "Verified"))
print(check_table(broken, {"Verifying": VerifyingState()}))
"""),
    md("""
A handler written as a plain function declares no `emits`, so the static check cannot know what
it returns; the report says so rather than calling it fine:
"""),
    code("""
def verify(ctx):
    return "Verified"

print(check_table(table, {"Verifying": verify}))
"""),
    md("""
Generated runs of the real engine, each checked against every invariant. Importing
`agentsm.testing` loaded the fast profile (25 examples; `AGENTSM_HYPOTHESIS_PROFILE=agentsm-thorough`
for 1000); `derandomize=True` only keeps this page the same each time it is run.
"""),
    code("""
from collections import Counter
from hypothesis import given, settings
from agentsm.testing import agent_runs, sample_agent


def make_agent(task):
    return sample_agent(task).transitions(table).handler("Verifying", VerifyingState())


outcomes, reasons = Counter(), Counter()

@settings(derandomize=True, database=None)
@given(agent_runs(builder=make_agent))
def test_verifying_agent(run):
    outcomes[run.outcome] += 1
    reasons.update(x.reason for x in run.trace.facts() if x.kind == "RunFailed")
    run.assert_invariants()

test_verifying_agent()
print(dict(outcomes))
print(dict(reasons))
"""),
    md("""
Many generated runs end "failed", and that is what they are for: a failed run is one that
ended in `Error` the way the table says it may, and every invariant still held. The reasons
say where: `llm_error` when the generated LLM script ran out or the provider failed (half the
scripts have no closing answer), `max_steps` when the drawn `max_steps` (0 to 8) was reached,
`budget` when the drawn token budget ran out. A run that breaks an invariant fails the test
instead, as the next cell shows.

Now plant a bug, through the public API: a `Verifying` handler whose author forgot one case.
After a failed tool call it returns `Recheck`, which has no row in the table (and is not in its
`emits` either). Hypothesis finds a run that reaches it, shrinks it, and the report prints
Python to paste into a test:
"""),
    code("""
from hypothesis import strategies as st
from agentsm.testing import ToolBehaviour


class ForgetfulVerifying(VerifyingState):
    async def handle(self, ctx):
        last = ctx.memory.history[-1] if ctx.memory.history else None
        return "Recheck" if last is not None and not last.success else "Verified"


def make_buggy_agent(task):
    return sample_agent(task).transitions(table).handler("Verifying", ForgetfulVerifying())


tools = st.sampled_from([ToolBehaviour("success", "ok"), ToolBehaviour("exception", "boom")])

@settings(derandomize=True, database=None, max_examples=100)
@given(agent_runs(builder=make_buggy_agent, behaviours=tools, max_script=6))
def test_buggy_agent(run):
    run.assert_invariants()

try:
    test_buggy_agent()
except AssertionError as error:
    print(error)
"""),
    md("""
The shrunk run can be kept in a database and looked at with `agentsm show RUN --db failing.db`
(or replayed, or opened in the viewer):
"""),
    code("""
from agentsm import AgentConfig, LlmResponse
from agentsm.testing import run_inputs

run = run_inputs([LlmResponse.tool_call("lookup", {"key": "a"})], AgentConfig(), {"lookup": ToolBehaviour("exception", "boom")},
                 [], None, builder=make_buggy_agent)
print(run.violations()[0])
print("saved run", run.save("failing.db"), "to failing.db")
"""),
    md("""
Generated runs can also start from real ones. `from_recorded(db, builder)` takes runs recorded
in production, changes them the way real traffic nearly goes (a tool call dropped or repeated,
arguments corrupted, an answer cut short or empty, a tool result turned into an error, other
token usage) and runs them again on the recorded answers and tool results. Two clean runs of
the buggy agent are recorded here; their mutations find the same bug:
"""),
    code("""
from agentsm import MockLlmCaller
from agentsm.testing import from_recorded

for key in ("a", "b"):
    make_buggy_agent(f"look {key} up").store("production.db").llm(MockLlmCaller([
        LlmResponse.tool_call("lookup", {"key": key}),
        LlmResponse.final_answer(f"The value of {key} is known."),
    ])).build().run()

@settings(derandomize=True, database=None)
@given(from_recorded("production.db", builder=make_buggy_agent))
def test_recorded_traffic(run):
    run.assert_invariants()

try:
    test_recorded_traffic()
except AssertionError as error:
    print(str(error).split("reproduce with:")[0])
"""),
]

HUMAN = [
    md("""
# 5. Human in the loop, across processes

A run needs approval for a payment. With no one to ask, it stops in `WaitingForHuman` and the
process ends. Later, someone approves with other arguments; a new process resumes the run from
the log.
"""),
    code("""
from pathlib import Path

_ = Path("payments_agent.py").write_text('''
from agentsm import AgentBuilder, LlmResponse, tool


class PolicyLlm:
    async def call(self, memory, tools, model):
        if not memory.history:
            return LlmResponse.tool_call("pay", {"amount": 500, "to": "bob"})
        return LlmResponse.final_answer("Done: " + memory.history[-1].observation)


@tool
def pay(amount: int, to: str) -> str:
    \"\"\"Pay someone.\"\"\"
    return f"paid {amount} to {to}"


def make_agent(task):
    return AgentBuilder(task).llm(PolicyLlm()).tool(pay).require_approval("pay")
''')
"""),
    md("Process 1 runs the agent, which stops waiting for a decision; the process exits:"),
    code("""
import subprocess, sys

script = '''
from agentsm import HumanInputRequired
from payments_agent import make_agent
engine = make_agent("Pay bob for the bikes").store("payments.db").run_id("pay-1").build()
try:
    engine.run()
except HumanInputRequired as e:
    print("waiting:", e.requests[0].call.name, e.requests[0].call.args)
'''
print(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True).stdout)
"""),
    code("""
from eventstore import SQLiteEventStore
from replay import decide, pending_requests, resume_run

print(SQLiteEventStore("payments.db").run("pay-1").status)
print(pending_requests("payments.db", "pay-1"))
"""),
    md(
        "A human decides (here from Python; from a shell: `agentsm --db payments.db modify pay-1 --args '{...}'`):"
    ),
    code("""
decide("payments.db", "pay-1", "modified", args={"amount": 50, "to": "bob"}, note="capped")
"""),
    md("Process 2 resumes the run from the log:"),
    code("""
script = '''
from payments_agent import make_agent
from replay import resume_run
print(resume_run("payments.db", "pay-1", make_agent))
'''
print(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True).stdout)
"""),
    code("""
from agentsm.trace import Trace

for entry in Trace.load(SQLiteEventStore("payments.db"), "pay-1"):
    if entry.event in ("ApprovalRequested", "HumanDecided", "ToolExecuted", "Transitioned"):
        print(entry.seq, entry.state, entry.event, entry.data)
"""),
]

PROVIDERS = [
    md("""
# 6. Providers: OpenAI-compatible and Anthropic, streaming

The real `OpenAiCaller` and `AnthropicCaller`, on the official SDKs, talking HTTP to a small
local server that speaks each provider's wire format (offline). The last cell shows how to use
a real key instead.
"""),
    code("""
import json, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def sse(chunks):
    return "".join(f"data: {json.dumps(c)}\\n\\n" for c in chunks) + "data: [DONE]\\n\\n"


def chunk(delta, finish=None):
    return {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "local",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


class FakeProvider(BaseHTTPRequestHandler):
    \"\"\"OpenAI chat completions (streamed) and Anthropic messages, scripted on the conversation.\"\"\"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        answered = any(m["role"] == "tool" for m in body["messages"]) or any(
            isinstance(m["content"], list) and any(b.get("type") == "tool_result" for b in m["content"])
            for m in body["messages"])
        if self.path.endswith("/chat/completions"):
            if answered:
                words = ["It ", "is ", "sunny ", "in ", "Lisbon, ", "22°C."]
                out = [chunk({"role": "assistant", "content": w}) for w in words] + [chunk({}, "stop")]
            else:
                out = [chunk({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                              "function": {"name": "weather", "arguments": ""}}]}),
                       chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]}),
                       chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Lisbon"}'}}]}),
                       chunk({}, "tool_calls")]
            payload, kind = sse(out).encode(), "text/event-stream"
        else:
            content = ([{"type": "text", "text": "Sunny in Lisbon, 22°C."}] if answered else
                       [{"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Lisbon"}}])
            payload = json.dumps({"id": "msg_1", "type": "message", "role": "assistant", "model": body["model"],
                                  "content": content, "stop_reason": "end_turn" if answered else "tool_use",
                                  "usage": {"input_tokens": 120, "output_tokens": 20}}).encode()
            kind = "application/json"
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


server = ThreadingHTTPServer(("127.0.0.1", 0), FakeProvider)
threading.Thread(target=server.serve_forever, daemon=True).start()
base = f"http://127.0.0.1:{server.server_address[1]}"
print("local provider at", base)
"""),
    md(
        "An OpenAI-compatible endpoint (as vLLM or Ollama would be), streaming: text arrives in pieces, tool-call argument fragments are assembled into one call:"
    ),
    code("""
import asyncio
from agentsm import AgentBuilder, AgentConfig, TextDelta, ToolFinished, tool
from agentsm.llm import AnthropicCaller, OpenAiCaller


@tool
def weather(city: str) -> str:
    \"\"\"Today's weather in a city.\"\"\"
    return f"{city}: 22°C, sunny"


def agent(llm):
    return (AgentBuilder("How is the weather in Lisbon?").llm(llm).tool(weather)
            .config(AgentConfig(min_answer_length=5)).model("local-model").build())


async def show(engine):
    async for out in engine.stream():
        if isinstance(out, TextDelta):
            print(out.text, end="|", flush=True)
        elif isinstance(out, ToolFinished):
            print(f"[{out.call.name}({out.call.args}) -> {out.observation}]")
    print()


engine = agent(OpenAiCaller(base_url=base + "/v1", api_key="local", stream=True))
await show(engine)
print(engine.memory.history[0].tool)
"""),
    md(
        "The same agent on the Anthropic caller (native `tool_use` / `tool_result` blocks; usage recorded):"
    ),
    code("""
engine = agent(AnthropicCaller(base_url=base, api_key="local"))
print(await engine.arun(), engine.memory.total_usage)
"""),
    md("""
With a real key, nothing else changes (not run here: no network):

```python
import os
llm = OpenAiCaller(stream=True) if os.environ.get("OPENAI_API_KEY") else AnthropicCaller.from_env()
engine = AgentBuilder("How is the weather in Lisbon?").llm(llm).tool(weather).model("gpt-4o-mini").build()
print(engine.run())
```
"""),
    code("server.shutdown()"),
]

EXTENDING = [
    md("""
# 7. Extending agents: MCP tools, a sub-agent, your own facts, a context window

One agent writes a voyage report from a ship's log. It reads the log through an **MCP server**'s
tool, follows a **skill**, hands a claim to a **sub-agent**, records a **fact of its own** after
every step, and reads more than its small **context window** holds. Each of these is recorded
in the log as facts, folded into memory, shown in the trace, and replayed offline: at the end
the server is gone and the run still replays identical, its child too.
"""),
    md("""
First the outside world: a tiny MCP server written with the `mcp` SDK's server API (its one tool
returns a chapter of 40 lines), and a skill, a `SKILL.md` the agent may read on demand:
"""),
    code("""
import sys
from pathlib import Path

SERVER = r\'\'\'
try:  # mcp 2.x
    from mcp.server.mcpserver import MCPServer
except ImportError:  # mcp 1.x calls it FastMCP
    from mcp.server.fastmcp import FastMCP as MCPServer

server = MCPServer("library", log_level="WARNING")


@server.tool()
def read_chapter(n: int) -> str:
    \"\"\"Read chapter n of the ship's log, one line per entry.\"\"\"
    return "\\n".join(f"chapter {n}, entry {i}: the wind held from the west." for i in range(40))


server.run("stdio")
\'\'\'
Path("library_server.py").write_text(SERVER)

Path("skills/ship-report").mkdir(parents=True, exist_ok=True)
_ = Path("skills/ship-report/SKILL.md").write_text(\'\'\'---
name: ship-report
description: How to write a voyage report from the ship's log.
---
Read every chapter, have the main claim checked, then answer in one sentence.
\'\'\')
"""),
    md("""
A fact of our own: after every step a custom `Citing` state records a `SourceCited` (which tool
gave what). The state declares the facts it may record (`records`); the reducer folds each one
into a part of memory named `sources`. The table sends `Observing --Continue-->` through it:
"""),
    code("""
from typing import Literal

from agentsm import CustomFact, build_transition_table


class SourceCited(CustomFact):
    \"\"\"A source the agent read, cited after the step that read it.\"\"\"

    kind: Literal["SourceCited"] = "SourceCited"
    step: int
    tool: str
    first_line: str


def cite(sources, fact):  # pure: the part before, one fact -> the part after
    return (*sources, f"step {fact.step}: {fact.tool} -> {fact.first_line}")


class CitingState:
    name = "Citing"
    emits = frozenset({"Cited"})
    records = frozenset({SourceCited})  # the only fact this state may record

    async def handle(self, ctx):
        last = ctx.memory.history[-1]
        ctx.record(SourceCited(step=last.step, tool=last.tool.name,
                               first_line=last.observation.splitlines()[0]))
        return "Cited"


table = (build_transition_table()
         .without_rows(("Observing", "Continue"))
         .with_rows({("Observing", "Continue"): "Citing", ("Citing", "Cited"): "Planning"}))
"""),
    md("""
The sub-agent: a fact checker with its own prompt, its own tool, its own scripted LLM and a
step limit of 3. To the parent it is one tool, `fact_checker(task)`, whose observation is the
child's answer:
"""),
    code("""
from agentsm import AgentBuilder, LlmResponse, MockLlmCaller, tool


@tool
def lookup(term: str) -> str:
    \"\"\"Look a term up in the harbour almanac.\"\"\"
    return {"west wind": "The west wind prevails at these latitudes."}.get(term, "not in the almanac")


def checker(task):
    return (AgentBuilder(task)
            .system_prompt("You check one claim against the almanac.")
            .llm(MockLlmCaller([LlmResponse.tool_call("lookup", {"term": "west wind"}),
                                LlmResponse.final_answer("Confirmed: the west wind prevails here.")]))
            .tool(lookup)
            .max_steps(3))
"""),
    md("""
The agent puts it all together. Its context window is 2000 tokens (200 kept for the answer),
far less than six chapters of 40 lines: before a request that would not fit, the run compacts
its history (old tool outputs cut to 5 lines) instead of failing with "context length exceeded".
The scripted LLM reads the skill, six chapters, asks the checker, and answers:
"""),
    code("""
from agentsm import AgentConfig


def make_agent(task):
    script = [LlmResponse.tool_call("read_skill", {"name": "ship-report"})]
    script += [LlmResponse.tool_call("read_chapter", {"n": n}) for n in range(1, 7)]
    script.append(LlmResponse.tool_call("fact_checker", {"task": "Does the west wind prevail here?"}))
    script.append(lambda memory, tools, model: LlmResponse.final_answer(
        f"Six chapters of west wind, and the checker agrees: {memory.history[-1].observation}"))
    return (AgentBuilder(task)
            .system_prompt("You write voyage reports from the ship's log.")
            .llm(MockLlmCaller(script))
            .mcp_server_stdio(sys.executable, ["library_server.py"])
            .skills("skills")
            .subagent("fact_checker", "Have a claim checked against the almanac.", checker)
            .transitions(table)
            .handler("Citing", CitingState())
            .fact(SourceCited, cite, part="sources", initial=[])
            .config(AgentConfig(max_steps=20, reflect_every_n_steps=0, context_window=2000,
                                context_reserve=200, tool_output_max_lines=5))
            .store("voyage.db"))


engine = make_agent("Write a report of the voyage.").run_id("voyage").build()
print("tools:", engine.tools.names())
print("MCP servers in the run's definition:",
      [(server.name, server.transport, server.tools) for server in engine.definition.mcp_servers])
print(engine.run())
print(engine.current_state(), "after", engine.memory.step, "steps")
"""),
    md("""
The custom facts, folded into the user part of memory `sources`. Memory is still the fold of
the log: rebuilt from the database file, it is the same, parts included:
"""),
    code("""
from agentsm import AgentMemory
from eventstore import SQLiteEventStore

for line in engine.memory.part("sources"):
    print(line)
memory, state = AgentMemory.rebuild(SQLiteEventStore("voyage.db"), "voyage")
print(state, memory == engine.memory)
"""),
    md("""
The compactions: each `ContextCompacted` records exactly which outputs were cut, so a fold, a
replay or a branch sees the same history. The run went on and finished; an old chapter is now
its first five lines:
"""),
    code("""
from agentsm import facts as f

for fact in engine.trace().facts():
    if isinstance(fact, (f.ContextLimitReached, f.ContextCompacted)):
        print(fact)
print(engine.memory.history[1].observation)
"""),
    md("""
The whole run, fact by fact: the MCP server in `RunStarted`, the skill read, each MCP call, the
custom state recording `SourceCited`, the compactions in `Reflecting`, and the sub-agent call:
"""),
    code("engine.trace().print()"),
    md("""
The family: the child ran in the same store as a run of its own, linked to the parent's call
(`voyage-8-0`: the call at step 8, position 0), as `agentsm --db voyage.db runs --tree` shows:
"""),
    code("""
import subprocess

tree = subprocess.run([sys.executable, "-m", "replay", "--db", "voyage.db", "runs", "--tree"],
                      capture_output=True, text=True)
print(tree.stdout)
"""),
    code("""
from agentsm.trace import Trace

Trace.load(engine.store, "voyage-8-0").print()
"""),
    md("""
Now the MCP server goes away: its process ended with the run, and its script is deleted, so
none can start. Replay serves the recorded LLM answers, MCP results, skill read and the child's
answer from the log, while the server's recorded tool list stands in for the server; with
`children=True` it replays the child against its own recording too:
"""),
    code("""
from replay import replay_run

Path("library_server.py").unlink()

print(replay_run("voyage.db", "voyage", make_agent).identical)
report = replay_run("voyage.db", "voyage", make_agent, children=True)
print(report.identical, [(child.run_id, child.identical) for child in report.children])
print(report)
"""),
    md("""
The server's tool list is part of the run's definition. A server that comes back changed (here, its
tool described in other words) shows as a definition change at seq 1 of the replay:
"""),
    code("""
Path("library_server.py").write_text(SERVER.replace("one line per entry", "one entry a line"))
print(replay_run("voyage.db", "voyage", make_agent))
"""),
]

REASONING = [
    md("""
# 8. Reasoning on every provider

One small agent runs on each provider agentsm speaks: Anthropic with extended thinking, OpenAI's
Responses API with reasoning, Gemini with thought signatures and thought parts, Amazon Bedrock
with reasoning content, Azure OpenAI, and OpenAI's Chat Completions. Each provider's API is
played by a small server on 127.0.0.1 from a real conversation recorded with it (in `recorded/`,
from the test cassettes of open-source projects; each file's origin and license are in
`recorded/README.md`). The official SDKs talk HTTP to it as they would to the provider, so this
runs offline and without keys.

The reasoning each model returned is recorded in the log, shown, and sent back on the next turn
as the provider requires. Then every run replays identical with the servers gone, and one is
branched and goes on live.
"""),
    code("""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from agentsm import facts as f


def recording(name):
    \"\"\"One recorded interaction: what the client sent, what the provider answered.\"\"\"
    return json.loads(Path("recorded", f"{name}.json").read_text())


class RecordedApi:
    \"\"\"A provider's API on 127.0.0.1: each request gets the next recorded answer, as the
    provider sent it (JSON, or a stream of events); what the SDK sent is kept.\"\"\"

    def __init__(self, *names, answers=()):
        self.answers = [recording(name)["response"] for name in names] + list(answers)
        self.paths, self.sent = [], []
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the providers do

            def log_message(self, *args):
                pass

            def do_POST(self):
                api.paths.append(self.path)
                api.sent.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
                answer = api.answers.pop(0)
                kind = {k.lower(): v for k, v in answer["headers"].items()}.get("content-type")
                body = answer["body"].encode()
                self.send_response(answer["status"])
                self.send_header("content-type", kind or "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def reasoning_of(engine):
    \"\"\"The reasoning recorded in a run's LLM responses: where, what kind, its text, and the
    fields of the provider's own object, kept whole to be sent back.\"\"\"
    for entry in engine.trace():
        if isinstance(entry.fact, f.LlmResponded):
            for part in entry.fact.response.reasoning:
                text = " ".join(part.text.split())
                native = part.native.get("part", part.native)  # Gemini's: the part, and its place
                fields = sorted(k for k in native if not k.startswith("_"))
                print(f"seq {entry.seq}: {part.kind} ({part.provider}) {text[:50]!r} {fields}")
"""),
    md("""
## Anthropic: extended thinking, streamed

`thinking=` takes a level (`"low"`, `"medium"`, `"high"`: budgets of 1024, 4096 and 16384
tokens), a token budget, or Anthropic's own object: here the recording's, a budget of 1024
tokens with the thinking summarized. Streamed, the thinking arrives as `ReasoningDelta`s before
the tool call, and the answer as `TextDelta`s:
"""),
    code("""
from agentsm import AgentBuilder, AgentConfig, ReasoningDelta, TextDelta, ToolFinished, tool
from agentsm.llm import AnthropicCaller

runs = {}  # provider -> run id, all in one log


@tool
def fixed_version() -> str:
    \"\"\"Return a fixed test version string\"\"\"
    return "0.32a0"


async def watch(engine):
    \"\"\"Print a run as it streams: the thinking, each tool call, the answer.\"\"\"
    now = None
    async for out in engine.stream():
        if isinstance(out, ToolFinished):
            print(f"\\n[tool] {out.call.name}({out.call.args}) -> {out.observation}", end="")
            now = None
        elif isinstance(out, (ReasoningDelta, TextDelta)):
            kind = "thinking" if isinstance(out, ReasoningDelta) else "answer"
            if kind != now:
                print(f"\\n[{kind}] ", end="")
                now = kind
            print(out.text, end="")
    print()


anthropic = RecordedApi("anthropic_thinking/08_thinking_tool_use_stream_turn1",
                        "anthropic_thinking/09_thinking_tool_use_stream_turn2_thinking_sent_back")
thinking = {"type": "enabled", "budget_tokens": 1024, "display": "summarized"}
claude = AnthropicCaller(base_url=anthropic.url, api_key="recorded", stream=True,
                         thinking=thinking, max_tokens=64000, temperature=1.0)
task = ("Use the fixed_version tool. Then tell me the version and make one short joke about it."
        " Think about it first.")
engine = (AgentBuilder(task).llm(claude).model("claude-haiku-4-5-20251001")
          .tool(fixed_version).store("providers.db").build())
await watch(engine)
runs["Anthropic"] = engine.run_id
"""),
    md("""
The thinking is recorded with the response that carried it: its text, and the whole block with
its signature. With thinking on, a turn that used tools must send its thinking back unchanged on
the next request, or the API refuses it. The second request did, first in the assistant turn,
exactly as the client that made this recording sent it:
"""),
    code("""
reasoning_of(engine)
sent = anthropic.sent[1]["messages"][1]["content"]
recorded = recording("anthropic_thinking/09_thinking_tool_use_stream_turn2_thinking_sent_back")
print([block["type"] for block in sent], "thinking block as recorded:",
      sent[0] == recorded["request"]["json"]["messages"][1]["content"][0])
"""),
    md("""
## OpenAI Responses: reasoning items, encrypted

`OpenAiResponsesCaller(thinking="low")` asks for low effort with reasoning summaries; here the
recording's own `reasoning` object. With `store=False` (the default) OpenAI keeps nothing, so the
request asks for the reasoning encrypted, and the next turn sends the reasoning item back (id,
summary and encrypted content) just before the function call it led to:
"""),
    code("""
from agentsm.llm import OpenAiResponsesCaller


@tool
def update_plan(plan: str) -> str:
    \"\"\"Write down the plan, and update it as you go.\"\"\"
    return "plan updated"


first = recording("openai_responses/06_reasoning_function_call_turn1")["request"]["json"]
openai_responses = RecordedApi(
    "openai_responses/06_reasoning_function_call_turn1",
    "openai_responses/07_reasoning_function_call_turn2_reasoning_sent_back",
)
gpt5 = OpenAiResponsesCaller(base_url=openai_responses.url + "/v1", api_key="recorded",
                             thinking={"effort": "low", "summary": "detailed"})
engine = (AgentBuilder(first["input"][0]["content"]).system_prompt(first["instructions"])
          .llm(gpt5).model("gpt-5").tool(update_plan).store("providers.db").build())
print(engine.run())
runs["OpenAI Responses"] = engine.run_id
"""),
    code("""
reasoning_of(engine)
print(engine.memory.total_usage)
sent = openai_responses.sent[1]["input"]
recorded = recording("openai_responses/07_reasoning_function_call_turn2_reasoning_sent_back")
print([item.get("type", item.get("role")) for item in sent], "reasoning item as recorded:",
      sent[1] == recorded["request"]["json"]["input"][1])
"""),
    md("""
## Gemini: thought signatures and thought parts

Gemini puts a thought signature on the function call it decided on, and the next request must
carry it back on that same part. `GeminiCaller` records it (a `redacted` piece of reasoning: a
signature without text) and sends it back in its place. Gemini's calls carry no id: each gets one
from its place in the run.
"""),
    code("""
from agentsm.llm import GeminiCaller


@tool
def get_user_country() -> str:
    \"\"\"The user's country.\"\"\"
    return "Mexico"


first = recording("google/02_function_call_thought_signature_turn1")["request"]["json"]
gemini = RecordedApi("google/02_function_call_thought_signature_turn1",
                     "google/03_function_response_turn2_final_text")
engine = (AgentBuilder(first["contents"][0]["parts"][0]["text"])
          .llm(GeminiCaller(base_url=gemini.url, api_key="recorded", api_version="v1beta"))
          .model("gemini-2.5-pro").tool(get_user_country).store("providers.db").build())
print(engine.run())
runs["Gemini"] = engine.run_id
reasoning_of(engine)
part = gemini.sent[1]["contents"][1]["parts"][0]
recorded = recording("google/03_function_response_turn2_final_text")["request"]["json"]
print(part["functionCall"], "signature as recorded:",
      part["thoughtSignature"] == recorded["contents"][1]["parts"][0]["thoughtSignature"])
"""),
    md("""
With thought summaries on (`thinking=` a level, a token budget, or Gemini's own thinking
config, here the recording's), the model's thoughts come as parts of their own: recorded as
reasoning, never as answer text, beside the signature on the answer:
"""),
    code("""
gemini_thoughts = RecordedApi("google/06_thought_parts_turn1")
gemini3 = GeminiCaller(base_url=gemini_thoughts.url, api_key="recorded", api_version="v1beta",
                       thinking={"include_thoughts": True})
engine = (AgentBuilder("How do I cross the street?").system_prompt("You are a helpful assistant.")
          .llm(gemini3).model("gemini-3-pro-preview").store("providers.db").build())
print(engine.run()[:200], "...")
runs["Gemini, thought parts"] = engine.run_id
reasoning_of(engine)
"""),
    md("""
## Amazon Bedrock: reasoning content

`BedrockCaller(thinking=...)` turns on Claude's extended thinking through Converse (in
`additionalModelRequestFields`); the answer's `reasoningContent` block is recorded whole,
signature included, and a later turn of the run sends it back unchanged. boto3 signs each
request with the credentials given: made-up ones here, as the server checks nothing.
"""),
    code("""
from agentsm.llm import BedrockCaller

bedrock = RecordedApi("bedrock/09_reasoning_content_turn1")
sonnet = BedrockCaller(endpoint_url=bedrock.url, region="us-east-1", thinking=1024,
                       aws_access_key_id="recorded", aws_secret_access_key="recorded")
engine = (AgentBuilder("How do I cross the street?").llm(sonnet)
          .model("us.anthropic.claude-sonnet-4-20250514-v1:0").store("providers.db").build())
print(engine.run()[:200], "...")
runs["Bedrock"] = engine.run_id
print(bedrock.paths[0], bedrock.sent[0]["additionalModelRequestFields"])
reasoning_of(engine)
"""),
    md("""
## Azure OpenAI: the Responses API on a deployment

`AzureOpenAiResponsesCaller` is the Responses caller on an Azure resource's v1 API (the model is
the deployment's name); `AzureOpenAiCaller` is the Chat Completions one. This model returned its
reasoning encrypted and without a summary: a `redacted` piece of reasoning, its size in the
usage's reasoning tokens.
"""),
    code("""
from agentsm.llm import AzureOpenAiResponsesCaller

azure = RecordedApi("azure_openai/05_responses_v1_reasoning")
deployment = AzureOpenAiResponsesCaller(azure_endpoint=azure.url, api_key="recorded",
                                        thinking={"context": "all_turns"})
engine = (AgentBuilder("What is the capital of France? Answer in one word.")
          .llm(deployment).model("gpt-5.5").config(AgentConfig(min_answer_length=1))
          .store("providers.db").build())
print(engine.run(), "from", azure.paths[0])
runs["Azure OpenAI"] = engine.run_id
reasoning_of(engine)
print(engine.memory.total_usage)
"""),
    md("""
## OpenAI Chat Completions: two tools, no reasoning to keep

`OpenAiCaller` sends `thinking=` as `reasoning_effort` to the models that take it. Chat
Completions returns only the count of reasoning tokens, never the reasoning, so there is nothing
to record or send back. This agent calls its two tools one after the other:
"""),
    code("""
from agentsm.llm import OpenAiCaller


@tool
def lookup_population(country: str) -> int:
    \"\"\"Returns the current population of the specified fictional country\"\"\"
    return 123124


@tool
def can_have_dragons(population: int) -> bool:
    \"\"\"Returns True if the specified population can have dragons, False otherwise\"\"\"
    return population > 100_000


openai_chat = RecordedApi("openai/03_tool_call_single_nonstream_turn1",
                          "openai/04_tool_call_single_nonstream_turn2_second_call",
                          "openai/05_tool_call_single_nonstream_turn3_final_text")
engine = (AgentBuilder("Can the country of Crumpet have dragons? Answer with only YES or NO")
          .llm(OpenAiCaller(base_url=openai_chat.url + "/v1", api_key="recorded"))
          .model("gpt-4o-mini").tool(lookup_population).tool(can_have_dragons)
          .config(AgentConfig(min_answer_length=1)).store("providers.db").build())
print(engine.run(), [(e.tool.name, e.observation) for e in engine.memory.history])
runs["OpenAI Chat Completions"] = engine.run_id
print(engine.memory.total_usage)
"""),
    md("""
## What the log holds

`agentsm show` puts the start of the thinking before each response (`thought '...'`, or
`1 redacted` for reasoning without text), and `agentsm memory RUN --messages` shows the
conversation as the LLM was sent it, reasoning on the assistant turns:
"""),
    code("""
import subprocess
import sys


def agentsm(*args):
    out = subprocess.run([sys.executable, "-m", "replay", "--db", "providers.db", *args],
                         capture_output=True, text=True)
    print(out.stdout or out.stderr)


agentsm("show", runs["Gemini, thought parts"])
"""),
    code("""agentsm("memory", runs["Anthropic"], "--messages")"""),
    md("""
## Replayed offline

The servers go away. Replay serves each run's recorded responses, reasoning included, and
compares every fact; no SDK talks to anyone:
"""),
    code("""
from replay import replay_run

for api in (anthropic, openai_responses, gemini, gemini_thoughts, bedrock, azure, openai_chat):
    api.close()
for provider, run_id in runs.items():
    print(f"{provider:24} {replay_run('providers.db', run_id)}")
"""),
    md("""
## A branch that goes on live

Branch the Anthropic run at seq 7 (the transition to Acting, before its tool ran) with another
tool result. The branch keeps the parent's facts up to there, thinking included. Its next LLM
call is a new one, so it goes live, on the caller given for it: here a server that plays an
answer written for this notebook, not a recorded one. What the branch sent is what Anthropic
requires: the parent's thinking block, from the log, signature and all, then the new result.
"""),
    code("""
from replay import branch_run

written = {"id": "msg_branch", "type": "message", "role": "assistant",
           "model": "claude-haiku-4-5-20251001", "stop_reason": "end_turn",
           "content": [{"type": "text", "text": "The version is **1.0.0**: out of alpha at last."}],
           "usage": {"input_tokens": 707, "output_tokens": 16}}
live = RecordedApi(answers=[{"status": 200, "headers": {}, "body": json.dumps(written)}])
claude = AnthropicCaller(base_url=live.url, api_key="recorded", thinking=thinking,
                         max_tokens=64000, temperature=1.0)
branch = branch_run("providers.db", runs["Anthropic"], at=7, tool_result="1.0.0", llm=claude)
print(branch)
sent = live.sent[0]["messages"]
parent = anthropic.sent[1]["messages"]
print("the parent's thinking sent back:", sent[1]["content"][0] == parent[1]["content"][0])
print("the new result:", sent[2]["content"][0]["content"])
live.close()
print(replay_run("providers.db", branch.run_id))
"""),
    md("""
With real keys, only the callers change (not run here: no network):

```python
AnthropicCaller(thinking="medium", stream=True)                  # $ANTHROPIC_API_KEY
OpenAiResponsesCaller(thinking="low")                            # $OPENAI_API_KEY
GeminiCaller(thinking="low")                                     # $GOOGLE_API_KEY
BedrockCaller(region="us-east-1", thinking="low", cache="auto")  # boto3's credentials
AzureOpenAiResponsesCaller(azure_endpoint="https://my-resource.openai.azure.com", thinking="low")
OpenAiCaller(thinking="low")                                     # sent as reasoning_effort
```
"""),
]

CONVERSATIONS = [
    md("""
# 9. Conversations: a thread of runs

A conversation with an agent is a **thread**: one run per message (a *turn*), each starting
from what the turn before it ended with. Here, ten turns with a travel assistant on a scripted
model: one turn is steered while it runs, one asks a person a question, one is stopped from
outside and resumed. Then every turn replays identical offline, the thread is branched at turn
3 with another message, and `agentsm threads` lists both.
"""),
    code("""
import threading

from agentsm import AgentBuilder, AgentConfig, LlmResponse, MockLlmCaller, tool

WEATHER = {"Lisbon": "24 °C, sunny", "Porto": "19 °C, light rain", "Madrid": "30 °C, clear"}
PLANS = {1: "Alfama and the castle", 2: "Belém and the river", 3: "Sintra"}
held = {}  # a tool's name -> a gate its next call waits at: how we act while a turn runs


class Gate:
    \"\"\"A tool call waits here until released; `reached` says it got here.\"\"\"

    def __init__(self):
        self.reached, self.released = threading.Event(), threading.Event()


def wait_if_held(name):
    gate = held.pop(name, None)
    if gate is not None:
        gate.reached.set()
        gate.released.wait(30)


@tool(idempotent=True)
def weather(city: str) -> str:
    \"\"\"Today's weather in a city.\"\"\"
    return f"{city}: {WEATHER.get(city, 'no forecast')}"


@tool(idempotent=True)
def search_hotels(city: str) -> str:
    \"\"\"Hotels in a city, with their price a night.\"\"\"
    wait_if_held("search_hotels")
    return "Palácio do Rio, 240 € a night; Casa Alfama, 120 € a night"


@tool
def book_hotel(hotel: str, nights: str) -> str:
    \"\"\"Book a hotel for some nights.\"\"\"
    return f"{hotel} booked, {nights}: confirmation LX-2041"


@tool(idempotent=True)
def plan_day(day: int) -> str:
    \"\"\"A plan for one day of the trip.\"\"\"
    wait_if_held("plan_day")
    return PLANS[day]
"""),
    md("""
The model is a script: a function that reads the conversation it is sent (the earlier
messages and answers, this turn's message, tool results and any steering) and returns the next
tool call or the answer. Because it decides from what it is sent alone, a resumed turn and a
branch get the answers the conversation calls for.
"""),
    code("""
def assistant(memory, tools, model):
    messages = memory.build_messages()
    start = max(i for i, m in enumerate(messages)
                if m["role"] == "user" and m["content"] == memory.task)
    before, now = messages[:start], messages[start:]  # earlier turns; this one
    results = [m["content"].removeprefix("SUCCESS: ") for m in now if m["role"] == "tool"]
    steering = " ".join(m["content"] for m in now[1:] if m["role"] == "user")
    earlier = [m["content"].removeprefix("SUCCESS: ") for m in before if m["role"] == "tool"]
    answers = [m["content"] for m in before if m["role"] == "assistant" and m.get("content")]
    said, answer = memory.task.lower(), LlmResponse.final_answer

    def call(name, args):  # ids are labels: these read well in the log
        return LlmResponse.tool_call(name, args, id=f"{name}-{memory.step}")

    if "weather" in said or said.startswith("and in"):
        if not results:
            return call("weather", {"city": memory.task.rstrip("?").split()[-1]})
        return answer(results[0] + ".")
    if "warmer" in said:
        temps = sorted((int(r.split(": ")[1].split(" ")[0]), r.split(":")[0])
                       for r in earlier if "°C" in r)
        (cold, a), (hot, b) = temps[0], temps[-1]
        return answer(f"{b}, by {hot - cold} degrees ({hot} °C against {cold} °C).")
    if "hotel" in said:
        if not results:
            return call("search_hotels", {"city": "Lisbon"})
        hotels = [h.rsplit(", ", 1) for h in results[0].split("; ")]
        hotels = [(int(price.split(" ")[0]), name) for name, price in hotels]
        words = steering.lower().split()
        budget = int(words[words.index("under") + 1]) if "under" in words else None
        price, name = min(h for h in hotels if budget is None or h[0] < budget)
        asked = f" (under {budget} €, as you asked)" if budget else ""
        return answer(f"{name}, {price} € a night{asked}.")
    if said.startswith("book"):
        if not results:
            return call("ask_human", {"question": "For which nights?"})
        if len(results) == 1:
            return call("book_hotel", {"hotel": answers[-1].split(",")[0], "nights": results[0]})
        return answer(results[-1] + ".")
    if said.startswith("plan"):
        if len(results) < 3:
            return call("plan_day", {"day": len(results) + 1})
        return answer("; ".join(f"day {n}: {plan}" for n, plan in enumerate(results, 1)) + ".")
    if "price" in said:
        users = [m["content"] for m in before if m["role"] == "user"]
        return answer("You said: " + next(u for u in users if "under" in u.lower()))
    if "sum" in said:
        booked = next(r for r in earlier if "booked" in r)
        days = ", ".join(r for r in earlier if r in PLANS.values())
        return answer(f"Lisbon, {WEATHER['Lisbon']}; {booked}; the days: {days}.")
    if "thank" in said:
        return answer("Have a great weekend in Lisbon!")
    return answer("Happy to help. Where would you like to go?")


def make_agent(task):
    return (
        AgentBuilder(task)
        .system_prompt("You plan weekend trips.")
        .llm(MockLlmCaller([assistant] * 100))
        .tool(weather).tool(search_hotels).tool(book_hotel).tool(plan_day)
        .ask_human()  # a tool to ask a person with
        .config(AgentConfig(min_answer_length=1))
        .store("conversation.db")
    )
"""),
    md("""
## Four turns

`builder.thread(id)` starts a thread (or goes on with one from the log); each `send` runs one
turn, a run of its own, and returns its answer:
"""),
    code("""
thread = make_agent("assistant").thread("weekend")
for text in ("Hi! I'm planning a weekend away.", "What's the weather in Lisbon?",
             "And in Porto?", "Which one is warmer?"):
    print(f"you:   {text}\\nagent: {thread.send(text)}")
print(thread.runs)
"""),
    md("""
## Turn 5, steered while it runs

The hotel search is held at a gate while the turn runs (in a thread of its own, as in any
program). Meanwhile we send a message to the turn under way: `thread.steer(text)` (from another
process: `replay.steer(db, run_id, text)` or `agentsm steer RUN TEXT`). The model reads it
before its next call:
"""),
    code("""
from concurrent.futures import ThreadPoolExecutor

held["search_hotels"] = gate = Gate()
with ThreadPoolExecutor(1) as pool:
    turn = pool.submit(thread.send, "Find me a hotel in Lisbon.")
    gate.reached.wait(30)  # the search runs now
    thread.steer("Under 150 € a night, please.")
    gate.released.set()
    print(turn.result())
"""),
    md("""
## Turn 6, a question to a person

The model asks with the `ask_human` tool; the turn waits (status waiting) and `send` raises
`HumanInputRequired`. Someone answers later, from anywhere (`replay.answer`, `agentsm answer
RUN TEXT`, or the viewer's answer box), and the turn goes on (`replay.resume_run`, `agentsm
resume`, or a worker):
"""),
    code("""
from agentsm import HumanInputRequired
from replay import answer, pending_requests, resume_run

try:
    thread.send("Book it.")
except HumanInputRequired as waiting:
    run_id = waiting.run_id
print(run_id, [(r.kind, r.reason) for r in pending_requests("conversation.db", run_id)])
answer("conversation.db", run_id, "Friday to Sunday")
print(resume_run("conversation.db", run_id, make_agent))
"""),
    md("""
## Turn 7, stopped from outside, then resumed

While the first day is being planned, someone stops the turn: `replay.request_stop` (or
`agentsm stop RUN`, or the viewer's button) from any process. The turn stops at its next
transition, wherever it is driven, and `send` raises `RunStopped`; `resume_run` goes on from
there:
"""),
    code("""
from agentsm import RunStopped
from replay import request_stop

held["plan_day"] = gate = Gate()
with ThreadPoolExecutor(1) as pool:
    turn = pool.submit(thread.send, "Plan the three days.")
    gate.reached.wait(30)
    print(request_stop("conversation.db", thread.runs[-1], "let me check the dates first"))
    gate.released.set()
    try:
        turn.result()
    except RunStopped as stopped:
        print(stopped)
print(resume_run("conversation.db", thread.runs[-1], make_agent))
"""),
    md("Three more turns. The steering message of turn 5 is part of the conversation now:"),
    code("""
for text in ("What price did I ask for?", "Sum it all up.", "Thanks!"):
    print(f"you:   {text}\\nagent: {thread.send(text)}")
print(thread)
"""),
    md("""
The conversation, read back from the log (`thread.messages()`), and what was said to the turns
while they ran, recorded where each turn took it:
"""),
    code("""
from agentsm.trace import Trace
from eventstore import SQLiteEventStore

for m in thread.messages():
    print(f"{m['turn']:>2} {m['role']:9} {m['content']}")
log = SQLiteEventStore("conversation.db")
for run_id in thread.runs[4:7]:
    for entry in Trace.load(log, run_id):
        if entry.event in ("Steered", "HumanDecided", "StopRequested"):
            print(run_id, entry.seq, entry.state, entry.event, entry.data)
"""),
    md("""
## Every turn replayed, offline

Each turn's log holds the conversation it started from, so each replays on its own against
its recording: the model's answers, the tools' results, the steering message, the answer and
the stop are served back where they were taken. No model is called:
"""),
    code("""
from replay import replay_thread

report = replay_thread("conversation.db", "weekend")
print(report)
print("identical:", report.identical)
"""),
    md("""
## Branched at turn 3

Another third message: a new thread that shares turns 1 and 2 and answers `And in Madrid?`
with the agent (`agentsm branch --thread weekend --turn 3 --message ...` on the command
line). The original thread is left as it was:
"""),
    code("""
from replay import branch_thread

madrid = branch_thread("conversation.db", "weekend", 3, "And in Madrid?", make_agent,
                       new_thread_id="madrid")
print(madrid)
print(make_agent("assistant").thread("madrid").runs)
print(replay_thread("conversation.db", "madrid"))
"""),
    md("""
## On the command line

`agentsm threads` lists the conversations of the log (the branch says where it came from),
`agentsm show --thread` prints one turn by turn, and `agentsm runs --tree` shows the turns as a
line, the branch as a fork:
"""),
    code("""
import subprocess
import sys


def agentsm(*args):
    out = subprocess.run([sys.executable, "-m", "replay", "--db", "conversation.db", *args],
                         capture_output=True, text=True)
    print(out.stdout or out.stderr)


agentsm("threads")
"""),
    code("""agentsm("show", "--thread", "madrid")"""),
    code("""agentsm("runs", "--tree")"""),
    md("""
In the browser, `agentsm ui --db conversation.db` lists the threads too: a thread's page shows
it as a conversation, each turn with its status, its tools, what was said while it ran and its
run one click away; a turn waiting for a person has the answer box right there, and the branch
links back to turn 3 of `weekend`.
"""),
]

CODING = [
    md("""
# 10. A coding agent: files, a web API and a person's approval

A small coding agent keeps a project's dependencies up to date. It works in one directory with
the workspace tools (`.workspace(path)`: read, list, search, write and edit files), asks a
package index for the latest release through its OpenAPI document (`.openapi(spec)`: one tool
per operation), and a person approves every write. Its LLM is scripted, so the notebook runs
offline: the package index is a small HTTP server on 127.0.0.1 started here. The agent reads a
file, calls the API, is refused a file outside its workspace, waits for approval, edits the
file; then the workspace is deleted, the server stopped, and the run replays identical offline
and is branched at a step.
"""),
    code("""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

Path("shop").mkdir()  # the agent's workspace
Path("shop/requirements.txt").write_text("httpx==0.27.0\\npydantic==2.9.2\\n")
Path("deploy.env").write_text("PAYMENTS_KEY=pk-live-not-for-agents\\n")  # beside it, not in it

RELEASES = {"httpx": "0.28.1", "pydantic": "2.11.7"}
SPEC = json.dumps({
    "openapi": "3.0.3",
    "info": {"title": "Package index", "version": "1"},
    "paths": {"/packages/{name}": {"get": {
        "operationId": "getPackage",
        "summary": "The latest release of a Python package.",
        "parameters": [{"name": "name", "in": "path", "required": True,
                        "schema": {"type": "string"}}],
    }}},
})


class PackageIndex(BaseHTTPRequestHandler):  # the service the OpenAPI document describes
    def do_GET(self):
        name = self.path.rsplit("/", 1)[-1]
        found = self.path.startswith("/packages/") and name in RELEASES
        answer = {"name": name, "latest": RELEASES[name]} if found else {"error": "no such package"}
        body = json.dumps(answer).encode()
        self.send_response(200 if found else 404)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


index = ThreadingHTTPServer(("127.0.0.1", 0), PackageIndex)
threading.Thread(target=index.serve_forever, daemon=True).start()
url = f"http://127.0.0.1:{index.server_port}"
"""),
    md("""
The agent: the workspace tools on `shop/` (the shell left out; writes and edits ask first),
the index's one operation as the tool `getPackage`, and a scripted model that picks its next
move from what it has done so far, so that it goes on where it stopped when the run resumes.
Its third move tries to read `../deploy.env`, outside the workspace.
"""),
    code("""
from agentsm import AgentBuilder, HumanInputRequired, LlmResponse, MockLlmCaller

MOVES = [
    LlmResponse.tool_call("read_file", {"path": "requirements.txt"}),
    LlmResponse.tool_call("getPackage", {"name": "httpx"}),
    LlmResponse.tool_call("read_file", {"path": "../deploy.env"}),
    LlmResponse.tool_call("edit_file", {"path": "requirements.txt",
                                        "old_text": "httpx==0.27.0", "new_text": "httpx==0.28.1"}),
    LlmResponse.final_answer("httpx is pinned to 0.28.1 now, its latest release on the package "
                             "index; deploy.env is outside my workspace, so I left it alone."),
]


def next_move(memory, tools, model):  # the scripted model: one move per tool result so far
    return MOVES[len(memory.history)]


def coder(task):
    return (
        AgentBuilder(task)
        .name("coder")
        .llm(MockLlmCaller([next_move] * len(MOVES)))
        .workspace("shop", shell=False)
        .openapi(SPEC, base_url=url)
        .store("coder.db")
    )


engine = coder("Pin httpx to its latest release").run_id("bump-httpx").build()
print([t.name for t in engine.definition.tools])
try:
    engine.run()
except HumanInputRequired as waiting:
    print("waiting for a person:", waiting.requests[0].call.name, waiting.requests[0].call.args)
"""),
    md("""
The run stopped, durably, before the edit: nothing was written. A person approves it (here from
Python; from a shell: `agentsm --db coder.db approve bump-httpx`), and the run resumes from the
log, in this process or any other:
"""),
    code("""
from replay import decide, pending_requests, resume_run

print(pending_requests("coder.db", "bump-httpx")[0].call.name)
decide("coder.db", "bump-httpx", "approved", note="the changelog says nothing breaks")
print(resume_run("coder.db", "bump-httpx", coder))
print(Path("shop/requirements.txt").read_text())
"""),
    md("""
What each tool said, as the log keeps it: the file, the index's answer, the refusal of the path
outside the workspace (a failed result the model reads, not an exception: `deploy.env` was never
opened) and the edit:
"""),
    code("""
from agentsm import AgentMemory
from eventstore import SQLiteEventStore

store = SQLiteEventStore("coder.db")
memory, state = AgentMemory.rebuild(store, "bump-httpx")
for entry in memory.history:
    print(f"{entry.tool.name}({json.dumps(entry.tool.args)})\\n  -> {entry.observation}")
print(state)
"""),
    md("""
Replay needs the log, not the world: delete the workspace, stop the service, and the run
replays identical, each tool result served from the log.
"""),
    code("""
import shutil

from replay import replay_run

shutil.rmtree("shop")
index.shutdown()
index.server_close()
print(replay_run("coder.db", "bump-httpx", coder))
"""),
    md("""
Branch the run at the start of step 4, where the model asked to edit the file, with another
answer: a branch that leaves the file for a person to change. Everything before the point is
the parent's, so it needs neither the files nor the service:
"""),
    code("""
from replay import branch_run, diff_runs

step_4 = min(e.seq for e in engine.trace() if e.step == 4) - 1  # the transition into step 4
review = branch_run(store, "bump-httpx", at=step_4, llm_response=LlmResponse.final_answer(
    "httpx 0.28.1 is its latest release; requirements.txt is unchanged, for you to review."))
print(review)
print(diff_runs(store, "bump-httpx", review.run_id))
"""),
]

NOTEBOOKS = {
    "01_quickstart.ipynb": QUICKSTART,
    "02_record_and_replay.ipynb": RECORD_REPLAY,
    "03_time_travel_and_branching.ipynb": TIME_TRAVEL,
    "04_property_testing.ipynb": PROPERTY,
    "05_human_in_the_loop.ipynb": HUMAN,
    "06_providers.ipynb": PROVIDERS,
    "07_extending_agents.ipynb": EXTENDING,
    "08_reasoning_providers.ipynb": REASONING,
    "09_conversations.ipynb": CONVERSATIONS,
    "10_coding_agent.ipynb": CODING,
}


def build(name: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = NOTEBOOKS[name]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def execute(nb: nbformat.NotebookNode, cwd: Path, timeout: int = 120) -> nbformat.NotebookNode:
    """Run a notebook top to bottom in `cwd`; raises on the first failing cell. The recorded
    provider traffic notebook 08 plays is copied there first."""
    shutil.copytree(HERE / "recorded", cwd / "recorded", dirs_exist_ok=True)
    NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}
    ).execute()
    return nb


def main(names: list[str]) -> None:
    for name in names or list(NOTEBOOKS):
        with tempfile.TemporaryDirectory() as tmp:
            nb = execute(build(name), Path(tmp))
        nbformat.write(nb, HERE / name)
        print(f"executed and wrote notebooks/{name}")
    if True:  # a picture for the README, drawn by the library
        from agentsm import build_transition_table
        from agentsm.pictures import path_of, save, state_diagram
        from replay.demo import demo_agent

        engine = demo_agent().build()
        engine.run()
        save(
            state_diagram(
                build_transition_table(),
                path_of(engine.trace().facts()),
                "the demo run's path through the default table",
            ),
            HERE / "images" / "demo-path.png",
        )


if __name__ == "__main__":
    main(sys.argv[1:])
