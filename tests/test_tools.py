"""Tools: schemas from type hints, validation, sync and async execution, failures as data."""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest

from agentsm import BuildError, Tool, ToolRegistry, tool
from agentsm.schema import schema_errors


@tool
def weather(city: str, unit: Literal["C", "F"] = "C", days: int = 1) -> str:
    """Forecast for a city.

    Longer notes that are not part of the description.
    """
    return f"{city}: 20{unit} for {days} day(s)"


def test_schema_and_description_from_hints_and_docstring() -> None:
    assert isinstance(weather, Tool)
    assert weather.name == "weather"
    assert weather.description == "Forecast for a city."
    assert weather.schema == {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"default": "C", "enum": ["C", "F"], "type": "string"},
            "days": {"default": 1, "type": "integer"},
        },
        "required": ["city"],
        "additionalProperties": False,
    }
    assert weather("Oslo") == "Oslo: 20C for 1 day(s)"  # still callable


def test_decorator_options() -> None:
    @tool(name="add", description="Add two numbers", idempotent=True)
    async def adder(a: float, b: float) -> float:
        return a + b

    assert (adder.name, adder.description, adder.idempotent, adder.is_async) == (
        "add",
        "Add two numbers",
        True,
        True,
    )
    tools = ToolRegistry()
    tools.add(adder)
    assert tools.execute("add", {"a": 1, "b": 2.5}).observation == "SUCCESS: 3.5"


def test_registry_basics() -> None:
    tools = ToolRegistry()
    tools.add(weather)
    tools.register("echo", "Echo", {"type": "object"}, lambda args: args)
    assert len(tools) == 2 and tools.has("echo") and not tools.has("nope")
    assert [s.name for s in tools.schemas()] == ["weather", "echo"]
    assert tools.execute("echo", {"x": 1}).observation == 'SUCCESS: {"x": 1}'
    with pytest.raises(BuildError, match="registered already"):
        tools.add(weather)
    assert "weather" in repr(tools)


def test_typed_validation_messages() -> None:
    tools = ToolRegistry()
    tools.add(weather)
    bad = tools.execute("weather", {"city": "Oslo", "unit": "K"})
    assert not bad.success and bad.error_type == "InvalidArguments"
    assert "args.unit" in bad.observation
    extra = tools.execute("weather", {"city": "Oslo", "wind": True})
    assert "args.wind" in extra.observation


def test_execute_works_inside_a_running_loop() -> None:
    tools = ToolRegistry()
    tools.add(weather)

    async def main() -> str:
        return tools.execute("weather", {"city": "Rome"}).observation

    assert asyncio.run(main()) == "SUCCESS: Rome: 20C for 1 day(s)"


def test_digest_changes_with_the_schema() -> None:
    a, b = ToolRegistry(), ToolRegistry()
    a.register("t", "one", {"type": "object"}, lambda x: x)
    b.register("t", "two", {"type": "object"}, lambda x: x)
    assert a.digest() != b.digest()


@pytest.mark.parametrize(
    ("value", "schema", "errors"),
    [
        ({"a": 1}, {"type": "object", "required": ["a", "b"]}, ["args.b is required"]),
        (
            {"a": True},
            {"properties": {"a": {"type": "integer"}}},
            ["args.a should be integer, got bool"],
        ),
        ({"a": 2.0}, {"properties": {"a": {"type": "integer"}}}, []),
        (
            {"a": [1, "x"]},
            {"properties": {"a": {"items": {"type": "integer"}}}},
            ["args.a[1] should be integer, got str"],
        ),
        ({"a": 5}, {"properties": {"a": {"maximum": 3}}}, ["args.a should be <= 3, got 5"]),
        ({"a": 1}, {"additionalProperties": False}, ["args.a is not an accepted argument"]),
        ({"a": "x"}, {"properties": {"a": {"type": ["string", "null"]}}}, []),
    ],
)
def test_schema_errors(value: object, schema: dict[str, object], errors: list[str]) -> None:
    assert schema_errors(value, schema) == errors


def test_bad_tool_definitions_are_build_errors() -> None:
    with pytest.raises(BuildError, match="args and \\*\\*kwargs"):
        tool(lambda *a: a)
    with pytest.raises(BuildError, match="not callable"):
        Tool("x", "y", {}, "not a function")  # type: ignore[arg-type]
