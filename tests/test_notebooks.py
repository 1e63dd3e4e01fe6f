"""The notebooks run top to bottom on a fresh install, offline; their outputs are committed."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
NAMES = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))


def _maker() -> object:
    spec = importlib.util.spec_from_file_location("make_notebooks", NOTEBOOKS / "make_notebooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_notebooks"] = module
    spec.loader.exec_module(module)
    return module


def test_the_six_notebooks_are_there() -> None:
    assert NAMES == [
        "01_quickstart.ipynb",
        "02_record_and_replay.ipynb",
        "03_time_travel_and_branching.ipynb",
        "04_property_testing.ipynb",
        "05_human_in_the_loop.ipynb",
        "06_providers.ipynb",
    ]


@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_top_to_bottom(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    committed = nbformat.read(NOTEBOOKS / name, as_version=4)
    code = [c for c in committed.cells if c.cell_type == "code"]
    assert any(c.get("outputs") for c in code), "outputs are committed"
    maker = _maker()
    fresh = maker.build(name)  # type: ignore[attr-defined]
    assert [c.source for c in fresh.cells] == [c.source for c in committed.cells], (
        "the committed notebook is out of date: run python notebooks/make_notebooks.py"
    )
    started = time.perf_counter()
    executed = maker.execute(fresh, tmp_path)  # type: ignore[attr-defined]
    with capsys.disabled():  # the README promises a few seconds each: shown on every run
        print(f"\n{name} ran in {time.perf_counter() - started:.1f} s", end=" ")
    errors = [o for c in executed.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
