"""The README, the front page: its Python blocks run, top to bottom, as a user would paste them;
it stays short, keeps the two commands, and its links lead somewhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_examples() -> None:
    assert len(python_blocks()) >= 1


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_readme_block_runs(index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    # compiled without this module's `from __future__ import annotations`, as a user's file is
    code = compile(python_blocks()[index], f"README block {index + 1}", "exec", dont_inherit=True)
    exec(code, {})


def test_readme_is_a_front_page() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 250, "the README is a front page: move the rest to docs/"
    assert "```sh\npython -m pip install -e . && agentsm demo\n```" in text
    assert "```sh\npython -m pip install -e '.[test]' && python -m pytest\n```" in text


def test_readme_links_lead_somewhere() -> None:
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text())
    local = [link for link in links if "://" not in link]
    assert local, "the README links into the docs"
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing, f"links to nothing: {missing}"
