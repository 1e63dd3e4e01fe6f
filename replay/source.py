"""Where recorded runs come from: opening a log, resolving run ids, loading a user's builder."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentsm import AgentBuilder, BuildError, State
from agentsm.facts import RunStarted
from agentsm.mcp import McpServer
from agentsm.skills import SkillSet
from agentsm.subagent import SubAgentTool
from agentsm.trace import decode
from eventstore import EventStore, UnknownRun

from .errors import BuilderRequired
from .opening import StoreLike, can_write, open_store, opened

__all__ = [
    "Builder",
    "StoreLike",
    "agent_of",
    "builder_needs",
    "can_write",
    "load_builder",
    "open_store",
    "opened",
    "recorded_builder",
    "resolve_run",
]

Builder = Callable[[str], AgentBuilder]
"""The user's agent: takes the recorded task, returns an AgentBuilder with the current tools,
prompts, config, table and handlers. Replay supplies the LLM and the store."""


def resolve_run(store: EventStore, run_id: str) -> str:
    """The full id of a run given its id or a unique prefix of it (through the id index)."""
    return store.resolve(run_id)


def load_object(spec: str, option: str, what: str) -> tuple[str, Any]:
    """The name and the callable `module:NAME` or `path/to/file.py:NAME` names, as given to
    `option` on the command line (`what` says what NAME is: a factory, a function)."""
    module_name, _, attr = spec.rpartition(":")
    if not module_name or not attr:
        raise BuildError(f"{option} {spec!r}: use module:{what} or path/to/file.py:{what}.")
    try:
        if module_name.endswith(".py") or os.sep in module_name:
            path = Path(module_name).resolve()
            loaded = importlib.util.spec_from_file_location(path.stem, path)
            if loaded is None or loaded.loader is None:
                raise ImportError(f"cannot load {path}")
            module = importlib.util.module_from_spec(loaded)
            sys.modules[path.stem] = module
            loaded.loader.exec_module(module)
        else:
            if os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(module_name)
    except (ImportError, OSError) as e:
        raise BuildError(f"{option} {spec!r}: cannot import {module_name!r} ({e}).") from e
    found = getattr(module, attr, None)
    if not callable(found):
        kind = "callable" if what == "factory" else what
        raise BuildError(f"{option} {spec!r}: {module_name} has no {kind} {attr!r}.")
    return attr, found


def load_builder(spec: str) -> Builder:
    """`module:factory` or `path/to/file.py:factory`, as given on the command line."""
    attr, factory = load_object(spec, "--builder", "factory")

    def checked(task: str) -> AgentBuilder:
        made = factory(task)
        if not isinstance(made, AgentBuilder):
            raise BuildError(
                f"--builder {spec!r}: {attr}(task) returned {type(made).__name__}, not an "
                "AgentBuilder; make it return AgentBuilder(task)... without calling .build()."
            )
        return made

    return checked


def _unavailable(name: str) -> Callable[[dict[str, Any]], Any]:
    def run(args: dict[str, Any]) -> Any:
        raise RuntimeError(
            f"tool '{name}' is not available here: only its recorded results are; pass a "
            "builder to run it"
        )

    return run


def agent_of(store: EventStore, definition: RunStarted, builder: Builder) -> Builder:
    """The agent that continues a run from its log: `builder`, or, for a sub-agent run given
    its parent's builder (a worker's, `--builder` of the parent), the child agent that the
    parent's sub-agent tool makes."""
    link = definition.parent_call
    if link is None:
        return builder
    try:
        first = store.read(link.run_id, upto=1)
    except UnknownRun:
        first = []
    parent = decode(first[0]) if first else None
    if not isinstance(parent, RunStarted):
        return builder  # the parent is not in this log
    made = builder(parent.task).tools.get(link.tool)
    return made.builder_for if isinstance(made, SubAgentTool) else builder


def builder_needs(definition: RunStarted) -> list[str]:
    """What of a recorded agent lives only in the user's code, so that replaying or branching
    the run without the user's builder would run another agent."""
    needs = []
    builtin = [s for s in definition.custom_handlers if s in set(State)]
    custom = [s for s in definition.custom_handlers if s not in set(State)]
    if custom:
        needs.append(f"custom state{'s' if len(custom) > 1 else ''} {', '.join(custom)}")
    if builtin:
        needs.append(f"its own handlers for {', '.join(builtin)}")
    if definition.custom_table:
        needs.append("a custom transition table")
    if definition.redactions:
        needs.append(f"redaction hooks ({', '.join(definition.redactions)})")
    if definition.custom_facts:
        needs.append(f"its own facts ({', '.join(definition.custom_facts)})")
    return needs


def recorded_builder(definition: RunStarted, run_id: str = "") -> AgentBuilder:
    """An agent rebuilt from a run's recorded definition: same task, prompt, config, tool
    schemas (without their functions) and flags, blacklist, approvals and budget. A run whose
    agent had parts only the user's code holds is refused (`BuilderRequired`)."""
    needs = builder_needs(definition)
    if needs:
        raise BuilderRequired(run_id, needs)
    builder = (
        AgentBuilder(definition.task)
        .task_type(definition.task_type)
        .system_prompt(definition.system_prompt)
        .config(definition.config)
    )
    served = {name for spec in definition.mcp_servers for name in spec.tools}
    questions = definition.questions or ()
    for schema in definition.tools:
        if schema.name in served:
            continue  # offered by its recorded MCP server below, which is never contacted
        if schema.name in questions:  # a question to a person: answered, never run
            builder.ask_human(name=schema.name, description=schema.description)
            continue
        builder.tool(
            schema.name,
            schema.description,
            schema.input_schema,
            _unavailable(schema.name),
            idempotent=schema.name in definition.idempotent_tools,
        )
    schemas = {s.name: s for s in definition.tools}
    for spec in definition.mcp_servers:
        tools = [schemas[name] for name in spec.tools if name in schemas]
        builder.mcp_server(McpServer.recorded(spec, tools))
    for name in definition.blacklisted_tools:
        builder.blacklist_tool(name)
    for name in definition.approval_required:
        builder.require_approval(name)
    if definition.budget is not None:
        builder.budget(definition.budget)
    if definition.skills:  # read_skill is served from the log: no skill files needed
        builder.skills(SkillSet.recorded(definition.skills))
    if definition.name is not None:
        builder.name(definition.name)
    return builder.parent_call(definition.parent_call)
