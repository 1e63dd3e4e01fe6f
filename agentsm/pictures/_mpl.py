"""matplotlib, imported only when a picture is drawn (the `pictures` extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import BuildError

__all__ = ["figure", "save"]


def figure(width: float, height: float) -> Any:
    """A new matplotlib Figure, without pyplot (works headless and in notebooks)."""
    try:
        from matplotlib.figure import Figure
    except ImportError as e:  # pragma: no cover - matplotlib is in the test extra
        raise BuildError(
            "Drawing pictures needs matplotlib: pip install 'agentsm[pictures]'."
        ) from e
    return Figure(figsize=(width, height), dpi=100)


def save(fig: Any, path: str | Path) -> Path:
    """Write the figure as SVG or PNG, by the file's extension."""
    out = Path(path)
    if out.suffix.lower() not in (".svg", ".png"):
        raise BuildError(f"Cannot write {out.name}: use a .svg or .png file name.")
    fig.savefig(out, bbox_inches="tight")
    return out
