"""Exports loaded on first use: a package lists where each exported name lives, and importing the
package imports none of them until one is asked for (so that `agentsm --help` pays nothing for
what it does not show). `eventstore`, `agentsm` and `replay` export this way."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["exports"]


def exports(
    package: str,
    namespace: dict[str, Any],
    where: Mapping[str, tuple[str, ...]],
    renamed: Mapping[str, str] | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package` (whose globals are `namespace`): an exported
    name (`where`: module relative to the package -> its names; `renamed`: exported name -> its
    name in the module), or a submodule, imported on first use and kept in `namespace`."""
    by_name = {name: module for module, names in where.items() for name in names}
    aliases = dict(renamed or {})

    def getattr_(name: str) -> Any:
        module = by_name.get(name)
        if module is None:
            try:
                return importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as e:
                if e.name != f"{package}.{name}":
                    raise
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), aliases.get(name, name))
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *namespace.get("__all__", ())})

    return getattr_, dir_
