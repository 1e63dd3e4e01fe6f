"""AgentBuilder: the fluent entry point that wires memory, tools, LLM, table and handlers."""

from __future__ import annotations

import copy
import inspect
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel

from eventstore import DURABILITY, Durability, EventStore, SQLiteEventStore, open_store

from . import facts as f
from .context import ApprovalCallback, RunContext, Suspend, ToolRunner, ValueSource
from .custom import Reducer, declared_records, kind_of, part_value, register_fact
from .engine import AgentEngine
from .errors import BuildError
from .events import Event
from .hooks import GuardInput, HookEffects, HookPlace, Hooks, ToolCallInfo, TurnInfo
from .images import Image, ImageLike
from .inbox import Messages
from .llm.base import LlmCaller, llm_settings
from .mcp import McpServer, attached_tools, resolve_tools
from .questions import ASK_HUMAN, ask_human_tool
from .redaction import Hook, Redactor
from .skills import READ_SKILL_TOOL, SkillSet
from .states import AgentState, default_handlers
from .states.base import Declaring, handler_records
from .subagent import SubAgentTool
from .threads import Thread
from .tools import Tool, ToolRegistry, tool
from .tools.workspace import Workspace, WorkspaceLimits
from .trace import decode
from .transitions import TransitionTable, build_transition_table
from .types import (
    AgentConfig,
    HistoryEntry,
    ParentCall,
    State,
    ThreadTurn,
    TokenBudget,
    as_state,
)

if TYPE_CHECKING:
    from .openapi import Auth, OpenApi

__all__ = ["AgentBuilder"]

HandlerLike = AgentState | Callable[[RunContext], Any]


def _json(value: Any) -> Any:
    """A part's value as plain JSON (arrays as lists), as RunStarted records it."""
    if isinstance(value, tuple | list):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items()}
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return value


def _function_handler(
    state: str, func: Callable[[RunContext], Any], records: frozenset[str] | None = None
) -> AgentState:
    """Adapts a plain (async or sync) function `ctx -> event` to the AgentState protocol."""
    namespace: dict[str, Any] = {"name": state}
    if records is not None:
        namespace["records"] = records
    handler_type = type(f"{state}FunctionHandler", (_FunctionHandler,), namespace)
    return handler_type(func)  # type: ignore[no-any-return]


class _FunctionHandler:
    name: ClassVar[str] = ""
    emits: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, func: Callable[[RunContext], Any]) -> None:
        self._func = func

    async def handle(self, ctx: RunContext) -> str | Suspend:
        result = self._func(ctx)
        if inspect.isawaitable(result):
            result = await result
        return result  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"<handler {self.name} {getattr(self._func, '__name__', self._func)!r}>"


def _image_specs(images: Iterable[ImageLike] | ImageLike | None) -> list[Image | Path]:
    """`images=` as Images, file paths kept as paths (read when a run starts)."""
    if images is None:
        return []
    if isinstance(images, Image | bytes | bytearray | str | Path):
        images = [images]
    made: list[Image | Path] = []
    for item in images:
        if isinstance(item, str) and not re.match(r"(https?|data|gs|s3):", item):
            item = Path(item)
        try:
            made.append(item if isinstance(item, Path) else Image.of(item))
        except (TypeError, ValueError) as e:
            raise BuildError(f"images: {e}") from e
    return made


class AgentBuilder:
    """Fluent construction of an `AgentEngine`; every method returns the builder."""

    def __init__(self, task: str, *, images: Iterable[ImageLike] | ImageLike | None = None) -> None:
        """`task` is what the agent is asked; `images` come with it (each an `Image`, its
        bytes, a file path read when the run starts, or an http(s) or data: URL)."""
        if not isinstance(task, str) or not task.strip():
            raise BuildError("AgentBuilder needs the task as a non-empty string.")
        self._task = task
        self._images = _image_specs(images)
        self._task_type = "default"
        self._name: str | None = None
        self._system_prompt = ""
        self._llm: LlmCaller | None = None
        self._config = AgentConfig()
        self._config_overrides: dict[str, Any] = {}
        self._models: dict[str, str] = {}
        self._tools = ToolRegistry()
        self._blacklist: list[str] = []
        self._approval_required: list[str] = []
        self._questions: list[str] = []
        self._approval: ApprovalCallback | None = None
        self._budget: TokenBudget | None = None
        self._store: EventStore | str | Path | None = None
        self._durability: Durability | None = None
        self._table: TransitionTable | None = None
        self._handlers: dict[str, AgentState] = {}
        self._run_id: str | None = None
        self._clock: Callable[[], float] = time.time
        self._tool_runner: ToolRunner | None = None
        self._redactions: list[tuple[str | None, Hook]] = []
        self._patches: Callable[[str], bool] | None = None
        self._values: ValueSource | None = None
        self._messages: Messages | None = None
        self._hooks = Hooks()
        self._hook_effects: HookEffects | None = None
        self._skills = SkillSet()
        self._parent_call: ParentCall | None = None
        self._facts: dict[str, tuple[str, Any]] = {}  # kind -> (part, initial)
        self._mcp: list[McpServer] = []
        self._mcp_recorded: f.RunStarted | None = None
        self._turn: tuple[ThreadTurn, tuple[HistoryEntry, ...], dict[str, Any]] | None = None
        """For a turn of a thread: its place, the conversation it starts from and the parts
        the turn before it ended with (set by `Thread`)."""

    def name(self, name: str) -> AgentBuilder:
        """The agent's name, recorded in the run's definition: traces call its run
        `invoke_agent {name}` (`gen_ai.agent.name`)."""
        if not isinstance(name, str) or not name.strip():
            raise BuildError(f"name({name!r}): give the agent a non-empty name, e.g. 'support'.")
        self._name = name
        return self

    def task_type(self, task_type: str) -> AgentBuilder:
        """The task type: the key for model selection in `config.models`."""
        self._task_type = task_type
        return self

    def system_prompt(self, prompt: str) -> AgentBuilder:
        """The system prompt sent with every LLM call."""
        self._system_prompt = prompt
        return self

    def llm(self, llm: LlmCaller) -> AgentBuilder:
        """The LLM caller (required): any object with `async call(memory, tools, model)`."""
        if not callable(getattr(llm, "call", None)):
            raise BuildError(
                f"{llm!r} is not an LLM caller: it needs a method "
                "`async def call(self, memory, tools, model) -> LlmResponse`."
            )
        self._llm = llm
        return self

    @property
    def llm_caller(self) -> LlmCaller | None:
        """The LLM caller given to `.llm()`, if any."""
        return self._llm

    def config(self, config: AgentConfig) -> AgentBuilder:
        """Replace the whole configuration (later `.max_steps()` / `.model()` still apply)."""
        self._config = config
        return self

    def max_steps(self, n: int) -> AgentBuilder:
        """At most `n` planning LLM calls."""
        self._config_overrides["max_steps"] = n
        return self

    def model(self, model: str) -> AgentBuilder:
        """The model for every task type without its own (`config.models["default"]`)."""
        return self.model_for("default", model)

    def model_for(self, task_type: str, model: str) -> AgentBuilder:
        """The model for one task type."""
        self._models[task_type] = model
        return self

    def tool(
        self,
        name_or_tool: str | Tool | Callable[..., Any],
        description: str | None = None,
        schema: dict[str, Any] | None = None,
        func: Callable[..., Any] | None = None,
        *,
        idempotent: bool = False,
        timeout: float | None = None,
    ) -> AgentBuilder:
        """Add a tool: a `@tool` function, a plain typed function, or
        `(name, description, json_schema, func)` where `func` takes the argument dict."""
        if isinstance(name_or_tool, Tool):
            self._tools.add(name_or_tool)
        elif isinstance(name_or_tool, str):
            if description is None or schema is None or func is None:
                raise BuildError(
                    f"tool({name_or_tool!r}, ...) needs a description, a JSON schema and a "
                    "function; or pass a function decorated with @tool."
                )
            self._tools.register(
                name_or_tool, description, schema, func, idempotent=idempotent, timeout=timeout
            )
        elif callable(name_or_tool):
            self._tools.add(tool(idempotent=idempotent, timeout=timeout)(name_or_tool))
        else:
            raise BuildError(f"tool() takes a @tool function or (name, ...), not {name_or_tool!r}")
        return self

    @property
    def tools(self) -> ToolRegistry:
        """The tools registered so far (MCP servers' tools join them at `build()`)."""
        return self._tools

    def blacklist_tool(self, name: str) -> AgentBuilder:
        """Forbid a tool: calls to it are refused and the refusal is shown to the LLM."""
        self._blacklist.append(name)
        return self

    def require_approval(self, tool_name: str) -> AgentBuilder:
        """Calls to this tool wait for a human decision before they run."""
        self._approval_required.append(tool_name)
        return self

    def on_approval(self, callback: ApprovalCallback) -> AgentBuilder:
        """The approval callback (sync or async): gets an `ApprovalRequest` and returns True,
        False, a dict of replacement arguments, or None to leave the run waiting; for a
        request of kind "question" (`ask_human`, `ctx.ask`), the answer as text."""
        self._approval = callback
        return self

    def ask_human(self, *, name: str = ASK_HUMAN, description: str | None = None) -> AgentBuilder:
        """Give the LLM a tool to ask a person a question (`ask_human(question)`). A call waits
        in WaitingForHuman (status waiting; `pending_requests` shows the question) until a
        person answers (`replay.answer`, `agentsm answer`, the viewer, or the approval callback
        returning text); the answer is the call's result, and the tool never runs."""
        if self._tools.has(name):
            raise BuildError(
                f"ask_human(): the agent has a tool named {name!r} already; give the question "
                "tool another name=..."
            )
        self._tools.add(ask_human_tool(name, description))
        self._questions.append(name)
        return self

    def budget(self, budget: TokenBudget) -> AgentBuilder:
        """A token budget, checked before each LLM call."""
        self._budget = budget
        return self

    def store(self, store: EventStore | str | Path) -> AgentBuilder:
        """Where the log goes: a store, a SQLite path, or a URL (`sqlite:///runs.db`,
        `postgresql://user@host/db`); default: in-memory SQLite."""
        self._store = store
        return self

    def durability(self, durability: Durability) -> AgentBuilder:
        """`"normal"` (the default: survives a killed process) or `"full"` (each commit that
        precedes an effect is on disk before the effect: survives power loss too); set on the
        store the agent writes to."""
        if durability not in DURABILITY:
            raise BuildError(
                f"durability must be one of {', '.join(map(repr, DURABILITY))}, not {durability!r}."
            )
        self._durability = durability
        return self

    def transitions(self, table: TransitionTable) -> AgentBuilder:
        """A custom transition table (default: `build_transition_table()`)."""
        if not isinstance(table, TransitionTable):
            table = TransitionTable(table)
        self._table = table
        return self

    def handler(
        self, state: str, handler: HandlerLike, *, records: Iterable[Any] | None = None
    ) -> AgentBuilder:
        """Replace or add the handler of a state: an AgentState or a function `ctx -> event`.
        `records` declares the facts it may record (fact types or kinds, added to a `records`
        its class declares): a state records only the user's facts it declares, and a custom
        state that declares records only what it declares."""
        name = as_state(state)
        declared = None if records is None else declared_records(records)
        if not hasattr(handler, "handle"):
            if not callable(handler):
                raise BuildError(f"handler({state!r}, ...) needs an AgentState or a function.")
            self._handlers[name] = _function_handler(name, handler, declared)
        elif declared is not None:
            own = handler_records(handler) or frozenset()
            self._handlers[name] = Declaring(handler, own | declared)  # type: ignore[arg-type,assignment]
        else:
            self._handlers[name] = handler  # type: ignore[assignment]
        return self

    def fact(
        self, fact_type: type[BaseModel], reducer: Reducer, *, part: str, initial: Any = None
    ) -> AgentBuilder:
        """Register a fact type of your own and its pure reducer `(part, fact) -> part` over
        the part of memory named `part` (starting at `initial`, a JSON value): a state whose
        handler declares it (`records`) records it with `ctx.record(...)`, and
        `memory.part(part)` gives the folded value. The type becomes known to this process
        (decoded and upcast by every reader); see README "Your own facts"."""
        new = kind_of(fact_type)
        try:
            start = part_value(initial)
        except (TypeError, ValueError) as e:
            raise BuildError(f"The initial value of part {part!r}: {e}.") from None
        for kind, (other, value) in self._facts.items():
            if other == part and kind != new and value != start:
                raise BuildError(
                    f"The part {part!r} starts as {value!r} for {kind} but as {start!r} for "
                    f"{new}; give the kinds of one part the same initial value."
                )
        register_fact(fact_type, reducer, part=part, initial=start)
        self._facts[new] = (part, start)
        return self

    def run_id(self, run_id: str) -> AgentBuilder:
        """Use this id for the run instead of a generated one."""
        self._run_id = run_id
        return self

    def clock(self, clock: Callable[[], float]) -> AgentBuilder:
        """The clock for envelope timestamps (default `time.time`)."""
        self._clock = clock
        return self

    def tool_runner(self, runner: ToolRunner) -> AgentBuilder:
        """How tool calls are run (default: the registry). Replay serves recorded results
        through this seam; a runner returns a `ToolOutcome` and never raises."""
        self._tool_runner = runner
        return self

    def patches(self, new_path: Callable[[str], bool]) -> AgentBuilder:
        """Which `ctx.patched(change_id)` calls take the new path where the run has no marker
        yet (default: all of them, as in any live run). Replay passes the recorded markers."""
        self._patches = new_path
        return self

    def values(self, source: ValueSource) -> AgentBuilder:
        """Where `ctx.now()`, `ctx.uuid()` and `ctx.random()` get their values (default: the
        clock, uuid4 and `random`). Replay serves the recorded ones through this seam."""
        self._values = source
        return self

    def messages(self, source: Messages) -> AgentBuilder:
        """Where the engine hears what is sent to its run from other processes (default: the
        store's inbox: `replay.steer`, `replay.request_stop`). Replay serves the recorded
        messages through this seam."""
        self._messages = source
        return self

    def input_guard(self, guard: Callable[[GuardInput], Any]) -> AgentBuilder:
        """Check each user message (the task, then each message sent while the run goes on)
        before the planning LLM call that first sends it: `guard(GuardInput)`, sync or async,
        returns None to allow it, `Replace(text)` to send that instead, or `Refuse(reason)`
        to end the run in Error. Each verdict is recorded (`InputChecked`); guards added later see
        the text the earlier ones left. See `agentsm.hooks`."""
        return self._hook("input_guard", guard)

    def before_turn(self, hook: Callable[[TurnInfo], Any]) -> AgentBuilder:
        """Run `hook(TurnInfo)` (sync or async) before each planning LLM call, with a copy of
        the messages about to be sent; returning `Abort(reason)` ends the run in Error
        (recorded as `HookAborted`), None lets it go on."""
        return self._hook("before_turn", hook)

    def after_turn(self, hook: Callable[[TurnInfo], Any]) -> AgentBuilder:
        """Run `hook(TurnInfo)` (sync or async) once each step is over: its tool results are
        in history, or its final answer is about to be accepted (`TurnInfo.answer`);
        returning `Abort(reason)` ends the run in Error (the answer is not accepted)."""
        return self._hook("after_turn", hook)

    def before_tool_call(self, hook: Callable[[ToolCallInfo], Any]) -> AgentBuilder:
        """Run `hook(ToolCallInfo)` (sync or async) before each planned call starts: None
        runs it, a dict runs it with those arguments (`ToolCallRewritten`), `Veto(reason)`
        does not run it and the LLM reads the refusal as its result (`ToolCallVetoed`)."""
        return self._hook("before_tool_call", hook)

    def after_tool_call(self, hook: Callable[[ToolCallInfo], Any]) -> AgentBuilder:
        """Run `hook(ToolCallInfo)` (sync or async) after each planned call returns, with its
        `observation`: None keeps it, a string is what the LLM reads instead (recorded as
        `ObservationRewritten`; `ToolExecuted` keeps what the tool returned)."""
        return self._hook("after_tool_call", hook)

    def _hook(self, place: HookPlace, func: Callable[[Any], Any]) -> AgentBuilder:
        if not callable(func):
            raise BuildError(
                f"{place}({func!r}): give a function (sync or async) that takes one argument."
            )
        self._hooks = self._hooks.copy()  # a thread's turns made before keep their own
        self._hooks.add(place, func)
        return self

    def hook_effects(self, source: HookEffects) -> AgentBuilder:
        """Where the effects of the guards and hooks come from (default: calling them).
        Replay serves the recorded ones through this seam, without calling them."""
        self._hook_effects = source
        return self

    def redact(self, *hooks: Hook, name: str | None = None) -> AgentBuilder:
        """Keep secrets and personal data out of the log: each hook (a regular expression, whose
        matches become `[REDACTED]`, or a function `text -> text`) rewrites every string of
        every fact before it is recorded (its sub-agents' runs too). The run records the hooks'
        labels (`name`, a function's name, or `pattern N`), never the patterns; tools still get
        real arguments."""
        for hook in hooks:
            if isinstance(hook, str):
                try:
                    re.compile(hook)
                except re.error as e:
                    raise BuildError(
                        f"redact({hook!r}): not a regular expression ({e}); fix the pattern."
                    ) from e
            elif not isinstance(hook, re.Pattern) and not callable(hook):
                raise BuildError(
                    f"redact({hook!r}): give a regular expression or a function text -> text."
                )
            self._redactions.append((name, hook))
        return self

    def skills(self, *sources: str | Path | SkillSet) -> AgentBuilder:
        """Offer the skills in these directories (each skill a folder with a `SKILL.md`; a
        later directory's skill replaces an earlier one of the same name), or a `SkillSet`.
        Their index is appended to the system prompt, and the LLM reads a skill's
        instructions through the `read_skill` tool (unless a tool of that name is registered
        already). A bad skill file is a BuildError naming it."""
        for source in sources:
            if isinstance(source, SkillSet):
                self._skills.merge(source)
            elif isinstance(source, str | Path):
                self._skills.load_dir(source)
            else:
                raise BuildError(
                    f"skills({source!r}): give skill directories (str or Path) or a SkillSet."
                )
        if len(self._skills) and not self._tools.has(READ_SKILL_TOOL):
            self._tools.register(
                READ_SKILL_TOOL,
                "Read the full instructions of one of the skills listed in <available_skills>.",
                {
                    "type": "object",
                    "properties": {"name": {"type": "string", "description": "The skill's name."}},
                    "required": ["name"],
                    "additionalProperties": False,
                },
                lambda args: self._skills.read(args["name"]),
                idempotent=True,
            )
        return self

    @property
    def skill_set(self) -> SkillSet:
        """The skills loaded so far."""
        return self._skills

    def subagent(
        self,
        name: str,
        description: str,
        child: AgentBuilder | Callable[[str], AgentBuilder],
        *,
        share_budget: bool = False,
        timeout: float | None = None,
    ) -> AgentBuilder:
        """Add a tool `name` that runs another agent on the task the LLM gives it (`{"task":
        ...}`), as a child run in this run's store, and observes its final answer. `child` is
        an AgentBuilder (its task is replaced by the call's) or a function `task -> builder`;
        it sets the child's own prompt, tools, LLM and limits. `share_budget`: the child gets
        what is left of this run's token budget, and its tokens count into this run's usage.
        `timeout` bounds the call (default: this run's `tool_timeout`). See `agentsm.subagent`."""
        self._tools.add(
            SubAgentTool(self, name, description, child, share_budget=share_budget, timeout=timeout)
        )
        return self

    @staticmethod
    def _child_builders(
        name: str, child: AgentBuilder | Callable[[str], AgentBuilder]
    ) -> Callable[[str], AgentBuilder]:
        """How the sub-agent `name` makes its child's builder for a task (the sub-agent asks
        the builder it is given, and imports none): a copy of the builder `child` with that
        task, or what the function `child` returns for it. `child` is checked now, what the
        function returns at each call."""
        if not isinstance(child, AgentBuilder) and not callable(child):
            raise BuildError(
                f"subagent({name!r}, ...): the child must be an AgentBuilder or a function "
                f"task -> AgentBuilder, not {type(child).__name__}."
            )
        if not isinstance(child, AgentBuilder):
            return lambda task: _made_by(name, child, task)
        if child.llm_caller is None:
            raise BuildError(
                f"subagent({name!r}, ...): the child's builder has no LLM; give it one with "
                ".llm(...) (the child runs with its own LLM, prompt, tools and limits)."
            )
        return lambda task: _copied_for(child, task)

    def workspace(
        self,
        path: str | Path,
        *,
        approve_writes: bool = True,
        approve_shell: bool = True,
        shell: bool = True,
        env: Mapping[str, str] | None = None,
        limits: WorkspaceLimits | None = None,
        prefix: str = "",
    ) -> AgentBuilder:
        """Give the LLM files and a shell confined to the directory `path`: `read_file`,
        `write_file`, `edit_file`, `list_files`, `search_files` and `shell` (see
        `agentsm.tools.workspace`). Writes and commands wait for a human's approval unless
        `approve_writes` / `approve_shell` is False; `shell=False` leaves the shell out; `env`
        adds to its minimal environment; `limits` sets sizes and the command timeout; `prefix`
        goes before each tool name. The directory is not needed to build (nor to replay)."""
        ws = Workspace(
            Path(path),
            shell=shell,
            env=dict(env or {}),
            limits=limits or WorkspaceLimits(),
            prefix=prefix,
        )
        made = ws.tools()
        taken = [t.name for t in made if self._tools.has(t.name)]
        if taken:
            raise BuildError(
                f"workspace(): the agent has a tool named {taken[0]!r} already; give the "
                "workspace a prefix=... to tell its tools apart."
            )
        for item in made:
            self._tools.add(item)
        if approve_writes:
            self._approval_required.extend(ws.writing_tools)
        if approve_shell and ws.shell_tool is not None:
            self._approval_required.append(ws.shell_tool)
        return self

    def parent_call(self, link: ParentCall | None) -> AgentBuilder:
        """Record the run as the sub-agent run of a parent's call (the sub-agent tool sets it;
        replay sets it from the recording so that the definitions compare equal)."""
        self._parent_call = link
        return self

    @property
    def event_store(self) -> EventStore | None:
        """The store the last engine built from this builder writes to (None before a build
        or attach opened it)."""
        return self._store if isinstance(self._store, EventStore) else None

    def mcp_server_stdio(
        self,
        cmd: str,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        *,
        name: str | None = None,
        prefix: str = "",
        timeout: float = 30.0,
    ) -> AgentBuilder:
        """Offer the tools of an MCP server started as a child process (`cmd args...`, `env`
        added to the environment). Its tools are listed at `build()`; the process is started
        on the run's first call and stopped when the run returns. A tool name the agent has
        already is refused (a BuildError) unless `prefix` makes it unique; `name` (default:
        the script or package name) labels the server in the run's definition."""
        return self.mcp_server(
            McpServer.stdio(cmd, args, env, name=name, prefix=prefix, timeout=timeout)
        )

    def mcp_server_http(
        self,
        url: str,
        *,
        name: str | None = None,
        headers: Mapping[str, str] | None = None,
        prefix: str = "",
        timeout: float = 30.0,
    ) -> AgentBuilder:
        """Offer the tools of an MCP server reached over streamable HTTP at `url`, as
        `mcp_server_stdio` does (`name` defaults to the URL's host and port). Header values
        are sent, never recorded."""
        return self.mcp_server(
            McpServer.http(url, name=name, headers=headers, prefix=prefix, timeout=timeout)
        )

    def mcp_server(self, server: McpServer) -> AgentBuilder:
        """Offer the tools of an `McpServer` (what the two methods above build)."""
        if not isinstance(server, McpServer):
            raise BuildError(f"mcp_server() takes an McpServer, not {server!r}.")
        if any(s.name == server.name for s in self._mcp):
            raise BuildError(
                f"Two MCP servers are named {server.name!r}; give one another name=..."
            )
        self._mcp.append(server)
        return self

    def mcp_recorded(self, definition: f.RunStarted) -> AgentBuilder:
        """The definition of the run being replayed or branched (replay passes it): an MCP
        server that cannot be reached at `build()` then offers the tools this run recorded for
        it, so a recorded run replays with its servers stopped. A server that is reached is
        listed as usual, so a server whose tools changed shows as a divergence. A turn of a
        thread starts again from what it recorded it started from (its place in the thread,
        the conversation before it and the parts), as it starts from its recorded task."""
        self._mcp_recorded = definition
        return self

    def openapi(
        self,
        spec: str | Path | Mapping[str, Any] | OpenApi,
        *,
        base_url: str | None = None,
        auth: Auth | None = None,
        operations: Iterable[str] | None = None,
        tags: Iterable[str] | None = None,
        paths: Iterable[str] | None = None,
        timeout: float = 30.0,
        max_response_bytes: int = 20_000,
        prefix: str = "",
        headers: Mapping[str, str] | None = None,
    ) -> AgentBuilder:
        """Offer the operations of an OpenAPI 3.0 or 3.1 document as tools, one per operation
        with an operationId: `spec` is a file, an http(s) URL (read now), the JSON or YAML
        text, or an `OpenApi`. `operations` (ids), `tags` and `paths` (prefixes) narrow the
        choice; `auth` is a bearer token, a `Bearer`/`ApiKey`/`Basic`, or secrets by security
        scheme name, added to each request when it is sent and redacted from every fact;
        `timeout` (seconds) and `max_response_bytes` bound each call. See `agentsm.openapi`."""
        from .openapi import OpenApi  # loaded when used: its parser and httpx take ~80 ms

        api = spec if isinstance(spec, OpenApi) else OpenApi.load(spec, timeout=timeout)
        made = api.tools(
            base_url=base_url,
            auth=auth,
            operations=operations,
            tags=tags,
            paths=paths,
            timeout=timeout,
            max_response_bytes=max_response_bytes,
            prefix=prefix,
            headers=headers,
        )
        clash = [t.name for t in made if self._tools.has(t.name)]
        if clash:
            raise BuildError(
                f"The agent has a tool named {clash[0]!r} already; give openapi() a prefix=... "
                "to name the API's tools apart."
            )
        for item in made:
            self._tools.add(item)
        if made and made[0].secrets:
            self.redact(made[0].credentials_hook(), name=f"openapi {api.title}: credentials")
        return self

    # -- conversations ----------------------------------------------------------------------

    def thread(self, thread_id: str | None = None) -> Thread:
        """A conversation with this agent: each `send(text)` runs one turn, a run of its own
        whose task is the message and which starts from what the turn before it ended with.
        `thread_id` continues that thread from the log (in any process), or starts a thread of
        that id; without it, a new thread. This builder's own task is not used. See
        `agentsm.threads`."""
        return Thread.of(self._for_task, self._opened_store(), thread_id)

    def _for_task(self, task: str) -> AgentBuilder:
        """A copy of this builder with another task (its tools, LLM, store and all the rest
        shared): one turn of a thread."""
        if not isinstance(task, str) or not task.strip():
            raise BuildError(f"A message to the agent must be a non-empty string, not {task!r}.")
        made = copy.copy(self)
        made._task = task
        made._images = []
        made._run_id = None
        made._turn = None
        made._mcp_recorded = None
        return made

    def _in_thread(
        self, turn: ThreadTurn, conversation: Sequence[HistoryEntry], parts: Mapping[str, Any]
    ) -> AgentBuilder:
        """Build the run as turn `turn` of a thread, starting from `conversation` (the history
        the turn before it ended with) and `parts` (its parts of memory, by name)."""
        self._turn = (turn, tuple(conversation), dict(parts))
        return self

    def _with_images(self, images: Iterable[ImageLike] | ImageLike | None) -> AgentBuilder:
        """The images of this builder's task (a thread's message)."""
        self._images = _image_specs(images)
        return self

    def _opened_store(self) -> EventStore:
        """The store the agent's runs go to, opened now if it was given as a path or URL (an
        in-memory SQLite store if none was given): every turn of a thread writes to it."""
        store = self._store
        if store is None:
            store = SQLiteEventStore(":memory:")
        elif isinstance(store, str | Path):
            store = open_store(store)
        if self._durability is not None and hasattr(store, "durability"):
            store.durability = self._durability
        self._store = store
        return store

    # -- build ----------------------------------------------------------------------------

    def build_config(self) -> AgentConfig:
        """The configuration the run will record."""
        update: dict[str, Any] = dict(self._config_overrides)
        if self._models:
            update["models"] = {**self._config.models, **self._models}
        return self._config.model_copy(update=update) if update else self._config

    def build_redactor(self) -> Redactor:
        """The redaction hooks every fact of the agent's runs passes through (see `redact`)."""
        return Redactor.of(self._redactions)

    def build_table(self) -> TransitionTable:
        """The transition table the agent runs, without building it: no LLM is needed and no
        MCP server is contacted (for pictures of the agent)."""
        return self._table if self._table is not None else build_transition_table()

    def build(self) -> AgentEngine:
        """Check everything and make the engine; nothing is recorded until it runs (the MCP
        servers' tool lists are read now)."""
        tools, servers = resolve_tools(self._tools, self._mcp, self._mcp_recorded)
        llm, table, handlers, store = self._parts(tools)
        redactor = self.build_redactor()
        defaults = default_handlers()
        parts = {p: _json(v) for p, v in sorted(self._facts.values())}
        turn = self._turn
        recorded = self._mcp_recorded
        if turn is None and recorded is not None and recorded.thread is not None:
            turn = (recorded.thread, recorded.conversation or (), dict(recorded.parts or {}))
        if turn is not None:  # a part the turn before it ended with goes on from there
            parts = {**parts, **{p: _json(v) for p, v in turn[2].items()}}
        definition = f.RunStarted(
            task=self._task,
            task_type=self._task_type,
            name=self._name,
            system_prompt=self._system_prompt,
            config=self.build_config(),
            tools=tuple(tools.schemas()),
            blacklisted_tools=tuple(dict.fromkeys(self._blacklist)),
            approval_required=tuple(dict.fromkeys([*self._approval_required, *self._questions])),
            budget=self._budget,
            idempotent_tools=tuple(t.name for t in tools if t.idempotent),
            custom_handlers=tuple(
                sorted(
                    str(state)
                    for state, h in self._handlers.items()
                    if type(h) is not type(defaults.get(state))
                )
            ),
            custom_table=dict(table) != dict(build_transition_table()),
            redactions=redactor.labels,
            llm=llm_settings(llm),
            skills=self._skills.skills,
            parent_call=self._parent_call,
            custom_facts={k: p for k, (p, _) in sorted(self._facts.items())} or None,
            parts=dict(sorted(parts.items())) or None,
            mcp_servers=servers,
            thread=turn[0] if turn is not None else None,
            conversation=(turn[1] or None) if turn is not None else None,
            questions=tuple(dict.fromkeys(self._questions)) or None,
            images=self._task_images(recorded) or None,
        )
        return AgentEngine(
            store=store,
            definition=definition,
            tools=tools,
            llm=llm,
            table=table,
            handlers=handlers,
            approval=self._approval,
            run_id=self._run_id,
            clock=self._clock,
            tool_runner=self._tool_runner,
            redactor=redactor,
            patches=self._patches,
            values=self._values,
            messages=self._messages,
            hooks=self._hook_effects or self._hooks,
        )

    def _task_images(self, recorded: f.RunStarted | None) -> tuple[Image, ...]:
        """The task's images: a replayed or branched run's recorded ones (as its task is the
        recorded one: no file is read again), else this builder's, files read now."""
        if recorded is not None and recorded.images:
            return recorded.images
        try:
            return tuple(Image.from_file(i) if isinstance(i, Path) else i for i in self._images)
        except (OSError, ValueError) as e:
            raise BuildError(f"An image of the task cannot be read: {e}") from e

    def submit(self) -> str:
        """Record the run to run later and return its id: its definition goes into the store
        with status "queued", for a worker (`agentsm worker`) to claim and run."""
        return self.build().submit()

    def attach(self, run_id: str) -> AgentEngine:
        """An engine continuing run `run_id` of the store from its log, with this builder's
        tools, LLM, table, handlers and approval callback (its task and config come from the
        log; MCP servers offer the tools the run recorded for them)."""
        tools = attached_tools(self._tools, self._mcp, self._recorded_definition(run_id))
        llm, table, handlers, store = self._parts(tools)
        return AgentEngine.attach(
            store=store,
            run_id=run_id,
            tools=tools,
            llm=llm,
            table=table,
            handlers=handlers,
            approval=self._approval,
            clock=self._clock,
            tool_runner=self._tool_runner,
            redactor=self.build_redactor(),
            patches=self._patches,
            values=self._values,
            messages=self._messages,
            hooks=self._hook_effects or self._hooks,
        )

    def _recorded_definition(self, run_id: str) -> f.RunStarted | None:
        """The run's RunStarted, read only when MCP servers need it (None if unreadable: the
        engine then says what is wrong with the run)."""
        if not self._mcp:
            return None
        store = self._store
        if store is None:
            return None
        if isinstance(store, str | Path):
            self._store = store = open_store(store)
        try:
            first = store.read(run_id, upto=1)
            fact = decode(first[0]) if first else None
        except Exception:
            return None
        return fact if isinstance(fact, f.RunStarted) else None

    def _parts(
        self, tools: ToolRegistry | None = None
    ) -> tuple[LlmCaller, TransitionTable, dict[str, AgentState], EventStore]:
        if self._llm is None:
            raise BuildError(
                "An LLM caller is required: call .llm(...) with e.g. MockLlmCaller([...]) or a "
                "provider caller."
            )
        table = self._table if self._table is not None else build_transition_table()
        handlers = {**default_handlers(), **self._handlers}
        for state in sorted(table.states()):
            if state not in handlers:
                raise BuildError(
                    f"The table uses state {state!r} but no handler is registered for it. "
                    f"Add one with .handler({state!r}, handler)."
                )
        for state, handler in sorted(handlers.items()):
            for kind in sorted(handler_records(handler) or ()):
                if kind not in f.FACTS.builtin and kind not in self._facts:
                    raise BuildError(
                        f"The handler of {state} declares it records {kind}, which this agent "
                        f"does not register. Register it with .fact({kind}, reducer, "
                        "part=..., initial=...)."
                    )
        self._check_hook_rows(table)
        known = self._tools if tools is None else tools
        missing = [n for n in self._approval_required if not known.has(n)]
        if missing:
            raise BuildError(
                f"require_approval names tools that are not registered: {', '.join(missing)}. "
                "Register them with .tool(...) or fix the names."
            )
        return self._llm, table, handlers, self._opened_store()

    def _check_hook_rows(self, table: TransitionTable) -> None:
        """A guard or turn hook needs the rows its refusal or abort takes to Error."""
        needs: tuple[tuple[HookPlace, str, tuple[str, ...]], ...] = (
            ("input_guard", Event.InputRejected, (State.Planning,)),
            ("before_turn", Event.HookAborted, (State.Planning,)),
            ("after_turn", Event.HookAborted, (State.Planning, State.Observing)),
        )
        for place, event, states in needs:
            if not self._hooks.wants(place):
                continue
            for state in states:
                if state in table.states() and (state, event) not in table:
                    raise BuildError(
                        f"The agent has a {place} but its table has no row ({state}, {event}); "
                        f"add it with .transitions(table.with_rows({{({state!r}, {event!r}): "
                        "'Error'}))."
                    )

    def __repr__(self) -> str:
        return (
            f"AgentBuilder(task={self._task[:40]!r}, tools={self._tools.names()}, "
            f"llm={self._llm!r})"
        )


def _copied_for(template: AgentBuilder, task: str) -> AgentBuilder:
    """A copy of a sub-agent's child builder with the call's task; its own sub-agents run in
    the copy's store."""
    made = copy.copy(template)
    made._task = task  # the template's own task is replaced by the call's
    made._tools = ToolRegistry()
    for item in template.tools:
        made._tools.add(item.bound_to(made) if isinstance(item, SubAgentTool) else item)
    return made


def _made_by(name: str, make: Callable[[str], AgentBuilder], task: str) -> AgentBuilder:
    """The child builder the function `make` of sub-agent `name` returns for `task`, checked."""
    made = make(task)
    if not isinstance(made, AgentBuilder):
        raise BuildError(
            f"The child of sub-agent {name!r} returned {type(made).__name__} for its task, not "
            "an AgentBuilder; return AgentBuilder(task)... without .build()."
        )
    if made.llm_caller is None:
        raise BuildError(
            f"The child of sub-agent {name!r} has no LLM; give the builder it returns one with "
            ".llm(...) (the child runs with its own LLM, prompt, tools and limits)."
        )
    return made
