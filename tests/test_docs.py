"""The docs site's Python examples run, each on its own, as a user would paste them; the
pages the site is built from agree with the code they describe."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def python_blocks() -> list[tuple[str, int, str]]:
    """Every ```python block of the site: (page, its number on the page, the code)."""
    blocks = []
    for page in sorted(DOCS.rglob("*.md")):
        found = re.findall(r"^```python\n(.*?)^```", page.read_text(), flags=re.S | re.M)
        name = page.relative_to(DOCS).as_posix()
        blocks += [(name, n, code) for n, code in enumerate(found, 1)]
    return blocks


BLOCKS = python_blocks()


def test_the_site_has_examples() -> None:
    assert len(BLOCKS) >= 20


@pytest.mark.parametrize(
    "code", [b[2] for b in BLOCKS], ids=[f"{page}-{n}" for page, n, _ in BLOCKS]
)
def test_docs_block_runs(code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    # compiled without this module's `from __future__ import annotations`, as a user's file is
    exec(compile(code, "docs block", "exec", dont_inherit=True), {})


def test_the_machine_page_draws_the_default_table() -> None:
    from agentsm import build_transition_table

    page = (DOCS / "concepts" / "machine.md").read_text()
    diagram = re.search(r"```mermaid\n(.*?)```", page, flags=re.S)
    assert diagram is not None
    assert diagram.group(1).strip() == build_transition_table().to_mermaid().strip()


def test_the_version_is_kept_in_one_place() -> None:
    import tomllib

    import agentsm

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "agentsm.__version__"}
    releases = re.findall(r"^## (\d+\.\d+\.\d+)$", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert releases[0] == agentsm.__version__, "the changelog's newest release is the package's"


def test_generated_pages_hold_the_code_s_numbers() -> None:
    import importlib.util

    from agentsm.facts import FACTS
    from eventstore import SCHEMA_VERSION

    spec = importlib.util.spec_from_file_location("versions_hook", DOCS / "_hooks" / "versions.py")
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    page = hook.on_page_markdown((DOCS / "versions.md").read_text())
    assert "{{" not in page and "<!-- generated" not in page
    assert "| the SQLite log's schema | `PRAGMA user_version`" in page
    assert hook.latest("eventstore/migrations.py") == str(SCHEMA_VERSION)
    for kind, version in FACTS.versions.items():
        assert f"| `{kind}` | {version} |" in page
    tables = hook.on_page_markdown((DOCS / "reference" / "log-tables.md").read_text())
    assert "| `runs` | `run_id`, `task`" in tables


def test_the_command_line_page_names_every_command() -> None:
    import click

    from replay.cli import cli

    page = (DOCS / "how-to" / "command-line.md").read_text()
    block = page.split("```\n", 2)[1]  # the overview of the commands, first on the page
    names = cli.list_commands(click.Context(cli))
    missing = [name for name in names if not re.search(rf"(agentsm|\|) ?{name}\b", block)]
    assert not missing, f"the overview on how-to/command-line.md leaves out {missing}"
