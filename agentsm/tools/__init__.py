"""Tools: the registry the engine runs them from, `@tool`, and the toolboxes agentsm ships.

`registry` holds `Tool`, `ToolRegistry`, `ToolOutcome` and `@tool`, all importable from here.
"""

from .registry import Tool, ToolContext, ToolOutcome, ToolRegistry, tool
from .registry import ToolFunc as ToolFunc
from .registry import schemas_digest as schemas_digest

__all__ = ["Tool", "ToolContext", "ToolOutcome", "ToolRegistry", "tool"]
