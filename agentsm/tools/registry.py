"""Tools: the registry the engine runs them from, and `@tool`, which derives a schema from hints.

A tool never crashes the loop: an unknown name, arguments that break the schema, an exception
or a timeout all come back as an `ERROR: {type}: {message}` observation the LLM can read. A call
that times out is abandoned at once; unless its tool is idempotent, its outcome is unknown (it
may have taken effect), and a human is asked, as after a crash. A tool that raises
`KeyboardInterrupt` or `SystemExit` stops the run: the exception goes on to the caller.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, get_args, overload

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from .._invoke import Settled, call_at_once, call_with_deadline
from .._sync import run_sync
from ..errors import BuildError
from ..frozen import thaw
from ..images import Image, ImageLike, as_images
from ..schema import schema_errors
from ..tool_context import ToolContext, _current
from ..types import TokenUsage, ToolSchema

__all__ = ["Tool", "ToolContext", "ToolOutcome", "ToolRegistry", "tool"]

ToolFunc = Callable[..., Any]


def _content(result: Any) -> tuple[str, tuple[Image, ...]]:
    """A tool's result as the text the LLM reads and the images it sees: an Image, or a list
    or tuple holding images (with text or values around them), is named in the text."""
    if isinstance(result, Image):
        return _named(result), (result,)
    if isinstance(result, list | tuple) and any(isinstance(x, Image) for x in result):
        parts = [
            _named(x) if isinstance(x, Image) else x if isinstance(x, str) else _json(x)
            for x in result
        ]
        return "\n".join(parts), tuple(x for x in result if isinstance(x, Image))
    return (result if isinstance(result, str) else _json(result)), ()


def _named(image: Image) -> str:
    return f"[image {image.media_type}]"


def _json(value: Any) -> str:
    return json.dumps(value, default=str)


@dataclass(frozen=True)
class ToolOutcome:
    """The result of one tool execution, already phrased as the observation the LLM will see.

    `known` is False for a call abandoned before it reported (a timeout): it may or may not
    have taken effect, so it is not recorded as executed and a human is asked. `images` are
    sent to the LLM with the observation (their bytes stored once in the log's blobs).
    """

    observation: str
    success: bool
    error_type: str | None = None
    known: bool = True
    usage: TokenUsage | None = None
    """Tokens the call spent that count into the run's usage (a sub-agent sharing the budget)."""
    images: tuple[Image, ...] = ()

    @classmethod
    def ok(cls, result: Any, *, images: Iterable[ImageLike] = ()) -> ToolOutcome:
        """A success; non-string results are rendered as JSON. A result that is an `Image`,
        or a list holding images, is its images, each named `[image TYPE]` in the text in its
        place; `images` adds more (bytes, files or URLs too)."""
        shown, found = _content(result)
        return cls(f"SUCCESS: {shown}", True, images=(*found, *as_images(images)))

    @classmethod
    def failed(cls, error_type: str, message: str) -> ToolOutcome:
        """A failure as data: `ERROR: {type}: {message}`."""
        return cls(f"ERROR: {error_type}: {message}", False, error_type)

    @classmethod
    def unknown(cls, error_type: str, message: str) -> ToolOutcome:
        """A call abandoned before it reported; whether it took effect is unknown."""
        return cls(f"ERROR: {error_type}: {message}", False, error_type, known=False)


class Tool:
    """A callable tool: its schema, its function, and how to call it.

    `keywords=True` calls `func(**args)` after validating the arguments with a pydantic model
    built from the function's signature (the `@tool` form); otherwise `func(args)` gets the
    argument dict, checked against `schema` (the explicit form). `context_param` names the
    parameter that receives the call's `ToolContext`.
    """

    def __init__(
        self,
        name: str,
        description: str,
        schema: dict[str, Any],
        func: ToolFunc,
        *,
        keywords: bool = False,
        idempotent: bool = False,
        timeout: float | None = None,
        model: type[BaseModel] | None = None,
        context_param: str | None = None,
        fast: bool = False,
    ) -> None:
        if not name or not isinstance(name, str):
            raise BuildError(f"A tool needs a non-empty string name, not {name!r}.")
        if not callable(func):
            raise BuildError(f"Tool {name!r}: {func!r} is not callable.")
        if not isinstance(schema, dict):
            raise BuildError(f"Tool {name!r}: the schema must be a JSON schema dict.")
        self.name = name
        self.description = description
        self.schema = schema
        self.func = func
        self.keywords = keywords
        self.idempotent = idempotent
        self.timeout = timeout
        self._model = model
        self.context_param = context_param
        self.is_async = inspect.iscoroutinefunction(func)
        self.fast = fast and not self.is_async
        """A sync tool that says it returns at once (no I/O, no waiting): called on the event
        loop's thread, without the hop to a worker thread; it cannot be abandoned midway, so
        a timeout does not apply to it."""

    @property
    def tool_schema(self) -> ToolSchema:
        """What the LLM is told about this tool."""
        return ToolSchema(name=self.name, description=self.description, input_schema=self.schema)

    def validate(self, args: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """Arguments ready to pass, and the problems found (empty when valid)."""
        if self._model is not None:
            try:
                parsed = self._model.model_validate(args)
            except ValidationError as e:
                return args, [
                    f"args.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
                    for err in e.errors()
                ]
            return {k: getattr(parsed, k) for k in type(parsed).model_fields}, []
        return args, schema_errors(args, self.schema)

    def invoke(self, args: dict[str, Any], context: ToolContext | None = None) -> Any:
        """Call the function with validated arguments (a coroutine for async tools)."""
        if not self.keywords:
            return self.func(args)
        if self.context_param is not None:
            args = {**args, self.context_param: context or ToolContext("", "", self.name)}
        return self.func(**args)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def __repr__(self) -> str:
        flags = (" idempotent" if self.idempotent else "") + (" fast" if self.fast else "")
        return f"<Tool {self.name!r}{' async' if self.is_async else ''}{flags}>"


def _is_context(hint: Any) -> bool:
    return hint is ToolContext or ToolContext in get_args(hint)


def _schema_from_signature(
    func: ToolFunc, name: str
) -> tuple[dict[str, Any], type[BaseModel], str | None]:
    fields: dict[str, Any] = {}
    context_param = None
    hints = inspect.get_annotations(func, eval_str=True)
    for pname, param in inspect.signature(func).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise BuildError(f"@tool {name!r}: *args and **kwargs cannot be described to an LLM.")
        hint = hints.get(pname, Any)
        if _is_context(hint):
            context_param = pname  # filled by the engine, never shown to the LLM
            continue
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (hint, default)
    model = create_model(f"{name}_args", __config__=ConfigDict(extra="forbid"), **fields)
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return schema, model, context_param


@overload
def tool(func: ToolFunc, /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    idempotent: bool = False,
    timeout: float | None = None,
    fast: bool = False,
) -> Callable[[ToolFunc], Tool]: ...


def tool(
    func: ToolFunc | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    idempotent: bool = False,
    timeout: float | None = None,
    fast: bool = False,
) -> Tool | Callable[[ToolFunc], Tool]:
    """Make a tool of a typed function: the schema comes from its hints, the description from
    the first paragraph of its docstring. `idempotent` tools may be re-run on resume (and after
    a timeout) without asking a human. A parameter typed `ToolContext` receives the call's
    context and is not part of the schema. A sync function that returns at once (no I/O, no
    waiting) may say so with `fast=True`: it is called on the event loop's thread, sparing the
    hop to a worker thread (about a third of a step with a sync tool); one that blocks would
    block every run on the loop."""

    def wrap(fn: ToolFunc) -> Tool:
        tool_name = name or fn.__name__
        doc = inspect.getdoc(fn) or ""
        desc = description or doc.split("\n\n")[0].replace("\n", " ").strip() or tool_name
        schema, model, context_param = _schema_from_signature(fn, tool_name)
        return Tool(
            tool_name,
            desc,
            schema,
            fn,
            keywords=True,
            idempotent=idempotent,
            timeout=timeout,
            model=model,
            context_param=context_param,
            fast=fast,
        )

    return wrap(func) if func is not None else wrap


def schemas_digest(schemas: Iterable[ToolSchema]) -> str:
    """The digest `LlmRequested.tools_digest` records of the tool schemas a request offered."""
    data = json.dumps([s.model_dump() for s in schemas], sort_keys=True)
    return hashlib.sha256(data.encode()).hexdigest()[:32]


class ToolRegistry:
    """Tools by name: registration, the schemas sent to the LLM, and execution."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._digest: str | None = None

    def register(
        self,
        name: str,
        description: str,
        schema: dict[str, Any],
        func: Callable[[dict[str, Any]], Any] | Callable[[dict[str, Any]], Awaitable[Any]],
        *,
        idempotent: bool = False,
        timeout: float | None = None,
    ) -> Tool:
        """Register `func(args: dict)` under `name`; a name registered twice is a BuildError."""
        return self.add(
            Tool(name, description, schema, func, idempotent=idempotent, timeout=timeout)
        )

    def add(self, item: Tool) -> Tool:
        """Register a `Tool` (what `@tool` returns)."""
        if item.name in self._tools:
            raise BuildError(f"A tool named {item.name!r} is registered already; rename one.")
        self._tools[item.name] = item
        self._digest = None
        return item

    def get(self, name: str) -> Tool | None:
        """The tool named `name`, or None."""
        return self._tools.get(name)

    def has(self, name: str) -> bool:
        """True if a tool with this name is registered."""
        return name in self._tools

    def names(self) -> list[str]:
        """Registered tool names, in registration order."""
        return list(self._tools)

    def schemas(self) -> list[ToolSchema]:
        """The schema of every tool, in registration order; sent with every LLM call."""
        return [t.tool_schema for t in self._tools.values()]

    def digest(self) -> str:
        """A digest of the schemas, so replay can tell whether the tool set changed."""
        if self._digest is None:
            self._digest = schemas_digest(self.schemas())
        return self._digest

    def refusal(self, name: str, args: Any) -> ToolOutcome | None:
        """Why a call cannot run (an unknown tool, arguments that break its schema), as the
        failed outcome the LLM will read; None when the call may run. Nothing is executed."""
        prepared = self._prepare(name, args)
        return prepared if isinstance(prepared, ToolOutcome) else None

    def _prepare(self, name: str, args: Any) -> tuple[Tool, dict[str, Any]] | ToolOutcome:
        entry = self._tools.get(name)
        if entry is None:
            known = ", ".join(self._tools) or "none"
            return ToolOutcome.failed(
                "UnknownTool", f"Tool '{name}' not found in registry (registered: {known})"
            )
        if not isinstance(args, dict):
            return ToolOutcome.failed("InvalidArguments", f"arguments must be an object: {args!r}")
        values, problems = entry.validate(args)
        if problems:
            return ToolOutcome.failed("InvalidArguments", "; ".join(problems))
        return entry, values

    async def aexecute(
        self,
        name: str,
        args: dict[str, Any],
        *,
        timeout: float | None = None,
        context: ToolContext | None = None,
    ) -> ToolOutcome:
        """Run a tool; every failure comes back as an `ERROR:` outcome, never as an exception,
        except a `KeyboardInterrupt` or `SystemExit` the tool raised, which is raised again.
        Sync tools run on threads of their own, so they neither block the loop nor each other,
        and one that misses its timeout is abandoned at once. `context` defaults to that of the
        call the engine is running (`ToolContext.current()`). The tool gets a plain copy of
        `args`, which it may change without changing anything recorded."""
        prepared = self._prepare(name, thaw(args))
        if isinstance(prepared, ToolOutcome):
            return prepared
        entry, values = prepared
        limit = entry.timeout if entry.timeout is not None else timeout
        ctx = context or _current.get() or ToolContext("", "", name)
        if entry.fast:  # returns at once: called here, on the loop's thread
            settled: Settled | None = await call_at_once(lambda: entry.invoke(values, ctx))
        else:
            settled = await call_with_deadline(
                lambda: entry.invoke(values, ctx), is_async=entry.is_async, name=name, limit=limit
            )
        if settled is None:
            message = f"tool '{name}' did not finish in {limit}s and was abandoned"
            if entry.idempotent:
                return ToolOutcome.failed("TimeoutError", message)
            return ToolOutcome.unknown("TimeoutError", f"{message}; it may have taken effect")
        kind, value = settled
        if kind == "stop":
            raise value
        if kind == "error":  # failure is data: the LLM reads it
            return ToolOutcome.failed(type(value).__name__, str(value))
        if isinstance(value, ToolOutcome):  # a tool that phrases its own outcome (a sub-agent)
            return value
        return ToolOutcome.ok(value)

    def execute(
        self, name: str, args: dict[str, Any], *, timeout: float | None = None
    ) -> ToolOutcome:
        """`aexecute` from sync code."""
        return run_sync(self.aexecute(name, args, timeout=timeout))

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __repr__(self) -> str:
        return f"ToolRegistry({', '.join(self._tools) or 'empty'})"
