"""The packages import one way: `eventstore` <- `agentsm` <- `replay`; no module of `agentsm`
or of `replay` imports, while it loads, a module that imports it back (no import cycle); and the
core of `agentsm` is in layers, each importing only from the layers below it.

For a cycle only what runs when a module loads counts: an import inside a function is a
deliberate deferral, one under `if TYPE_CHECKING:` never runs, and a package's lazy exports
(`eventstore.lazy`) are names, not imports. Importing `a.b.c` loads the packages `a.b` and `a`
first, so those count too. A deferred import still points down the layers.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("agentsm", "eventstore", "replay", "pytest_agentsm")

LAYERS = (
    (
        "facts and their codec",
        "types errors frozen images text history codec facts custom skills inputs digests "
        "reducing reading messages places marks events outputs tables",
    ),
    ("the fold", "reducers window memory trace"),
    ("recording", "recorder catalog redaction"),
    (
        "the run context and tools",
        "context tool_context tools tools.registry hooks progress questions inbox subagent",
    ),
    (
        "the states",
        "states states.base states.idle states.planning states.acting states.waiting "
        "states.observing states.reflecting states.terminal",
    ),
    ("the engine", "transitions engine threads"),
    ("the builder", "builder"),
)
"""The core of agentsm, bottom to top (modules of agentsm, by their names in the package)."""


LOAD, CALL, TYPING = "load", "call", "typing"


@dataclass(frozen=True)
class Import:
    """One module an import statement loads, its line, and when it runs: as the importing module
    loads (`load`), when a function runs (`call`), or never (`typing`, for the type checker)."""

    target: str
    line: int
    when: str

    @property
    def eager(self) -> bool:
        return self.when == LOAD


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    """Every module of the four packages, by dotted name."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[_module_name(path)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _statements(body: list[ast.stmt], when: str) -> Iterator[tuple[ast.stmt, str]]:
    """Each statement of `body`, with when it runs (`LOAD`, `CALL` or `TYPING`)."""
    for node in body:
        yield node, when
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield from _statements(node.body, CALL if when == LOAD else when)
        elif isinstance(node, ast.If):
            yield from _statements(node.body, TYPING if _is_type_checking(node.test) else when)
            yield from _statements(node.orelse, when)
        else:
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                children = getattr(node, field, None)
                if not isinstance(children, list):
                    continue
                for child in children:
                    if isinstance(child, ast.ExceptHandler | ast.match_case):
                        yield from _statements(child.body, when)
                    elif isinstance(child, ast.stmt):
                        yield from _statements([child], when)


def _with_parents(target: str, importer: str) -> Iterator[str]:
    """`target` and the packages loaded on the way to it, less the importer's own packages
    (loaded before the importer itself)."""
    own = {importer.rsplit(".", i)[0] for i in range(importer.count(".") + 1)}
    parts = target.split(".")
    for n in range(1, len(parts) + 1):
        name = ".".join(parts[:n])
        if name not in own:
            yield name


@cache
def imports(module: str) -> tuple[Import, ...]:
    """The modules of the four packages that `module` imports, each with its line."""
    path = modules()[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    known = modules()
    found: list[Import] = []
    for node, when in _statements(ast.parse(path.read_text(), str(path)).body, LOAD):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                targets.append(submodule if submodule in known else source)
        for target in targets:
            found += [
                Import(name, node.lineno, when)
                for name in _with_parents(target, module)
                if name in known
            ]
    return tuple(dict.fromkeys(found))


def _package(module: str) -> str:
    return module.partition(".")[0]


def _graph(package: str) -> dict[str, dict[str, int]]:
    """Module -> the modules of the same package it loads while it loads -> the line doing so."""
    graph: dict[str, dict[str, int]] = {}
    for module in modules():
        if _package(module) != package:
            continue
        edges = graph.setdefault(module, {})
        for found in imports(module):
            if found.eager and _package(found.target) == package and found.target != module:
                edges.setdefault(found.target, found.line)
    return graph


def _components(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def _shortest_cycle(graph: dict[str, dict[str, int]], component: list[str]) -> list[str]:
    """A shortest cycle through the first module of `component`, as the modules in order."""
    start = component[0]
    members = set(component)
    came_from: dict[str, str] = {}
    queue = [start]
    for node in queue:
        for child in sorted(graph[node]):
            if child == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if child in members and child not in came_from:
                came_from[child] = node
                queue.append(child)
    raise AssertionError(f"{start} is in a component with no cycle through it")


def cycles(package: str) -> list[str]:
    """Each import cycle among the modules of `package`, as `a (line) -> b (line) -> a`, and
    the modules tied up in it."""
    graph = _graph(package)
    told: list[str] = []
    for component in _components(graph):
        cycle = _shortest_cycle(graph, component)
        steps = [f"{a} (line {graph[a][b]})" for a, b in zip(cycle, cycle[1:], strict=False)]
        told.append(
            " -> ".join([*steps, cycle[-1]]) + f"\n    tied up with it: {', '.join(component)}"
        )
    return told


def test_every_module_is_found() -> None:
    assert {"agentsm.memory", "agentsm.llm.base", "eventstore.sqlite", "replay.cli"} <= set(
        modules()
    )


def test_a_cycle_is_found_and_told_in_order() -> None:
    graph = {"a": {"b": 3}, "b": {"c": 5}, "c": {"a": 7, "d": 1}, "d": {}}
    assert _components(graph) == [["a", "b", "c"]]
    assert _shortest_cycle(graph, ["a", "b", "c"]) == ["a", "b", "c", "a"]


def test_imports_in_functions_and_for_type_checking_do_not_load_the_module() -> None:
    found = {i.target: i.when for i in imports("agentsm")}
    assert found["eventstore.lazy"] == LOAD
    assert found["agentsm.builder"] == TYPING  # lazily exported: named for the type checker
    drawn = {i.target: i.when for i in imports("agentsm.transitions")}
    assert drawn["agentsm.pictures"] == CALL  # matplotlib loads when a table is drawn


def test_agentsm_has_no_import_cycle() -> None:
    found = cycles("agentsm")
    assert not found, "modules of agentsm import each other in a circle:\n" + "\n".join(found)


def test_replay_has_no_import_cycle() -> None:
    found = cycles("replay")
    assert not found, "modules of replay import each other in a circle:\n" + "\n".join(found)


def test_the_core_imports_only_from_the_layers_below() -> None:
    layer = {
        f"agentsm.{name}": (rank, title)
        for rank, (title, names) in enumerate(LAYERS)
        for name in names.split()
    }
    assert set(layer) <= set(modules()), sorted(set(layer) - set(modules()))
    upward = [
        f"{module} ({layer[module][1]}) line {found.line} imports {found.target} "
        f"({layer[found.target][1]})"
        for module in sorted(layer)
        for found in imports(module)
        if found.when != TYPING
        and found.target in layer
        and layer[found.target][0] > layer[module][0]
    ]
    assert not upward, "a lower layer of agentsm imports a higher one:\n" + "\n".join(upward)


def _imports_of(package: str, forbidden: tuple[str, ...]) -> list[str]:
    return [
        f"{module} line {found.line} imports {found.target}"
        for module in modules()
        if _package(module) == package
        for found in imports(module)
        if _package(found.target) in forbidden
    ]


def test_eventstore_imports_nothing_of_agentsm_or_replay() -> None:
    assert _imports_of("eventstore", ("agentsm", "replay")) == []


def test_agentsm_imports_nothing_of_replay() -> None:
    assert _imports_of("agentsm", ("replay",)) == []
