"""Read-only JSON values: the arguments held by recorded facts (and so by memory).

A fact is frozen, and so is every dict and list inside it: no tool, approval callback, LLM
caller or stream consumer can change what the log says happened, or memory outside the
reducer. Effects get plain copies (`thaw`) that they may change freely. `FrozenDict` and
`FrozenList` are a dict and a list for every reader (`json.dumps`, `==`, `isinstance`); only
changing them raises.
"""

from __future__ import annotations

from typing import Annotated, Any, NoReturn, SupportsIndex

from pydantic import AfterValidator, BaseModel

__all__ = ["FrozenDict", "FrozenList", "JsonObject", "freeze", "same_json", "thaw"]


def _refuse(value: object) -> NoReturn:
    raise TypeError(
        f"This {type(value).__name__} is part of a recorded fact and cannot be changed (facts "
        "change only by recording new ones); change a copy: agentsm.thaw(value)."
    )


class FrozenDict(dict[str, Any]):
    """A dict that refuses changes; copies of it are itself, `thaw` gives a plain dict."""

    __slots__ = ()

    def __setitem__(self, key: str, value: Any) -> NoReturn:
        _refuse(self)

    def __delitem__(self, key: str) -> NoReturn:
        _refuse(self)

    def __ior__(self, other: Any) -> NoReturn:  # type: ignore[misc]
        _refuse(self)

    def clear(self) -> NoReturn:
        _refuse(self)

    def pop(self, *args: Any) -> NoReturn:
        _refuse(self)

    def popitem(self) -> NoReturn:
        _refuse(self)

    def setdefault(self, *args: Any) -> NoReturn:
        _refuse(self)

    def update(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse(self)

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenDict:
        return self

    def __reduce__(self) -> tuple[type[FrozenDict], tuple[dict[str, Any]]]:
        return FrozenDict, (dict(self),)


class FrozenList(list[Any]):
    """A list that refuses changes; copies of it are itself, `thaw` gives a plain list."""

    __slots__ = ()

    def __setitem__(self, index: Any, value: Any) -> NoReturn:
        _refuse(self)

    def __delitem__(self, index: Any) -> NoReturn:
        _refuse(self)

    def __iadd__(self, other: Any) -> NoReturn:  # type: ignore[misc]
        _refuse(self)

    def __imul__(self, count: SupportsIndex) -> NoReturn:
        _refuse(self)

    def append(self, value: Any) -> NoReturn:
        _refuse(self)

    def extend(self, values: Any) -> NoReturn:
        _refuse(self)

    def insert(self, index: SupportsIndex, value: Any) -> NoReturn:
        _refuse(self)

    def pop(self, index: SupportsIndex = -1) -> NoReturn:
        _refuse(self)

    def remove(self, value: Any) -> NoReturn:
        _refuse(self)

    def reverse(self) -> NoReturn:
        _refuse(self)

    def sort(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse(self)

    def clear(self) -> NoReturn:
        _refuse(self)

    def __copy__(self) -> FrozenList:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenList:
        return self

    def __reduce__(self) -> tuple[type[FrozenList], tuple[list[Any]]]:
        return FrozenList, (list(self),)


def freeze(value: Any) -> Any:
    """`value` with every dict and list made read-only, sharing no container with `value`.
    Anything else is kept as it is (a tuple, a set: the round-trip check before a fact is
    committed refuses what JSON would not read back the same)."""
    if isinstance(value, dict):
        return FrozenDict({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return FrozenList(freeze(v) for v in value)
    if isinstance(value, tuple):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """A plain copy of a JSON value (dicts and lists all new), which the caller may change."""
    if isinstance(value, dict):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(v) for v in value]
    return value


def same_json(a: Any, b: Any) -> bool:
    """Whether two values are equal as JSON holds them: `==` takes 1, 1.0 and true for one
    another, which JSON, a tool reading its arguments and a replay tell apart. Models are equal
    when they are of one type with equal fields; a str subclass (an enum) is its text."""
    if a is b:
        return True
    if a is None or b is None:
        return False
    kind = type(a)
    if kind is str:
        return isinstance(b, str) and a == b
    if kind is int:
        return not isinstance(b, bool | float) and a == b
    if isinstance(a, dict):
        if not isinstance(b, dict) or len(a) != len(b):
            return False
        for key, value in a.items():
            other = b.get(key, _MISSING)
            if value is not other and (other is _MISSING or not same_json(value, other)):
                return False
        return True
    if isinstance(a, list | tuple):
        return isinstance(b, list | tuple) and len(a) == len(b) and all(map(same_json, a, b))
    if isinstance(a, BaseModel):
        return type(a) is type(b) and same_json(a.__dict__, b.__dict__)
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, float) and isinstance(b, float) and a == b
    return bool(a == b)


_MISSING = object()


JsonObject = Annotated[dict[str, Any], AfterValidator(freeze)]
"""A JSON object field of a recorded model, frozen when the model is made (or read back)."""
