"""The README's Python blocks run, top to bottom, as a user would paste them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_examples() -> None:
    assert len(python_blocks()) >= 3


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_readme_block_runs(index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    # compiled without this module's `from __future__ import annotations`, as a user's file is
    code = compile(python_blocks()[index], f"README block {index + 1}", "exec", dont_inherit=True)
    exec(code, {})


def test_readme_diagram_is_the_default_table() -> None:
    from agentsm import build_transition_table

    diagram = re.search(r"```mermaid\n(.*?)```", README.read_text(), flags=re.S)
    assert diagram is not None
    assert diagram.group(1).strip() == build_transition_table().to_mermaid().strip()
