"""`agentsm --help`, `--version` and `runs` start at once: they import no more than they need
(what is loaded is checked here, in a fresh interpreter each; the time is measured by
benchmarks/startup.py). The packages export their names lazily, the command group lists its
commands from a registry, and both stay in step with what they point at."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

import agentsm
import eventstore
import replay
from agentsm import AgentBuilder, LlmResponse, MockLlmCaller
from replay.cli import COMMANDS, cli, main

HEAVY = {
    "numpy",
    "pydantic",
    "pydantic_core",
    "sqlite_utils",
    "openai",
    "anthropic",
    "httpx",
    "rich.console",
    "asyncio",
    "concurrent.futures",
    "agentsm.engine",
    "agentsm.facts",
    "agentsm.memory",
    "agentsm.builder",
    "replay.branching",
}
"""What neither the listing nor the help may load: the agent, pydantic, sqlite-utils (and numpy
with it), the provider SDKs, rich's console, asyncio."""

NOT_FOR_HELP = HEAVY | {"sqlite3", "eventstore.sqlite", "agentsm.tables", "replay.cli.common"}
"""`--help` and `--version` open no log and draw no table either."""


def loaded(*argv: str, cwd: Path) -> set[str]:
    """The modules loaded once `agentsm ARGV` has run in a new interpreter."""
    script = (
        "import json, sys\n"
        "from replay.cli import main\n"
        "code = main(sys.argv[1:])\n"
        "print(json.dumps([code, sorted(sys.modules)]), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *argv], cwd=cwd, capture_output=True, text=True, check=True
    )
    code, modules = json.loads(done.stderr.splitlines()[-1])
    assert code == 0, done.stderr
    return set(modules)


@pytest.fixture(scope="module")
def small_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("startup") / "small.db"
    builder = AgentBuilder("say hello").llm(
        MockLlmCaller([LlmResponse.final_answer("Hello to everyone who reads this.")])
    )
    engine = builder.store(str(db)).build()
    engine.run()
    engine.store.close()
    return db


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version_load_only_click_and_the_command_registry(
    flag: str, tmp_path: Path
) -> None:
    modules = loaded(flag, cwd=tmp_path)
    assert not modules & NOT_FOR_HELP, sorted(modules & NOT_FOR_HELP)
    assert not [m for m in modules if m.startswith("replay.cli.") and m != "replay.cli.options"]


NOT_FOR_LISTING = HEAVY | {
    "eventstore.sqlite",
    "eventstore.records",
    "eventstore.chain",
    "eventstore.writer",
    "replay.opening",
    "replay.errors",
    "agentsm.errors",
    "dataclasses",
    "hashlib",
    "rich.cells",
}
"""What listing an up-to-date SQLite log of narrow text does not load either: the store (its
records, hash chain and writer thread), the error classes, dataclasses, hashlib, and rich's
cell widths (text of Latin letters is measured without them)."""


def test_runs_reads_the_catalog_with_plain_sqlite3(small_log: Path, tmp_path: Path) -> None:
    modules = loaded("runs", "--db", str(small_log), cwd=tmp_path)
    assert {"sqlite3", "replay.cli.catalog_file", "replay.cli.runs"} <= modules
    assert not modules & NOT_FOR_LISTING, sorted(modules & NOT_FOR_LISTING)


def test_runs_opens_any_other_log_through_its_store(small_log: Path, tmp_path: Path) -> None:
    modules = loaded("runs", "--db", f"sqlite:///{small_log}", cwd=tmp_path)
    assert {"eventstore.sqlite", "replay.opening", "replay.cli.runs"} <= modules
    assert not modules & HEAVY, sorted(modules & HEAVY)


def test_the_version_is_the_packages(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"agentsm, version {agentsm.__version__}\n"


def test_every_registered_command_is_listed_with_the_first_sentence_of_its_help() -> None:
    for name, (target, line) in COMMANDS.items():
        module, _, attribute = target.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command) and command.name == name, target
        first = click.Command(name, help=command.help).get_short_help_str(10_000)
        assert line == first, f"COMMANDS[{name!r}] should say: {first!r}"


def test_the_overview_lists_every_command_without_loading_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    fresh = type(cli)(name="agentsm", registry=COMMANDS)
    text = fresh.get_help(click.Context(fresh, info_name="agentsm"))
    assert all(f"  {name} " in text for name in COMMANDS) and not fresh.loaded
    context = click.Context(cli)
    assert cli.get_command(context, "runs") is cli.loaded["runs"] and "runs" not in cli.commands
    assert main(["runn"]) == 2
    assert "No such command 'runn'. Did you mean 'runs'?" in capsys.readouterr().err


@pytest.mark.parametrize("package", [agentsm, eventstore, replay], ids=lambda p: p.__name__)
def test_packages_export_every_name_on_first_use(package: object) -> None:
    where_: dict[str, tuple[str, ...]] = package._LAZY  # type: ignore[attr-defined]
    exports = {name: module for module, names in where_.items() for name in names}
    names = set(package.__all__)  # type: ignore[attr-defined]
    assert set(exports) == names - {"PostgresEventStore"}
    assert names <= set(dir(package))
    for name, module in exports.items():
        value = getattr(package, name)
        where = importlib.import_module(module, package.__name__)  # type: ignore[attr-defined]
        assert value is getattr(where, getattr(package, "_RENAMED", {}).get(name, name)), name


def test_importing_the_packages_loads_none_of_their_modules(tmp_path: Path) -> None:
    script = (
        "import json, sys, agentsm, eventstore, replay\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('agentsm', 'eventstore', 'replay'))))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    loaded = json.loads(done.stdout)  # the packages, and the one module that loads their exports
    assert loaded == ["agentsm", "eventstore", "eventstore.lazy", "replay"], done.stderr
    assert agentsm.facts.__name__ == "agentsm.facts"  # a submodule is an attribute on first use
    with pytest.raises(AttributeError, match="module 'agentsm' has no attribute 'nothing'"):
        _ = agentsm.nothing  # type: ignore[attr-defined]
